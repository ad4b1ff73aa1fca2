//! Per-GPU cuDNN state, created on first use and kept for the process: the handle (on
//! its own stream), the dropout generator, and one configured LSTM (with its weight plan)
//! per architecture. A GPU where any of it fails is remembered with the reason, logged
//! once, and its calls run the portable kernel; where the failure may pass (out of
//! memory, say), a call a second later tries again (then two, four, up to 64 seconds).

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use cudnn_rnn::{
    AttemptError, CudnnHandle, CudnnRnnError, DataType, DeviceProps, DropoutState, MathMode,
    Refusals, Rnn, RnnAlgo, RnnCell, RnnConfig,
};

use burn_ir::TensorId;

use crate::kernels::cubecl::flat_cache::MAX_ENTRIES;
use crate::kernels::cudnn::settings::cudnn_call_reuse;
use crate::kernels::cudnn::types::CudaTensor;
use crate::kernels::cudnn::weights::WeightPlan;
use crate::kernels::env_number::weight_cache_limit_bytes;
use crate::kernels::identity_cache::IdentityCache;
use crate::op::spec::{CellKind, RnnArch};

/// The seed of the dropout generator when the call gives none.
const DEFAULT_DROPOUT_SEED: u64 = 0x5eed_1057;

/// One configured LSTM and how the canonical parameters map onto its weight space.
pub(crate) struct PreparedLstm {
    pub lstm: Rnn,
    pub plan: WeightPlan,
    /// The [`DeviceCudnn::dropout_generation`] the descriptor was last configured with.
    dropout_generation: u64,
}

/// cuDNN state of one GPU.
pub(crate) struct DeviceCudnn {
    handle: CudnnHandle,
    dropout: DropoutState,
    /// Counts the changes of `dropout` (a new generator or a new rate). An LSTM
    /// descriptor is configured again (`cudnnSetRNNDescriptor_v8`) only when it was last
    /// configured with an older generation: setting it on every call would make cuDNN
    /// redo its per-descriptor set-up each time.
    dropout_generation: u64,
    /// One configured LSTM per configuration, the algorithm included (a training
    /// forward's reserve space is read by the backward of the same one).
    lstms: HashMap<RnnConfig, PreparedLstm>,
    /// The algorithms and layouts cuDNN refused here, by configuration and call
    /// ([`cudnn_rnn::first_accepted`] skips them on later calls).
    pub(crate) refusals: Arc<Mutex<Refusals>>,
    /// What the automatic algorithm choice reads of the device; `None` when the driver
    /// did not say (the choice is then the standard algorithm).
    props: Option<DeviceProps>,
    /// Inference's weight spaces, by the fusion id of the flat buffer they were copied
    /// from and the configuration: `(flat buffer, weight space)`, the buffer held so its
    /// memory is neither reused nor written in place (`kernels/identity_cache.rs`). The
    /// weight spaces count against the byte budget (the flat buffers in the flat-buffer
    /// cache's); an entry whose flat buffer nothing else holds any more (that cache let
    /// go of it) is dropped at the device's next inference call.
    pub(crate) spaces: IdentityCache<(TensorId, RnnConfig), (CudaTensor, CudaTensor)>,
}

impl DeviceCudnn {
    fn new(ordinal: usize) -> Result<Self, CudnnRnnError> {
        let handle = CudnnHandle::for_device(ordinal)?.with_call_reuse(cudnn_call_reuse());
        let dropout = DropoutState::new(&handle, 0.0, DEFAULT_DROPOUT_SEED)?;
        let props = DeviceProps::of(&handle).ok();
        Ok(Self {
            handle,
            dropout,
            dropout_generation: 0,
            lstms: HashMap::new(),
            refusals: Arc::default(),
            props,
            spaces: IdentityCache::new(MAX_ENTRIES, weight_cache_limit_bytes()),
        })
    }

    /// The device's compute capability and SM count, if the driver gave them.
    pub(crate) fn props(&self) -> Option<DeviceProps> {
        self.props
    }

