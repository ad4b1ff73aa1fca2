//! A test hook: cuDNN refusing an algorithm at run time, on purpose. cuDNN refuses none
//! of the golden cases, so without it a GPU run never reaches the op's answer to a
//! refusal (the fallback to the next attempt, the refusal remembered). With
//! `BURN_LSTM_CUDNN_TEST_REFUSE` naming an algorithm (`standard`, `persist_static`,
//! `persist_static_small_h`; read once per process), every forward on that algorithm
//! fails as a refused cuDNN call does: after the weight copy is queued, with a
//! `CUDNN_STATUS_NOT_SUPPORTED` status. Unset (or naming no algorithm), nothing is
//! refused.

use std::sync::OnceLock;

use cudnn_rnn::{CudnnRnnError, CudnnStatus, RnnAlgo};

/// The variable that names the algorithm to refuse.
const VARIABLE: &str = "BURN_LSTM_CUDNN_TEST_REFUSE";

/// The algorithm `value` (the variable's value) names, if any (`RnnAlgo`'s parse
/// ignores blanks and case).
fn refused_algo(value: Option<&str>) -> Option<RnnAlgo> {
    value?.parse().ok()
}

/// An error as cuDNN's refusal of `algo` if the hook refuses it, else `Ok`.
pub(crate) fn refuse(algo: RnnAlgo) -> Result<(), CudnnRnnError> {
    static REFUSED: OnceLock<Option<RnnAlgo>> = OnceLock::new();
    let refused = REFUSED.get_or_init(|| refused_algo(std::env::var(VARIABLE).ok().as_deref()));
    refusal(*refused, algo)
}

/// The refusal of `algo` when it is `refused`.
fn refusal(refused: Option<RnnAlgo>, algo: RnnAlgo) -> Result<(), CudnnRnnError> {
    if refused != Some(algo) {
        return Ok(());
    }
    Err(CudnnRnnError::Status {
        call: "cudnnRNNForward",
        status: CudnnStatus::CUDNN_STATUS_NOT_SUPPORTED,
        message: format!("refused by the test hook {VARIABLE}={algo}"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_named_algorithm_is_refused_as_cudnn_refuses() {
        let small_h = refused_algo(Some(" persist_static_small_h"));
        assert_eq!(small_h, Some(RnnAlgo::PersistStaticSmallH));
        let error = refusal(small_h, RnnAlgo::PersistStaticSmallH).unwrap_err();
        assert!(error.is_refusal(), "{error}");
        assert!(error.to_string().contains(VARIABLE), "{error}");
        assert!(refusal(small_h, RnnAlgo::Standard).is_ok());
        assert!(refusal(small_h, RnnAlgo::PersistStatic).is_ok());
        assert_eq!(refused_algo(None), None);
        assert_eq!(refused_algo(Some("nothing")), None);
        assert!(refusal(None, RnnAlgo::Standard).is_ok());
    }
}
