//! Whether a call on a CubeCL backend runs on cuDNN, and why not.

use core::any::TypeId;

use burn::tensor::DType;
use cubecl_cuda::{CudaDevice, CudaRuntime};
use cudnn_rnn::{Attempt, DataType, MathMode, Refusals, RnnConfig, SeqShape};

use crate::kernels::cudnn::algo::{AlgoPick, cudnn_algo, pick};
use crate::kernels::cudnn::device::{device, rnn_config};
use crate::kernels::cudnn::settings::{cudnn_empty_rows, cudnn_gru, cudnn_half, cudnn_math};
use crate::op::choice::{KernelChoice, RnnKernel};
use crate::op::spec::{CellKind, RnnSpec};

/// Whether runtime `R` is CubeCL's CUDA runtime (the only one cuDNN runs on).
pub(crate) fn is_cuda<R: 'static>() -> bool {
    TypeId::of::<R>() == TypeId::of::<CudaRuntime>()
}

/// The cuDNN element type of `dtype`, if cuDNN runs it.
pub(crate) fn data_type(dtype: DType) -> Option<DataType> {
    match dtype {
        DType::F32 | DType::Flex32 => Some(DataType::F32),
        DType::F64 => Some(DataType::F64),
        DType::F16 => Some(DataType::F16),
        DType::BF16 => Some(DataType::Bf16),
        _ => None,
    }
}

/// Why a call of element type `data_type` does not run on cuDNN, for the reasons that
/// need no GPU: a half type while that path is switched off.
fn half_switched_off(data_type: DataType) -> Option<String> {
    let half = matches!(data_type, DataType::F16 | DataType::Bf16);
    (half && !cudnn_half()).then(|| {
        format!(
            "{data_type:?} models on cuDNN are switched off (BURN_LSTM_CUDNN_HALF is set and \
             not 1, or set_cudnn_half(false) was called; BURN_LSTM_CUDNN_HALF=1 or \
             set_cudnn_half(true) turns them on); the portable kernel computes them in f32"
        )
    })
}

/// The kernel a call with `spec` and element type `dtype` runs on CubeCL runtime `R`'s
/// `device`; on cuDNN with the algorithm the call would run and why when `detail` (that
/// costs the policy's reasoning, as text: each call's dispatch leaves it out).
pub(crate) fn choice<R: 'static, D: 'static>(
    device_of: &D,
    spec: &RnnSpec,
    dtype: DType,
    detail: bool,
) -> KernelChoice {
    if !is_cuda::<R>() {
        return KernelChoice::portable_only(spec.kernel);
    }
    let portable = |reason: String| KernelChoice::fallback(RnnKernel::Portable, reason);
    match spec.kernel {
        Some(RnnKernel::Portable) => {
            return portable("the portable kernel was asked for (cuDNN is faster)".into());
        }
        Some(kernel @ (RnnKernel::FusedCpu | RnnKernel::FusedCpuInt8)) => {
            return portable(format!(
                "the {kernel} kernel was asked for but runs only on the CPU backends (Flex, NdArray)"
            ));
        }
        None | Some(RnnKernel::Cudnn) => {}
    }
    if spec.arch.cell == CellKind::Gru && !cudnn_gru() {
        return portable(
            "a gru runs the portable kernel on Cuda: the CUDNN_GRU path is switched off \
             (BURN_LSTM_CUDNN_GRU=1 or burn_lstm::set_cudnn_gru(true) turns it on; \
             docs/gru.md)"
                .into(),
        );
    }
    let Some(data_type) = data_type(dtype) else {
        return portable(format!(
            "the cuDNN op runs f32, f64, f16 and bf16; this backend computes in {dtype:?}"
        ));
    };
    if let Some(reason) = half_switched_off(data_type) {
        return portable(reason);
    }
    if let Err(e) = rnn_config(&spec.arch, data_type, MathMode::Fma).validate() {
        return portable(format!("cuDNN does not run this architecture: {e}"));
    }
    let empty_rows = spec.lengths.as_deref().is_some_and(|l| l.contains(&0));
    if empty_rows && !cudnn_empty_rows() {
        return portable(
            "the batch has rows of length 0, which cuDNN refuses; running them around cuDNN \
             is switched off (BURN_LSTM_CUDNN_EMPTY_ROWS=1 or set_cudnn_empty_rows(true) \
             turns it on)"
                .into(),
        );
    }
    let Some(cuda_device) = (device_of as &dyn core::any::Any).downcast_ref::<CudaDevice>() else {
        return portable("the device is not a CUDA device".into());
    };
    if let Err(reason) = device(cuda_device.index) {
        return portable(reason);
    }
    // The device is up, so cuDNN was loaded and checked: this reads the cached version.
    match cudnn_rnn::check_cudnn().and_then(|v| data_type.check_supported_by(v)) {
        Ok(()) => {
            let choice = KernelChoice::fastest(RnnKernel::Cudnn);
            match detail
                .then(|| algorithm(cuda_device.index, spec, data_type))
                .flatten()
            {
                Some(pick) => choice.with_detail(format!("algorithm {}", pick.reason)),
                None => choice,
            }
        }
        Err(e) => portable(format!("cuDNN cannot run this element type: {e}")),
    }
}