    /// The LSTM for `arch` on algorithm `algo` with inter-layer dropout `probability` (0
    /// for inference) and, when given, a generator restarted from `seed`.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn lstm(
        &mut self,
        arch: &RnnArch,
        data_type: DataType,
        math: MathMode,
        algo: RnnAlgo,
        probability: f32,
        seed: Option<u64>,
    ) -> Result<(&CudnnHandle, &PreparedLstm), AttemptError> {
        if let Some(seed) = seed.filter(|&s| s != self.dropout.seed()) {
            self.dropout =
                DropoutState::new(&self.handle, probability, seed).map_err(|e| e.to_string())?;
            self.dropout_generation += 1;
        }
        if probability != self.dropout.probability() {
            self.dropout
                .set_probability(&self.handle, probability)
                .map_err(|e| e.to_string())?;
            self.dropout_generation += 1;
        }
        let config = RnnConfig {
            algo,
            ..rnn_config(arch, data_type, math)
        };
        if !self.lstms.contains_key(&config) {
            let lstm = Rnn::new(&self.handle, config.clone(), &self.dropout)?;
            let plan = WeightPlan::new(arch, lstm.weight_layout(), data_type.size())?;
            let prepared = PreparedLstm {
                lstm,
                plan,
                dropout_generation: self.dropout_generation,
            };
            self.lstms.insert(config.clone(), prepared);
        }
        let prepared = self.lstms.get_mut(&config).expect("inserted above");
        if prepared.dropout_generation != self.dropout_generation {
            prepared
                .lstm
                .set_dropout(&self.dropout)
                .map_err(|e| e.to_string())?;
            prepared.dropout_generation = self.dropout_generation;
        }
        Ok((&self.handle, prepared))
    }
}

/// The cuDNN description of `arch` on the standard algorithm.
pub(crate) fn rnn_config(arch: &RnnArch, data_type: DataType, math: MathMode) -> RnnConfig {
    RnnConfig {
        cell: match arch.cell {
            CellKind::Lstm => RnnCell::Lstm,
            CellKind::Gru => RnnCell::Gru,
        },
        input_size: arch.input_size,
        hidden_size: arch.hidden_size,
        proj_size: arch.proj_size,
        num_layers: arch.num_layers,
        bidirectional: arch.bidirectional,
        bias: arch.bias,
        data_type,
        math,
        algo: RnnAlgo::Standard,
    }
}

type Slot = Result<Arc<Mutex<DeviceCudnn>>, String>;

/// How long after a first failed set-up that may pass the next call tries again; each
/// failure after it doubles the wait, up to [`SETUP_RETRY_MAX`].
const SETUP_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The longest wait between two tries of a set-up that keeps failing.
const SETUP_RETRY_MAX: Duration = Duration::from_secs(64);

/// One GPU's set-up: its state, or why it failed and, for a failure that may pass, from
/// when a call tries again and how long the wait was.
enum Setup<T> {
    Ready(Arc<Mutex<T>>),
    Failed {
        reason: String,
        retry: Option<(Instant, Duration)>,
    },
}

impl<T> Setup<T> {
    /// The state, if it was created.
    fn ready(&self) -> Option<Arc<Mutex<T>>> {
        match self {
            Self::Ready(state) => Some(state.clone()),
            Self::Failed { .. } => None,
        }
    }
}

/// The state `setup` holds, else a new one from `create` (when there is none yet, or
/// the last failed in a way that may pass and `now` is past its retry time), kept in
/// `setup`. A failure is kept with its reason (`describe` words it): one that may pass
/// ([`CudnnRnnError::may_pass`]: out of memory, say) until its wait is over (1 s after the first failure, twice the
/// last wait after each later one, at most [`SETUP_RETRY_MAX`]), any other for the
/// process.
fn set_up<T>(
    setup: &mut Option<Setup<T>>,
    now: Instant,
    create: impl FnOnce() -> Result<T, CudnnRnnError>,
    describe: impl FnOnce(&CudnnRnnError) -> String,
) -> Result<Arc<Mutex<T>>, String> {
    let last_wait = match setup {
        Some(Setup::Ready(state)) => return Ok(state.clone()),
        Some(Setup::Failed { reason, retry }) => match retry {
            Some((from, wait)) if now >= *from => Some(*wait),
            _ => return Err(reason.clone()),
        },
        None => None,
    };
    let made = match create() {
        Ok(state) => Setup::Ready(Arc::new(Mutex::new(state))),
        Err(error) if error.may_pass() => {
            let wait = last_wait.map_or(SETUP_RETRY_AFTER, |last| (last * 2).min(SETUP_RETRY_MAX));
            Setup::Failed {
                reason: format!(
                    "{} (a call {} s later tries again)",
                    describe(&error),
                    wait.as_secs()
                ),
                retry: Some((now + wait, wait)),
            }
        }
        Err(error) => Setup::Failed {
            reason: describe(&error),
            retry: None,
        },
    };
    let result = match &made {
        Setup::Ready(state) => Ok(state.clone()),
        Setup::Failed { reason, .. } => Err(reason.clone()),
    };
    *setup = Some(made);
    result
}

