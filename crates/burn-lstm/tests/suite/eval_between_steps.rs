//! Evaluation between training steps on the CPU backends, whose inference keeps the
//! packed parameters while they are unchanged (`kernels/fused_cpu/weights_cache.rs`):
//! each evaluation sees the step just taken (`common::eval_between_steps_check`; the
//! fused GPU backends run the same check in `fusion.rs` and `cudnn.rs`), and the cache
//! lets go of each step's copies once their module is gone.

use burn::backend::{Autodiff, Flex, NdArray};
use burn::tensor::backend::AutodiffBackend;
use burn_lstm::{RnnBackend, RnnKernel};

use crate::common::eval_between_steps_check::check_evaluation_between_steps;

#[test]
fn evaluation_between_training_steps_sees_each_steps_parameters_on_ndarray() {
    check_evaluation_between_steps::<Autodiff<NdArray<f32>>>(
        &Default::default(),
        4,
        RnnKernel::FusedCpu,
        1e-5,
        burn_lstm::release_cpu_buffers,
    );
}

#[test]
fn evaluation_between_training_steps_sees_each_steps_parameters_on_flex() {
    check_evaluation_between_steps::<Autodiff<Flex>>(
        &Default::default(),
        4,
        RnnKernel::FusedCpu,
        1e-5,
        burn_lstm::release_cpu_buffers,
    );
}

/// Set in the child process that runs
/// [`the_weight_cache_keeps_one_entry_per_live_module`] (it counts
/// the process-wide cache's entries, which other tests would change).
const CACHE_CHILD: &str = "BURN_LSTM_CACHE_TEST_CHILD";

#[test]
fn the_weight_cache_keeps_one_entry_per_live_module() {
    if lstm_cpu::reran_in_child(
        module_path!(),
        "the_weight_cache_keeps_one_entry_per_live_module",
        &[(CACHE_CHILD, "1")],
    ) {
        return;
    }
    entries_while_training::<Autodiff<NdArray<f32>>>("ndarray");
    entries_while_training::<Autodiff<Flex>>("flex");
    first_calls_at_once_keep_one_entry::<NdArray<f32>>("ndarray");
    first_calls_at_once_keep_one_entry::<Flex>("flex");
    an_int8_copy_leaves_no_entry::<NdArray<f32>>("ndarray");
    an_int8_copy_leaves_no_entry::<Flex>("flex");
}

/// `quantized_int8()` reads the parameters once, past the cache: an int8 model never
/// misses it, so an entry of its source would stay after the source is dropped.
fn an_int8_copy_leaves_no_entry<B: RnnBackend>(label: &str) {
    use burn::tensor::{Distribution, Tensor};
    use burn_lstm::CudnnCompatibleLstmConfig;

    burn_lstm::release_cpu_buffers();
    let device = Default::default();
    let model = CudnnCompatibleLstmConfig::new(4, 8).init::<B>(&device);
    let int8 = model.quantized_int8().expect("a valid module");
    drop(model);
    let x = Tensor::<B, 3>::random([2, 5, 4], Distribution::Default, &device);
    let _ = int8.forward(x, None);
    let usage = burn_lstm::cpu_cache_usage();
    assert_eq!(usage.weight_entries, 0, "{label}: {usage:?}");
}

/// Ten modules, each first called by two threads at once: one cache entry per module
/// (two of one key would hold each other's parameters alive, never orphaned), and none
/// once the module is gone and another is called.
fn first_calls_at_once_keep_one_entry<B: RnnBackend>(label: &str) {
    use burn::tensor::{Distribution, Tensor};
    use burn_lstm::CudnnCompatibleLstmConfig;

    burn_lstm::release_cpu_buffers();
    let device = Default::default();
    let config = CudnnCompatibleLstmConfig::new(4, 8).with_num_layers(2);
    let x = Tensor::<B, 3>::random([2, 5, 4], Distribution::Default, &device);
    for trial in 0..10 {
        let model = config.init::<B>(&device);
        let both = std::sync::Barrier::new(2);
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    both.wait();
                    let _ = model.forward(x.clone(), None);
                });
            }
        });
        let usage = burn_lstm::cpu_cache_usage();
        // This module's entry only: the one before went at this module's miss.
        assert_eq!(usage.weight_entries, 1, "{label} trial {trial}: {usage:?}");
    }
}