/// The algorithm a call of `spec` runs on GPU `ordinal`: the policy's pick, or the
/// standard algorithm where cuDNN refused that pick for this configuration and shape on
/// an earlier call (`None` for a batch cuDNN's sequence descriptor refuses: its empty
/// rows run around cuDNN, whose call then has fewer rows).
fn algorithm(ordinal: usize, spec: &RnnSpec, data_type: DataType) -> Option<AlgoPick> {
    let shape = SeqShape::new(spec.seq_len, spec.batch, spec.lengths.as_deref()).ok()?;
    let (props, refusals) = {
        let device = device(ordinal).ok()?;
        let device = device.lock().unwrap_or_else(|e| e.into_inner());
        (device.props(), device.refusals.clone())
    };
    let config = rnn_config(&spec.arch, data_type, cudnn_math());
    let pick = pick(cudnn_algo(), &config, &shape, spec.training, props);
    let mut refusals = refusals.lock().unwrap_or_else(|e| e.into_inner());
    Some(after_refusals(
        pick,
        config,
        &shape,
        spec.training,
        &mut refusals,
    ))
}

/// `pick` for a call of `config` on `shape`, or where `refusals` remembers cuDNN refusing
/// it for this configuration and shape, the attempt such a call starts at (the standard
/// algorithm, once the pick is refused sequence-major) with the refusal named.
fn after_refusals(
    pick: AlgoPick,
    config: RnnConfig,
    shape: &SeqShape,
    training: bool,
    refusals: &mut Refusals,
) -> AlgoPick {
    let picked = RnnConfig {
        algo: pick.algo,
        ..config
    };
    match refusals.first_unrefused(&picked, shape, training) {
        Some(Attempt {
            algo,
            after: Some((refused, _, why)),
            ..
        }) => AlgoPick {
            algo,
            reason: format!(
                "{algo}: cuDNN refused {refused} for this configuration and shape on an \
                 earlier call ({why})"
            ),
        },
        _ => pick,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernels::cudnn::settings::set_cudnn_half;
    use cudnn_rnn::{RnnAlgo, SeqLayout};

    #[test]
    fn half_models_name_the_switch_when_it_is_off() {
        assert_eq!(data_type(DType::F16), Some(DataType::F16));
        assert_eq!(data_type(DType::BF16), Some(DataType::Bf16));
        assert_eq!(data_type(DType::I32), None);
        set_cudnn_half(false);
        let reason = half_switched_off(DataType::Bf16).expect("switched off");
        assert!(reason.contains("BURN_LSTM_CUDNN_HALF=1"), "{reason}");
        assert!(reason.starts_with("Bf16 models"), "{reason}");
        assert_eq!(half_switched_off(DataType::F32), None);
        set_cudnn_half(true);
        assert_eq!(half_switched_off(DataType::F16), None);
        set_cudnn_half(false);
    }

    #[test]
    fn a_remembered_refusal_of_the_pick_names_the_standard_algorithm() {
        let config = crate::kernels::cudnn::algo::tests::config(16, 0, DataType::F32);
        let small_h = AlgoPick {
            algo: RnnAlgo::PersistStaticSmallH,
            reason: "persist_static_small_h: forced by the policy".into(),
        };
        let refused = RnnConfig {
            algo: RnnAlgo::PersistStaticSmallH,
            ..config.clone()
        };
        let mut refusals = Refusals::default();
        let ask = |refusals: &mut Refusals, shape: &SeqShape, training| {
            after_refusals(small_h.clone(), config.clone(), shape, training, refusals)
        };
        let shape = SeqShape::full(10, 4).unwrap();
        let batch_major = shape.clone().with_layout(SeqLayout::BatchMajor);
        // Refused batch-major only: calls still try the pick (sequence-major next).
        refusals.remember(&refused, &batch_major, false, "no batch-major");
        assert_eq!(ask(&mut refusals, &shape, false), small_h);
        refusals.remember(&refused, &shape, false, "NOT_SUPPORTED");
        let standard = ask(&mut refusals, &shape, false);
        assert_eq!(standard.algo, RnnAlgo::Standard);
        assert!(
            standard
                .reason
                .contains("cuDNN refused persist_static_small_h")
                && standard.reason.ends_with("(NOT_SUPPORTED)"),
            "{}",
            standard.reason
        );
        // Asked with a batch-major shape: read sequence-major, the same answer.
        assert_eq!(ask(&mut refusals, &batch_major, false), standard);
        // Another mode, another shape: the pick.
        assert_eq!(ask(&mut refusals, &shape, true), small_h);
        let other = SeqShape::full(10, 8).unwrap();
        assert_eq!(ask(&mut refusals, &other, false), small_h);
    }
}
