//! Which cuDNN RNN algorithm a call runs: the policy ([`CudnnAlgo`], a process-wide
//! setting) and the pick for one call, checked against what the algorithm accepts so
//! that a refused pick becomes the standard algorithm with the reason named.

use std::str::FromStr;
use std::sync::Mutex;

use cudnn_rnn::{
    AlgoCall, DeviceProps, RnnAlgo, RnnConfig, SMALL_H_BACKWARD_MAX_HIDDEN, SeqShape, choose_algo,
};

/// How the cuDNN op chooses cuDNN's RNN algorithm.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum CudnnAlgo {
    /// Always `CUDNN_RNN_ALGO_STANDARD` (the most exact in FP32: see docs/numerics.md).
    Standard,
    /// PyTorch's choice per call (`get_algo`: `PERSIST_STATIC_SMALL_H` for small hidden
    /// sizes, `PERSIST_STATIC` for some half-precision shapes, else standard);
    /// [`cudnn_rnn::choose_algo`] has the rules. The default.
    Auto,
    /// One algorithm for every call it accepts (tests and benchmarks); a call it refuses
    /// runs the standard algorithm, and the trace says why.
    Forced(RnnAlgo),
}

impl FromStr for CudnnAlgo {
    type Err = String;

    /// `standard`, `auto`, or an algorithm's name (`persist_static`,
    /// `persist_static_small_h`).
    fn from_str(text: &str) -> Result<Self, String> {
        match text.trim().to_ascii_lowercase().as_str() {
            "standard" => Ok(Self::Standard),
            "auto" => Ok(Self::Auto),
            other => other.parse::<RnnAlgo>().map(Self::Forced).map_err(|_| {
                format!(
                    "BURN_LSTM_CUDNN_ALGO: expected one of \"auto\", {}, got {text:?}",
                    RnnAlgo::NAMES.map(|n| format!("{n:?}")).join(", ")
                )
            }),
        }
    }
}

/// `None`: unset (read `BURN_LSTM_CUDNN_ALGO`).
static POLICY: Mutex<Option<CudnnAlgo>> = Mutex::new(None);

/// The policy in force: the last [`set_cudnn_algo`], else the environment variable
/// `BURN_LSTM_CUDNN_ALGO` (`standard`, `auto` or an algorithm's name), else
/// [`CudnnAlgo::Auto`]. A value that names no policy is logged once and read as `auto`.
pub fn cudnn_algo() -> CudnnAlgo {
    if let Some(policy) = *POLICY.lock().unwrap_or_else(|e| e.into_inner()) {
        return policy;
    }
    match std::env::var("BURN_LSTM_CUDNN_ALGO") {
        Ok(text) => text.parse().unwrap_or_else(|reason: String| {
            crate::kernels::cudnn::device::log_fallback_once(&reason);
            CudnnAlgo::Auto
        }),
        Err(_) => CudnnAlgo::Auto,
    }
}

/// Sets the algorithm policy for calls that start after this one (see [`cudnn_algo`]).
pub fn set_cudnn_algo(policy: CudnnAlgo) {
    *POLICY.lock().unwrap_or_else(|e| e.into_inner()) = Some(policy);
}

/// The algorithm of one call and, in words, why (the trace and the kernel choice print
/// it).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct AlgoPick {
    pub algo: RnnAlgo,
    pub reason: String,
}

