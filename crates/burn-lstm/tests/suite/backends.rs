//! One model on every CPU backend: a checkpoint trained on `Autodiff<NdArray>` or
//! `Autodiff<Flex>` loads on Flex and on NdArray with identical outputs (both run the
//! fused CPU kernel, so identical means bit for bit), and Burn's `Dispatch` backend
//! (feature `dispatch`) trains on its Flex device and serves the same checkpoint as
//! Flex does, for an LSTM and a GRU. The GPU leg (trained on `Autodiff<Cuda>`) is in
//! `tests/cudnn.rs`.

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::module::{AutodiffModule, Module};
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::backend::{AutodiffBackend, Backend};
use burn::tensor::{ElementConversion, Tensor, TensorData};
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, RnnBackend, RnnKernel};
use common::to_f64;

pub(crate) fn config() -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(4, 6)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_proj_size(3)
}

/// Fixed pseudo-random values in (-1, 1) (a host generator: the backends' own generators
/// are global and differ between backends).
fn values(len: usize, seed: u64) -> Vec<f32> {
    let mut state = 0x9E37_79B9_7F4A_7C15_u64 ^ seed;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
        })
        .collect()
}

fn tensor<B: Backend>(shape: [usize; 3], seed: u64, device: &B::Device) -> Tensor<B, 3> {
    let data = TensorData::new(values(shape.iter().product(), seed), shape);
    Tensor::from_data(data, device)
}

const SHAPE: [usize; 3] = [3, 5, 4];

/// A few Adam steps towards a fixed target on `device`, then the model.
pub(crate) fn train<B: AutodiffBackend + RnnBackend>(
    device: &B::Device,
    steps: usize,
) -> (CudnnCompatibleLstm<B>, Vec<f32>)
where
    B::InnerBackend: RnnBackend,
{
    train_with::<B, _>(device, steps, AdamConfig::new().init(), 1e-2)
}

/// A few steps of `optim` at rate `lr` towards a fixed target on `device`, then the
/// model and the loss before each step.
pub(crate) fn train_with<B, O>(
    device: &B::Device,
    steps: usize,
    mut optim: O,
    lr: f64,
) -> (CudnnCompatibleLstm<B>, Vec<f32>)
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
    O: Optimizer<CudnnCompatibleLstm<B>, B>,
{
    let mut model = config().init::<B>(device);
    let (x, target) = (
        tensor::<B>(SHAPE, 1, device),
        tensor::<B>([3, 5, 6], 2, device),
    );
    let mut losses = Vec::new();
    for _ in 0..steps {
        let (y, _) = model.forward(x.clone(), None);
        let loss = (y - target.clone()).powi_scalar(2).mean();
        losses.push(loss.clone().into_scalar().elem::<f32>());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(lr, model, grads);
    }
    (model, losses)
}

/// A test's scratch directory, removed when the test ends.
pub(crate) fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("burn-lstm-backends-")
        .tempdir()
        .unwrap()
}

/// `y`, `h_n` and `c_n` of `model` on the fixed input.
pub(crate) fn outputs<B: RnnBackend>(
    model: &CudnnCompatibleLstm<B>,
    device: &B::Device,
) -> [Vec<f64>; 3] {
    let (y, state) = model.forward(tensor::<B>(SHAPE, 3, device), None);
    [to_f64(y), to_f64(state.hidden), to_f64(state.cell)]
}

pub(crate) fn load<B: RnnBackend>(
    file: &std::path::Path,
    device: &B::Device,
) -> CudnnCompatibleLstm<B> {
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    config()
        .load_checkpoint::<B, _>(file, &recorder, device)
        .expect("the checkpoint loads")
}

/// Trains on `B`, saves, and checks that NdArray and Flex serve identical outputs, equal
/// to the trained model's own (it ran the same kernel).
fn checkpoint_serves_on_both_cpu_backends<B: AutodiffBackend + RnnBackend>(name: &str)
where
    B::InnerBackend: RnnBackend,
{
    let device = Default::default();
    let (trained, losses) = train::<B>(&device, 3);
    assert!(
        losses[2] < losses[0],
        "{name}: training lowers the loss: {losses:?}"
    );
    let trained = trained.valid();
    let reference = outputs(&trained, &device);
    let dir = scratch();
    let path = dir.path().join(name);
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    trained.save_file(&path, &recorder).unwrap();
    let file = path.with_extension("mpk");

    let on_flex = load::<Flex>(&file, &Default::default());
    let on_ndarray = load::<NdArray>(&file, &Default::default());
    assert_eq!(
        on_flex.kernel(&Default::default(), 3, 5).kernel,
        RnnKernel::FusedCpu
    );
    assert_eq!(
        on_ndarray.kernel(&Default::default(), 3, 5).kernel,
        RnnKernel::FusedCpu
    );
    let flex = outputs(&on_flex, &Default::default());
    let ndarray = outputs(&on_ndarray, &Default::default());
    for (which, ((f, n), r)) in ["y", "h_n", "c_n"]
        .iter()
        .zip(flex.iter().zip(&ndarray).zip(&reference))
    {
        assert!(f.iter().any(|v| *v != 0.0), "{name} {which}: all zero");
        assert_eq!(f, n, "{name} {which}: Flex and NdArray differ");
        assert_eq!(f, r, "{name} {which}: differs from the trained model");
    }
}

