//! Evaluation between training steps, as a training loop runs it: on a GPU backend,
//! inference keeps copies derived from unchanged parameters (the fused backends' flat
//! parameter buffer, cuDNN's weight space), keyed on the parameters' identity. Each
//! evaluation must see the parameters of the step just taken, a model kept from an
//! earlier step its own parameters, and giving the kept copies back must change no value.

use burn::backend::NdArray;
use burn::module::AutodiffModule;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::{Tensor, TensorData};
use burn_lstm::{CudnnCompatibleLstm, CudnnCompatibleLstmConfig, RnnBackend, RnnKernel};

use crate::common::{rel_err, to_f64};

/// The module checked: two bidirectional layers (four directions' parameters, so
/// cuDNN's weight space is laid out unlike the flat buffer where it needs a copy).
fn config() -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(3, 8)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_batch_first(true)
}

const INPUT: [usize; 3] = [3, 5, 3];

/// SGD's rate: large enough that each step moves the outputs well past the tolerance.
const LEARNING_RATE: f64 = 2.0;

fn input() -> TensorData {
    let values = (0..INPUT.iter().product::<usize>())
        .map(|i| ((i * 7) % 17) as f32 / 8.0 - 1.0)
        .collect::<Vec<_>>();
    TensorData::new(values, INPUT)
}

/// `y` then `h_n` of an inference call of `model` on the fixed input.
fn evaluate<B: RnnBackend>(model: &CudnnCompatibleLstm<B>, device: &B::Device) -> Vec<f64> {
    let (y, state) = model.forward(Tensor::from_data(input(), device), None);
    let mut values = to_f64(y);
    values.extend(to_f64(state.hidden));
    values
}

/// [`evaluate`] of the same parameters on NdArray (exported and loaded as PyTorch's
/// safetensors, through `dir`): the reference no GPU cache takes part in.
fn reference<B: RnnBackend>(model: &CudnnCompatibleLstm<B>, dir: &std::path::Path) -> Vec<f64> {
    let path = dir.join("parameters.safetensors");
    model.save_pytorch_safetensors(&path).expect("export");
    let on_cpu = config()
        .load_pytorch_safetensors::<NdArray<f32>>(&path, &Default::default())
        .expect("parameters load");
    evaluate(&on_cpu, &Default::default())
}

/// `steps` SGD steps of a module on `B` (its training calls), each followed by two
/// evaluations of the trained module on the inner backend (the second one served from
/// what the first kept) and one of the module as it was before the step, every one
/// within `tolerance` of NdArray on the same parameters; then `release` (what gives the
/// kept copies back: `burn_lstm::release_gpu_buffers`, `release_cpu_buffers`) and the
/// last evaluation again. `kernel`: what the evaluations must run.
pub fn check_evaluation_between_steps<B>(
    device: &B::Device,
    steps: usize,
    kernel: RnnKernel,
    tolerance: f64,
    release: fn(),
) where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
{
    let dir = tempfile::Builder::new()
        .prefix("burn-lstm-eval-steps-")
        .tempdir()
        .unwrap();
    let check = |what: &str, actual: &[f64], expected: &[f64]| {
        let error = rel_err(actual, expected);
        assert!(error <= tolerance, "{what}: relative error {error:.2e}");
    };
    let mut model = config().init::<B>(device);
    let mut optim = SgdConfig::new().init();
    let target = Tensor::<B, 3>::ones([INPUT[0], INPUT[1], 16], device);
    for step in 0..steps {
        let before = model.valid();
        let choice = before.kernel(device, INPUT[0], INPUT[1]);
        assert_eq!(choice.kernel, kernel, "step {step}: {choice}");
        let expected_before = reference(&before, dir.path());
        check(
            &format!("step {step}, before"),
            &evaluate(&before, device),
            &expected_before,
        );
        // Every other step lets go of the module of before the step, so that the
        // optimizer may write the parameters' memory in place (nobody else holds it).
        let kept = (step % 2 == 0).then_some(before);

        let (y, _) = model.forward(Tensor::from_data(input(), device), None);
        let loss = (y - target.clone()).powi_scalar(2).mean();
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        model = optim.step(LEARNING_RATE, model, grads);

        let after = model.valid();
        let expected = reference(&after, dir.path());
        let moved = rel_err(&expected, &expected_before);
        assert!(
            moved > 10.0 * tolerance,
            "step {step} moved the outputs by {moved:.2e} only: a stale evaluation would pass"
        );
        for call in ["first", "second"] {
            let actual = evaluate(&after, device);
            check(
                &format!("step {step}, {call} call after"),
                &actual,
                &expected,
            );
        }
        if let Some(before) = kept {
            check(
                &format!("step {step}, the module of before the step, again"),
                &evaluate(&before, device),
                &expected_before,
            );
        }
    }
    let last = model.valid();
    let expected = reference(&last, dir.path());
    release();
    check("after the release", &evaluate(&last, device), &expected);
}