/// The algorithm `policy` gives a call of `config` on `shape` (`training`: its reserve
/// space feeds a backward, which runs the same algorithm) on a device with `props`
/// (`None` when they could not be read). A pick the algorithm refuses for this
/// configuration or shape is the standard algorithm, with the refusal in the reason.
pub(crate) fn pick(
    policy: CudnnAlgo,
    config: &RnnConfig,
    shape: &SeqShape,
    training: bool,
    props: Option<DeviceProps>,
) -> AlgoPick {
    let standard = |reason: String| AlgoPick {
        algo: RnnAlgo::Standard,
        reason,
    };
    let wanted = match (policy, props) {
        (CudnnAlgo::Standard, _) => {
            return standard(
                "standard: asked for by the policy (BURN_LSTM_CUDNN_ALGO=standard)".into(),
            );
        }
        (CudnnAlgo::Auto, None) => {
            return standard(
                "standard: the device's properties could not be read for the automatic choice"
                    .into(),
            );
        }
        (CudnnAlgo::Auto, Some(props)) => {
            let choice = choose_algo(&AlgoCall::new(config, shape, training, props));
            AlgoPick {
                algo: choice.algo,
                reason: choice.reason,
            }
        }
        (CudnnAlgo::Forced(algo), _) => AlgoPick {
            algo,
            reason: format!("{algo}: forced by the policy"),
        },
    };
    // A training forward's reserve space feeds a backward of the same algorithm: a forced
    // small-h pick keeps the backward's limit too (a backward refused after its forward
    // ran would leave only a recompute with other dropout masks).
    if training
        && wanted.algo == RnnAlgo::PersistStaticSmallH
        && config.hidden_size > SMALL_H_BACKWARD_MAX_HIDDEN
    {
        return standard(format!(
            "standard: {} refused this training call (hidden {} > {SMALL_H_BACKWARD_MAX_HIDDEN}, \
             the backward's limit)",
            wanted.algo, config.hidden_size
        ));
    }
    let with_algo = RnnConfig {
        algo: wanted.algo,
        ..config.clone()
    };
    let accepted = with_algo
        .validate()
        .and_then(|()| wanted.algo.check_config(&with_algo))
        .and_then(|()| wanted.algo.check_shape(shape));
    match accepted {
        Ok(()) => wanted,
        Err(refusal) => standard(format!(
            "standard: {} refused this call ({refusal})",
            wanted.algo
        )),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use cudnn_rnn::{DataType, MathMode, RnnCell};

    const H100: DeviceProps = DeviceProps {
        major: 9,
        minor: 0,
        sm_count: 132,
    };

    /// A one-layer LSTM of input 128 on the standard algorithm.
    pub(crate) fn config(hidden_size: usize, proj_size: usize, data_type: DataType) -> RnnConfig {
        RnnConfig {
            cell: RnnCell::Lstm,
            input_size: 128,
            hidden_size,
            proj_size,
            num_layers: 1,
            bidirectional: false,
            bias: true,
            data_type,
            math: MathMode::Fma,
            algo: RnnAlgo::Standard,
        }
    }

    #[test]
    fn policies_parse_and_name_the_choices_on_error() {
        assert_eq!("auto".parse(), Ok(CudnnAlgo::Auto));
        assert_eq!(" Standard ".parse(), Ok(CudnnAlgo::Standard));
        assert_eq!(
            "persist_static_small_h".parse(),
            Ok(CudnnAlgo::Forced(RnnAlgo::PersistStaticSmallH))
        );
        let error = "fast".parse::<CudnnAlgo>().unwrap_err();
        assert!(error.contains("BURN_LSTM_CUDNN_ALGO"), "{error}");
        assert!(
            error.contains("\"auto\"") && error.contains("\"persist_static\""),
            "{error}"
        );
        assert!(error.contains("got \"fast\""), "{error}");
    }

    #[test]
    fn the_standard_policy_keeps_the_standard_algorithm() {
        let shape = SeqShape::full(100, 1).unwrap();
        let pick = pick(
            CudnnAlgo::Standard,
            &config(128, 0, DataType::F32),
            &shape,
            false,
            Some(H100),
        );
        assert_eq!(pick.algo, RnnAlgo::Standard);
        assert!(pick.reason.contains("asked for"), "{}", pick.reason);
    }

    #[test]
    fn auto_follows_pytorch_and_falls_back_with_a_reason() {
        let full = SeqShape::full(100, 8).unwrap();
        let f32_128 = config(128, 0, DataType::F32);
        let auto = |config: &RnnConfig, shape: &SeqShape, training, props| {
            pick(CudnnAlgo::Auto, config, shape, training, props)
        };
        assert_eq!(
            auto(&f32_128, &full, true, Some(H100)).algo,
            RnnAlgo::PersistStaticSmallH
        );
        assert_eq!(
            auto(&config(192, 0, DataType::F32), &full, false, Some(H100)).algo,
            RnnAlgo::PersistStaticSmallH
        );
        // A training call's backward runs the forward's algorithm: hidden 192 > 128.
        assert_eq!(
            auto(&config(192, 0, DataType::F32), &full, true, Some(H100)).algo,
            RnnAlgo::Standard
        );
        assert_eq!(
            auto(&config(512, 0, DataType::F16), &full, true, Some(H100)).algo,
            RnnAlgo::PersistStatic
        );
        assert_eq!(
            auto(&config(512, 0, DataType::F32), &full, true, Some(H100)).algo,
            RnnAlgo::Standard
        );
        let padded = SeqShape::new(100, 8, Some(&[100, 90, 100, 100, 100, 100, 100, 100])).unwrap();
        let varying = auto(&f32_128, &padded, false, Some(H100));
        assert_eq!(varying.algo, RnnAlgo::Standard);
        assert!(
            varying.reason.contains("lengths vary"),
            "{}",
            varying.reason
        );
        let projected = auto(&config(128, 64, DataType::F32), &full, false, Some(H100));
        assert_eq!(projected.algo, RnnAlgo::Standard);
        assert!(projected.reason.contains("proj"), "{}", projected.reason);
        let unknown = auto(&f32_128, &full, false, None);
        assert_eq!(unknown.algo, RnnAlgo::Standard);
        assert!(unknown.reason.contains("properties"), "{}", unknown.reason);
    }

    #[test]
    fn a_forced_algorithm_that_refuses_the_call_gives_the_standard_one() {
        let forced = CudnnAlgo::Forced(RnnAlgo::PersistStaticSmallH);
        let full = SeqShape::full(20, 4).unwrap();
        let ok = pick(
            forced,
            &config(128, 0, DataType::F32),
            &full,
            true,
            Some(H100),
        );
        assert_eq!(ok.algo, RnnAlgo::PersistStaticSmallH);
        assert!(ok.reason.contains("forced"), "{}", ok.reason);
        let projected = pick(
            forced,
            &config(128, 64, DataType::F32),
            &full,
            true,
            Some(H100),
        );
        assert_eq!(projected.algo, RnnAlgo::Standard);
        assert!(
            projected.reason.contains("persist_static_small_h refused"),
            "{}",
            projected.reason
        );
        let double = pick(
            forced,
            &config(128, 0, DataType::F64),
            &full,
            true,
            Some(H100),
        );
        assert_eq!(double.algo, RnnAlgo::Standard);
        let padded = SeqShape::new(20, 4, Some(&[20, 3, 20, 20])).unwrap();
        let varying = pick(
            forced,
            &config(128, 0, DataType::F32),
            &padded,
            false,
            Some(H100),
        );
        assert_eq!(varying.algo, RnnAlgo::Standard);
        assert!(varying.reason.contains("lengths"), "{}", varying.reason);
        // Hidden 192: the forward's limit, past the backward's. Inference runs it;
        // a training call, whose backward runs the same algorithm, does not.
        let wide = config(192, 0, DataType::F32);
        assert_eq!(
            pick(forced, &wide, &full, false, Some(H100)).algo,
            RnnAlgo::PersistStaticSmallH
        );
        let training = pick(forced, &wide, &full, true, Some(H100));
        assert_eq!(training.algo, RnnAlgo::Standard);
        assert!(
            training
                .reason
                .contains("hidden 192 > 128, the backward's limit"),
            "{}",
            training.reason
        );
    }
}