#[test]
fn a_checkpoint_trained_on_autodiff_ndarray_serves_on_flex_and_ndarray() {
    checkpoint_serves_on_both_cpu_backends::<Autodiff<NdArray>>("from-ndarray");
}

#[test]
fn a_checkpoint_trained_on_autodiff_flex_serves_on_flex_and_ndarray() {
    checkpoint_serves_on_both_cpu_backends::<Autodiff<Flex>>("from-flex");
}

#[cfg(feature = "dispatch")]
mod dispatch {
    use super::*;
    use burn::backend::flex::FlexDevice;
    use burn::{Dispatch, DispatchDevice};

    /// Trains a few steps on Dispatch's autodiff Flex device (the portable kernel, which
    /// Dispatch's own autodiff differentiates), then serves the checkpoint on Dispatch's
    /// plain Flex device (the fused CPU kernel) and on Flex: identical outputs, equal to
    /// the trained model's own within f32 rounding (another kernel ran it).
    #[test]
    fn dispatch_trains_on_its_flex_device_and_serves_like_flex() {
        let training = DispatchDevice::autodiff(FlexDevice);
        let serving = DispatchDevice::Flex(FlexDevice);
        let (trained, losses) = train::<Dispatch>(&training, 3);
        assert!(
            losses[2] < losses[0],
            "training lowers the loss: {losses:?}"
        );
        let choice = trained.kernel(&training, 3, 5);
        assert_eq!(choice.kernel, RnnKernel::Portable);
        let reason = choice.fallback_reason.expect("a reason");
        assert!(reason.contains("Autodiff<Flex>"), "{reason}");
        let reference = outputs(&trained, &training);
        let dir = scratch();
        let path = dir.path().join("from-dispatch");
        let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
        trained.save_file(&path, &recorder).unwrap();
        let file = path.with_extension("mpk");

        let on_dispatch = load::<Dispatch>(&file, &serving);
        let choice = on_dispatch.kernel(&serving, 3, 5);
        assert_eq!(choice.kernel, RnnKernel::FusedCpu, "{choice}");
        let on_flex = load::<Flex>(&file, &Default::default());
        let dispatch = outputs(&on_dispatch, &serving);
        let flex = outputs(&on_flex, &Default::default());
        for (which, ((d, f), r)) in ["y", "h_n", "c_n"]
            .iter()
            .zip(dispatch.iter().zip(&flex).zip(&reference))
        {
            assert!(d.iter().any(|v| *v != 0.0), "{which}: all zero");
            assert_eq!(d, f, "{which}: Dispatch (Flex device) and Flex differ");
            let err = common::rel_err(d, r);
            assert!(err < 1e-5, "{which}: {err:e} from the trained model");
        }
    }

    /// A GRU on Dispatch: its autodiff Flex device trains it with the portable kernel
    /// (a gradient reaches every parameter), its plain Flex device serves a checkpoint
    /// with the fused CPU kernel, with Flex's outputs bit for bit.
    #[test]
    fn a_gru_on_dispatch_trains_and_serves_like_flex() {
        use burn_lstm::{CudnnCompatibleGru, CudnnCompatibleGruConfig};
        let config = CudnnCompatibleGruConfig::new(4, 6)
            .with_num_layers(2)
            .with_bidirectional(true);
        let training = DispatchDevice::autodiff(FlexDevice);
        let serving = DispatchDevice::Flex(FlexDevice);
        let model = config.init::<Dispatch>(&training);
        assert_eq!(model.kernel(&training, 3, 5).kernel, RnnKernel::Portable);
        let (y, _) = model.forward(tensor::<Dispatch>(SHAPE, 1, &training).require_grad(), None);
        let grads = y.sum().backward();
        for direction in model.directions() {
            let grad = direction.weight_hh.grad(&grads).expect("a gradient");
            assert!(to_f64(grad).iter().any(|g| *g != 0.0));
        }
        let dir = scratch();
        let path = dir.path().join("gru-from-dispatch");
        let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
        model.save_file(&path, &recorder).unwrap();
        let file = path.with_extension("mpk");
        let on_dispatch = config
            .load_checkpoint::<Dispatch, _>(&file, &recorder, &serving)
            .unwrap();
        assert_eq!(
            on_dispatch.kernel(&serving, 3, 5).kernel,
            RnnKernel::FusedCpu
        );
        let on_flex = config
            .load_checkpoint::<Flex, _>(&file, &recorder, &Default::default())
            .unwrap();
        fn outputs<B: RnnBackend>(
            model: &CudnnCompatibleGru<B>,
            device: &B::Device,
        ) -> [Vec<f64>; 2] {
            let (y, state) = model.forward(tensor::<B>(SHAPE, 3, device), None);
            [to_f64(y), to_f64(state.hidden)]
        }
        let dispatch = outputs(&on_dispatch, &serving);
        let flex = outputs(&on_flex, &Default::default());
        assert!(dispatch[0].iter().any(|v| *v != 0.0));
        assert_eq!(dispatch, flex, "Dispatch (Flex device) and Flex differ");
    }
}