/// One GPU's set-up, behind a lock of its own: a set-up in progress on one GPU (a
/// `cudnnCreate`, a retry) does not hold up the calls of another.
type SetupSlot = Arc<Mutex<Option<Setup<DeviceCudnn>>>>;

/// Every GPU's set-up slot, by ordinal.
fn devices() -> &'static Mutex<HashMap<usize, SetupSlot>> {
    static DEVICES: OnceLock<Mutex<HashMap<usize, SetupSlot>>> = OnceLock::new();
    DEVICES.get_or_init(Default::default)
}

/// GPU `ordinal`'s set-up slot (made empty on first use).
fn slot(ordinal: usize) -> SetupSlot {
    let mut devices = devices().lock().unwrap_or_else(|e| e.into_inner());
    devices.entry(ordinal).or_default().clone()
}

/// The state of every GPU whose set-up succeeded.
fn ready_states() -> Vec<Arc<Mutex<DeviceCudnn>>> {
    let slots: Vec<SetupSlot> = devices()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .values()
        .cloned()
        .collect();
    slots
        .iter()
        .filter_map(|slot| {
            slot.lock()
                .unwrap_or_else(|e| e.into_inner())
                .as_ref()?
                .ready()
        })
        .collect()
}

/// The cuDNN state of GPU `ordinal`, created on first use, or why cuDNN cannot run there
/// (a set-up that failed in a way that may pass, out of memory say, is tried again a
/// while later).
pub(crate) fn device(ordinal: usize) -> Slot {
    let slot = slot(ordinal);
    let mut setup = slot.lock().unwrap_or_else(|e| e.into_inner());
    set_up(
        &mut setup,
        Instant::now(),
        || DeviceCudnn::new(ordinal),
        |e| format!("cuDNN is not usable on CUDA device {ordinal}: {e}"),
    )
}

/// What one GPU's cuDNN state keeps between calls (see [`cudnn_pool_usage`]). For
/// monitoring a long-running process and for tests: the work space grows to the largest
/// call's need and stays; idle reserve spaces are at most
/// [`cudnn_rnn::RESERVE_POOL_MAX_IDLE`]; weight spaces stay within the GPU weight
/// cache's limit. [`crate::release_gpu_buffers`] gives all three back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CudnnPoolUsage {
    /// Whether the state was created with the work-space pool (call reuse,
    /// [`crate::cudnn_reuse`]).
    pub work_pool: bool,
    /// Bytes of the pooled work space (0 without the pool, or before a call needed it).
    pub work_space_bytes: usize,
    /// Whether the state was created with the reserve-space pool
    /// ([`crate::cudnn_reserve_pool`]).
    pub reserve_pool: bool,
    /// Reserve spaces held idle for later training calls (those lent to a training
    /// call whose backward has not run are not counted).
    pub idle_reserve_spaces: usize,
    /// Their bytes.
    pub idle_reserve_bytes: usize,
    /// Inference's weight spaces kept for unchanged parameters (the GPU weight cache,
    /// [`crate::gpu_weight_cache`]).
    pub weight_spaces: usize,
    /// Their bytes (the weight spaces alone; the flat buffers they were copied from
    /// count in the GPU weight cache).
    pub weight_space_bytes: usize,
}