/// Twelve SGD steps, each followed by an evaluation of the trained module (a copy on
/// the inner backend, dropped after it), beside a second module evaluated once and kept:
/// the weight cache holds the kept module's entry and the latest evaluation's only (an
/// entry whose parameters only the cache still holds goes at the next miss), where
/// least-recently-used eviction alone would hold every evaluation's up to its limit.
fn entries_while_training<B: AutodiffBackend + RnnBackend>(label: &str)
where
    B::InnerBackend: RnnBackend,
{
    use burn::module::AutodiffModule;
    use burn::optim::{GradientsParams, Optimizer, SgdConfig};
    use burn::tensor::{Distribution, Tensor};
    use burn_lstm::CudnnCompatibleLstmConfig;

    burn_lstm::release_cpu_buffers();
    let device = Default::default();
    let config = CudnnCompatibleLstmConfig::new(4, 8).with_num_layers(2);
    let x = Tensor::<B::InnerBackend, 3>::random([2, 5, 4], Distribution::Default, &device);
    let kept = config.init::<B::InnerBackend>(&device);
    let (kept_y, _) = kept.forward(x.clone(), None);
    let mut model = config.init::<B>(&device);
    let mut optim = SgdConfig::new().init();
    for step in 0..12 {
        let (y, _) = model.forward(Tensor::from_inner(x.clone()), None);
        let grads = GradientsParams::from_grads(y.powi_scalar(2).mean().backward(), &model);
        model = optim.step(0.5, model, grads);
        let evaluated = model.valid();
        let _ = evaluated.forward(x.clone(), None);
        drop(evaluated);
        let usage = burn_lstm::cpu_cache_usage();
        assert_eq!(
            usage.weight_entries, 2,
            "{label} after step {step}: the kept module's entry and the latest evaluation's ({usage:?})"
        );
    }
    // The kept module's entry still serves it, with its own parameters.
    let (again, _) = kept.forward(x, None);
    assert_eq!(again.into_data(), kept_y.into_data(), "{label}");
    assert_eq!(burn_lstm::cpu_cache_usage().weight_entries, 2, "{label}");
}

/// Set in the child process of [`the_weight_cache_keeps_as_many_modules_as_its_setting_says`].
const ENTRIES_CHILD: &str = "BURN_LSTM_ENTRIES_TEST_CHILD";

/// `BURN_LSTM_WEIGHT_CACHE_ENTRIES=12`: twelve live modules called in turn keep twelve
/// entries (the default keeps eight), and a thirteenth evicts the oldest.
#[test]
fn the_weight_cache_keeps_as_many_modules_as_its_setting_says() {
    use burn::tensor::{Distribution, Tensor};
    use burn_lstm::CudnnCompatibleLstmConfig;

    if lstm_cpu::reran_in_child(
        module_path!(),
        "the_weight_cache_keeps_as_many_modules_as_its_setting_says",
        &[
            (ENTRIES_CHILD, "1"),
            ("BURN_LSTM_WEIGHT_CACHE_ENTRIES", "12"),
        ],
    ) {
        return;
    }
    burn_lstm::release_cpu_buffers();
    let device = Default::default();
    let config = CudnnCompatibleLstmConfig::new(4, 8);
    let x = Tensor::<Flex, 3>::random([2, 5, 4], Distribution::Default, &device);
    let models: Vec<_> = (0..13).map(|_| config.init::<Flex>(&device)).collect();
    for (called, model) in models.iter().enumerate().take(12) {
        let _ = model.forward(x.clone(), None);
        assert_eq!(burn_lstm::cpu_cache_usage().weight_entries, called + 1);
    }
    let _ = models[12].forward(x, None);
    let usage = burn_lstm::cpu_cache_usage();
    assert_eq!(
        (usage.weight_entries, usage.weight_max_entries),
        (12, 12),
        "{usage:?}"
    );
}