/// What the cuDNN state of CUDA device `ordinal` keeps between calls; `None` when no
/// call has created that state in this process (this call creates nothing), or cuDNN is
/// not usable there.
pub fn cudnn_pool_usage(ordinal: usize) -> Option<CudnnPoolUsage> {
    let slot = devices()
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .get(&ordinal)?
        .clone();
    let state = slot
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .as_ref()?
        .ready()?;
    let device = state.lock().unwrap_or_else(|e| e.into_inner());
    let handle = &device.handle;
    let reuse = handle.call_reuse();
    let (idle_reserve_bytes, idle_reserve_spaces) = handle.reserve_pool_idle();
    Some(CudnnPoolUsage {
        work_pool: reuse.work_pool,
        work_space_bytes: handle.work_pool_bytes(),
        reserve_pool: reuse.reserve_pool,
        idle_reserve_spaces,
        idle_reserve_bytes,
        weight_spaces: device.spaces.len(),
        weight_space_bytes: device.spaces.bytes(),
    })
}

/// Gives back what every GPU's cuDNN state keeps between calls: inference's weight
/// spaces, the pooled work space and the idle reserve spaces (each freed stream-ordered,
/// or handed back to CubeCL, whose later work waits for this state's stream). The
/// configured RNNs, the handle and the dropout state stay.
pub(crate) fn release_buffers() {
    for state in ready_states() {
        let mut state = state.lock().unwrap_or_else(|e| e.into_inner());
        // The frees below are driver calls on this thread, which may never have used
        // this GPU's context. A failure to bind is left to them (cudarc records it).
        let _ = state.handle.bind_to_thread();
        state.spaces.clear();
        state.handle.release_work_pool();
        state.handle.release_reserve_pool();
    }
}

/// cuDNN calls that failed at run time in this process, each reason once.
static RUNTIME_ERRORS: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Records a cuDNN call that failed at run time (the portable kernel runs instead) and
/// logs it once. With `BURN_LSTM_CUDNN_STRICT=1` (for GPU test runs, where a silent
/// fallback would hide the failure behind a slow, correct answer) it panics instead.
pub(crate) fn record_runtime_error(reason: &str) {
    if std::env::var("BURN_LSTM_CUDNN_STRICT").is_ok_and(|v| v == "1") {
        panic!(
            "cuDNN failed at run time and BURN_LSTM_CUDNN_STRICT=1 forbids the fallback: {reason}"
        );
    }
    let mut errors = RUNTIME_ERRORS.lock().unwrap_or_else(|e| e.into_inner());
    if !errors.iter().any(|seen| seen == reason) {
        errors.push(reason.to_owned());
    }
    drop(errors);
    log_fallback_once(reason);
}

/// Every distinct error of a cuDNN call that failed at run time in this process. Each
/// such call was answered by the portable kernel instead (same numbers, slower) and the
/// reason was logged once with `log::warn!`; this list is for programs without a logger
/// and for tests, which must not pass on a silent fallback. Empty when cuDNN never failed
/// (or never ran: [`crate::CudnnCompatibleLstm::kernel`] says which kernel a call uses).
pub fn cudnn_runtime_errors() -> Vec<String> {
    RUNTIME_ERRORS
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone()
}

/// Logs `reason` as a warning the first time it is seen in this process.
pub(crate) fn log_fallback_once(reason: &str) {
    static SEEN: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    let mut seen = SEEN
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    if seen.insert(reason.to_owned()) {
        log::warn!("burn-lstm: running the portable LSTM kernel instead of cuDNN: {reason}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn out_of_memory() -> CudnnRnnError {
        CudnnRnnError::Driver {
            call: "cuMemAllocAsync",
            message: "CUDA_ERROR_OUT_OF_MEMORY".into(),
            out_of_memory: true,
        }
    }

    /// Sets `setup` up at `now` with `result`; returns the outcome and whether `create`
    /// ran.
    fn try_at(
        setup: &mut Option<Setup<u32>>,
        now: Instant,
        result: Result<u32, CudnnRnnError>,
    ) -> (Result<u32, String>, bool) {
        let mut ran = false;
        let outcome = set_up(
            setup,
            now,
            || {
                ran = true;
                result
            },
            |e| format!("device 0: {e}"),
        );
        (outcome.map(|state| *state.lock().unwrap()), ran)
    }

    #[test]
    fn a_set_up_out_of_memory_is_tried_again_ever_less_often() {
        let start = Instant::now();
        let mut setup = None;
        let (outcome, ran) = try_at(&mut setup, start, Err(out_of_memory()));
        let reason = outcome.unwrap_err();
        assert!(ran);
        assert!(
            reason.starts_with("device 0: cuMemAllocAsync failed"),
            "{reason}"
        );
        assert!(
            reason.ends_with("(a call 1 s later tries again)"),
            "{reason}"
        );
        // Before the retry time: the same reason, nothing tried.
        let soon = start + SETUP_RETRY_AFTER / 2;
        assert_eq!(try_at(&mut setup, soon, Ok(7)), (Err(reason), false));
        // Failing again: the wait doubles each time, up to its cap.
        let mut now = start + SETUP_RETRY_AFTER;
        for wait_s in [2, 4, 8, 16, 32, 64, 64] {
            let (outcome, ran) = try_at(&mut setup, now, Err(out_of_memory()));
            assert!(ran, "tried at {:?}", now - start);
            let reason = outcome.unwrap_err();
            assert!(
                reason.ends_with(&format!("{wait_s} s later tries again)")),
                "{reason}"
            );
            let wait = Duration::from_secs(wait_s);
            assert!(!try_at(&mut setup, now + wait / 2, Ok(7)).1);
            now += wait;
        }
        // The memory came back: the next try creates the state, which is kept.
        assert_eq!(try_at(&mut setup, now, Ok(7)), (Ok(7), true));
        assert_eq!(try_at(&mut setup, now, Ok(8)), (Ok(7), false));
        let kept = setup.as_ref().and_then(Setup::ready);
        assert_eq!(kept.map(|state| *state.lock().unwrap()), Some(7));
    }

    /// A cuDNN status error of `cudnnCreate`.
    fn status(status: cudnn_rnn::CudnnStatus) -> CudnnRnnError {
        CudnnRnnError::Status {
            call: "cudnnCreate",
            status,
            message: String::new(),
        }
    }

    #[test]
    fn an_uninitialised_cudnn_is_tried_again_too() {
        use cudnn_rnn::CudnnStatus::{
            CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED, CUDNN_STATUS_NOT_INITIALIZED,
        };
        let not_initialized = status(CUDNN_STATUS_NOT_INITIALIZED);
        let internal = status(CUDNN_STATUS_INTERNAL_ERROR_COMPILATION_FAILED);
        for error in [not_initialized, internal] {
            let mut setup = None;
            let start = Instant::now();
            assert!(try_at(&mut setup, start, Err(error)).0.is_err());
            let later = start + SETUP_RETRY_AFTER;
            assert_eq!(try_at(&mut setup, later, Ok(7)), (Ok(7), true));
        }
    }

    #[test]
    fn a_missing_library_or_device_or_an_unsupported_one_is_kept_for_the_process() {
        use cudnn_rnn::CudnnStatus::{
            CUDNN_STATUS_BAD_PARAM_NULL_POINTER, CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH,
            CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED,
        };
        let no_device = CudnnRnnError::Driver {
            call: "cuCtxRetain",
            message: "CUDA_ERROR_INVALID_DEVICE".into(),
            out_of_memory: false,
        };
        let kept = [
            CudnnRnnError::DriverMissing,
            status(CUDNN_STATUS_NOT_SUPPORTED_ARCH_MISMATCH),
            no_device,
            status(CUDNN_STATUS_BAD_PARAM_NULL_POINTER),
            status(CUDNN_STATUS_SUBLIBRARY_LOADING_FAILED),
        ];
        for error in kept {
            let start = Instant::now();
            let mut setup = None;
            let (outcome, ran) = try_at(&mut setup, start, Err(error));
            let reason = outcome.unwrap_err();
            assert!(ran && !reason.contains("tries again"), "{reason}");
            let much_later = start + 1000 * SETUP_RETRY_MAX;
            assert_eq!(try_at(&mut setup, much_later, Ok(7)), (Err(reason), false));
            assert!(setup.as_ref().and_then(Setup::ready).is_none());
        }
    }
}
