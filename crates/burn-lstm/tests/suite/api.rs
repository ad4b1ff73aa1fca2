//! The module's contract beyond the numbers: checkpoints, PyTorch import/export,
//! conversion from Burn's `nn::Lstm`, errors on bad input, the kernel-choice API, and
//! calls from several threads at once.

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::module::{AutodiffModule, Module, Param};
use burn::nn::{BiLstmConfig, LstmConfig};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::{Distribution, Tensor};
use burn_lstm::{
    CudnnCompatibleGruConfig, CudnnCompatibleLstm, CudnnCompatibleLstmConfig, LstmState, NanPolicy,
    RnnBackend, RnnError, RnnKernel,
};
use common::{expect_invalid, rel_err, to_f64};

type B = NdArray<f32>;
type AD = Autodiff<B>;

fn input<Bk: burn::tensor::backend::Backend>(dims: [usize; 3]) -> Tensor<Bk, 3> {
    Tensor::random(dims, Distribution::Normal(0.0, 1.0), &Default::default())
}

fn config() -> CudnnCompatibleLstmConfig {
    CudnnCompatibleLstmConfig::new(5, 6)
        .with_num_layers(2)
        .with_bidirectional(true)
        .with_proj_size(3)
}

fn with(change: impl FnOnce(&mut CudnnCompatibleLstmConfig)) -> CudnnCompatibleLstmConfig {
    let mut c = config();
    change(&mut c);
    c
}

/// A test's scratch directory, removed when the test ends.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("burn-lstm-test-")
        .tempdir()
        .unwrap()
}

#[test]
fn checkpoint_from_autodiff_loads_on_ndarray_with_identical_outputs() {
    let device = Default::default();
    let trained = config().init::<AD>(&device);
    let x = input::<B>([3, 7, 5]);
    // Reference outputs first: they also materialise Burn's lazily initialised params.
    let (y_trained, s_trained) = trained.valid().forward(x.clone(), None);
    let dir = scratch();
    let path = dir.path().join("roundtrip");
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    trained.save_file(&path, &recorder).unwrap();
    let loaded = config()
        .load_checkpoint::<B, _>(path.with_extension("mpk"), &recorder, &device)
        .unwrap();

    let (y_loaded, s_loaded) = loaded.forward(x, None);
    assert_eq!(to_f64(y_loaded), to_f64(y_trained));
    assert_eq!(to_f64(s_loaded.hidden), to_f64(s_trained.hidden));
    assert_eq!(to_f64(s_loaded.cell), to_f64(s_trained.cell));
}

#[test]
fn checkpoint_of_another_config_is_a_named_error() {
    let device = Default::default();
    let dir = scratch();
    let path = dir.path().join("other");
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    config()
        .init::<B>(&device)
        .save_file(&path, &recorder)
        .unwrap();
    let file = path.with_extension("mpk");

    let err = with(|c| c.hidden_size = 8)
        .load_checkpoint::<B, _>(&file, &recorder, &device)
        .unwrap_err();
    assert_eq!(
        err,
        RnnError::ParameterShape {
            name: "layers.0.forward.weight_ih".into(),
            expected: vec![32, 5],
            actual: vec![24, 5]
        }
    );
    let err = config()
        .with_num_layers(3)
        .load_checkpoint::<B, _>(&file, &recorder, &device)
        .unwrap_err();
    assert_eq!(
        err,
        RnnError::ParameterShape {
            name: "layers".into(),
            expected: vec![3],
            actual: vec![2]
        }
    );
    let err = config()
        .with_bidirectional(false)
        .load_checkpoint::<B, _>(&file, &recorder, &device)
        .unwrap_err();
    assert!(
        matches!(&err, RnnError::CheckpointTensor { problem: "unexpected", name, .. } if name == "layers.0.reverse"),
        "{err}"
    );
    let err = config()
        .with_proj_size(0)
        .load_checkpoint::<B, _>(&file, &recorder, &device)
        .unwrap_err();
    assert!(
        err.to_string().contains("layers.0.forward.weight_hh"),
        "{err}"
    );
    let err = config()
        .load_checkpoint::<B, _>(dir.path().join("absent.mpk"), &recorder, &device)
        .unwrap_err();
    assert!(matches!(err, RnnError::Io { .. }), "{err}");
}

#[test]
fn pytorch_safetensors_export_then_import_is_identical() {
    let device = Default::default();
    let model = config().init::<B>(&device);
    let dir = scratch();
    let path = dir.path().join("torch.safetensors");
    model.save_pytorch_safetensors(&path).unwrap();
    let names: Vec<String> = {
        let bytes = std::fs::read(&path).unwrap();
        let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
        let mut n: Vec<String> = file.names().into_iter().map(|n| n.to_string()).collect();
        n.sort();
        n
    };
    assert!(
        names.contains(&"weight_ih_l0".to_string())
            && names.contains(&"weight_hr_l1_reverse".to_string()),
        "{names:?}"
    );
    assert_eq!(names.len(), 2 * 2 * 5);

    let loaded = config()
        .load_pytorch_safetensors::<B>(&path, &device)
        .unwrap();
    let x = input::<B>([2, 4, 5]);
    assert_eq!(
        to_f64(loaded.forward(x.clone(), None).0),
        to_f64(model.forward(x, None).0)
    );

    let err = with(|c| c.input_size = 4)
        .load_pytorch_safetensors::<B>(&path, &device)
        .unwrap_err();
    assert_eq!(
        err,
        RnnError::ParameterShape {
            name: "weight_ih_l0".into(),
            expected: vec![24, 4],
            actual: vec![24, 5]
        }
    );
    let err = config()
        .with_num_layers(1)
        .load_pytorch_safetensors::<B>(&path, &device)
        .unwrap_err();
    assert!(
        matches!(&err, RnnError::CheckpointTensor { problem: "unexpected", name, .. } if name.ends_with("_l1") || name.contains("_l1_")),
        "{err}"
    );
    let err = config()
        .with_num_layers(3)
        .load_pytorch_safetensors::<B>(&path, &device)
        .unwrap_err();
    assert!(
        matches!(&err, RnnError::CheckpointTensor { problem: "missing", name, .. } if name == "weight_ih_l2"),
        "{err}"
    );
}

#[test]
fn burn_nn_lstm_converts_with_identical_outputs() {
    let device = Default::default();
    let burn_lstm = LstmConfig::new(5, 6, true).init::<B>(&device);
    let ours = CudnnCompatibleLstm::from_burn_lstm(&burn_lstm).unwrap();
    let x = input::<B>([3, 8, 5]);
    let (y_burn, s_burn) = burn_lstm.forward(x.clone(), None);
    let (y_ours, s_ours) = ours.forward(x, None);
    assert!(rel_err(&to_f64(y_ours), &to_f64(y_burn)) < 1e-6);
    assert!(rel_err(&to_f64(s_ours.hidden), &to_f64(s_burn.hidden)) < 1e-6);
    assert!(rel_err(&to_f64(s_ours.cell), &to_f64(s_burn.cell)) < 1e-6);

    let bi = BiLstmConfig::new(5, 6, true).init::<B>(&device);
    let ours = CudnnCompatibleLstm::from_burn_bilstm(&bi).unwrap();
    let x = input::<B>([2, 6, 5]);
    let state = LstmState::new(input::<B>([2, 2, 6]), input::<B>([2, 2, 6]));
    let (y_burn, s_burn) = bi.forward(
        x.clone(),
        Some(burn::nn::LstmState::new(
            state.cell.clone(),
            state.hidden.clone(),
        )),
    );
    let (y_ours, s_ours) = ours.forward(x, Some(state));
    assert!(rel_err(&to_f64(y_ours), &to_f64(y_burn)) < 1e-6);
    assert!(rel_err(&to_f64(s_ours.hidden), &to_f64(s_burn.hidden)) < 1e-6);
    assert!(rel_err(&to_f64(s_ours.cell), &to_f64(s_burn.cell)) < 1e-6);

    let reversed = LstmConfig::new(5, 6, true)
        .with_reverse(true)
        .init::<B>(&device);
    let err = CudnnCompatibleLstm::from_burn_lstm(&reversed).unwrap_err();
    assert!(err.to_string().contains("reverse"), "{err}");

    // A model being trained (an `Autodiff` backend) converts too, into trainable leaves
    // whose gradients are Burn's: PyTorch's gate order is i, f, g, o, and Burn's
    // `Linear` stores its weight transposed (`[in, out]`).
    let trained = LstmConfig::new(5, 6, true).init::<AD>(&device);
    let ours = CudnnCompatibleLstm::from_burn_lstm(&trained).unwrap();
    let x = Tensor::<AD, 3>::from_inner(input::<B>([2, 3, 5])).require_grad();
    // Weighted, so that every output element counts differently.
    let weights = Tensor::<AD, 3>::from_inner(input::<B>([2, 3, 6]));
    let g_burn = (trained.forward(x.clone(), None).0 * weights.clone())
        .sum()
        .backward();
    let g_ours = (ours.forward(x.clone(), None).0 * weights).sum().backward();
    let dx = |grads| to_f64(x.grad(grads).expect("the input's gradient"));
    assert!(rel_err(&dx(&g_ours), &dx(&g_burn)) < 1e-5);
    let cell = ours.directions().next().unwrap();
    let gates = [
        &trained.input_gate,
        &trained.forget_gate,
        &trained.cell_gate,
        &trained.output_gate,
    ];
    for (k, gate) in gates.into_iter().enumerate() {
        let rows = k * 6..(k + 1) * 6;
        let matrices = [
            (&cell.weight_ih, &gate.input_transform.weight),
            (&cell.weight_hh, &gate.hidden_transform.weight),
        ];
        for (m, (ours_w, burn_w)) in matrices.into_iter().enumerate() {
            let got = ours_w.grad(&g_ours).unwrap().slice([rows.clone()]);
            let want = burn_w.grad(&g_burn).unwrap().transpose();
            assert!(
                rel_err(&to_f64(got), &to_f64(want)) < 1e-5,
                "gate {k}, matrix {m}"
            );
        }
        let biases = [
            (&cell.bias_ih, &gate.input_transform.bias),
            (&cell.bias_hh, &gate.hidden_transform.bias),
        ];
        for (m, (ours_b, burn_b)) in biases.into_iter().enumerate() {
            let got = ours_b.as_ref().unwrap().grad(&g_ours).unwrap();
            let want = burn_b.as_ref().unwrap().grad(&g_burn).unwrap();
            assert!(
                rel_err(&to_f64(got.slice([rows.clone()])), &to_f64(want)) < 1e-5,
                "gate {k}, bias {m}"
            );
        }
    }
}

#[test]
fn bad_input_is_a_clear_error() {
    let device = Default::default();
    let model = config().init::<B>(&device);
    expect_invalid(
        model.try_forward(input([2, 4, 7]), None, None),
        "input",
        &["input_size = 5", "[2, 4, 7]"],
    );
    expect_invalid(
        model.try_forward(input([0, 4, 5]), None, None),
        "input",
        &["[0, 4, 5]"],
    );
    let bad_state = LstmState::new(input([4, 2, 6]), input([4, 2, 6]));
    expect_invalid(
        model.try_forward(input([2, 4, 5]), Some(bad_state), None),
        "state.hidden",
        &["[4, 2, 3]", "[4, 2, 6]"],
    );
    let bad_cell = LstmState::new(input([4, 2, 3]), input([4, 3, 6]));
    expect_invalid(
        model.try_forward(input([2, 4, 5]), Some(bad_cell), None),
        "state.cell",
        &["[4, 2, 6]", "[4, 3, 6]"],
    );
    // A length of 0 (an empty row) is valid: see tests/suite_f64/empty_rows.rs.
    assert!(
        model
            .try_forward(input([2, 4, 5]), None, Some(&[4, 0]))
            .is_ok()
    );
    expect_invalid(
        model.try_forward(input([2, 4, 5]), None, Some(&[5, 1])),
        "lengths[0]",
        &["0..=4", "5"],
    );
    expect_invalid(
        model.try_forward(input([2, 4, 5]), None, Some(&[4])),
        "lengths",
        &["(2)", "1 lengths"],
    );
    expect_invalid(
        config().with_dropout(1.0).try_init::<B>(&device),
        "dropout",
        &["[0, 1)", "1"],
    );
    expect_invalid(
        config().with_dropout(-0.1).try_init::<B>(&device),
        "dropout",
        &["-0.1"],
    );
    expect_invalid(
        config().with_proj_size(6).try_init::<B>(&device),
        "proj_size",
        &["less than hidden_size (6)", "6"],
    );
    expect_invalid(
        config().with_num_layers(0).try_init::<B>(&device),
        "num_layers",
        &["at least 1", "0"],
    );
    // Sizes whose parameter count overflows: named, never a wrapped size.
    for (hidden_size, num_layers) in [(1usize << 62, 1), (1 << 20, 1 << 40)] {
        expect_invalid(
            CudnnCompatibleLstmConfig::new(8, hidden_size)
                .with_num_layers(num_layers)
                .try_init::<B>(&device),
            "hidden_size, input_size and num_layers",
            &["overflows", &format!("hidden_size {hidden_size}")],
        );
    }
    expect_invalid(
        CudnnCompatibleGruConfig::new(8, 1 << 62).try_init::<B>(&device),
        "hidden_size, input_size and num_layers",
        &["overflows"],
    );
    // A module's fields are public: a call re-checks them as the config does.
    let mut emptied = model.clone();
    emptied.layers.clear();
    expect_invalid(
        emptied.try_forward(input([2, 4, 5]), None, None),
        "num_layers",
        &["at least 1", "0"],
    );
    let mut certain_drop = config().with_num_layers(2).init::<B>(&device);
    certain_drop.dropout = 1.0;
    expect_invalid(
        certain_drop.try_forward(input([2, 4, 5]), None, None),
        "dropout",
        &["[0, 1)", "1"],
    );

    let strict = config()
        .with_nan_policy(NanPolicy::Reject)
        .init::<B>(&device);
    let mut values = vec![0.5f32; 2 * 4 * 5];
    values[3] = f32::NAN;
    values[7] = f32::INFINITY;
    let x = Tensor::<B, 3>::from_data(burn::tensor::TensorData::new(values, [2, 4, 5]), &device);
    assert_eq!(
        strict.try_forward(x.clone(), None, None).unwrap_err(),
        RnnError::NonFinite {
            argument: "input".into(),
            count: 2
        }
    );
    let (y, _) = model.forward(x, None);
    assert!(
        to_f64(y).iter().any(|v| v.is_nan()),
        "NanPolicy::Propagate lets NaN through"
    );

    let panic = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        model.forward(input([2, 4, 7]), None)
    }))
    .unwrap_err();
    let message = panic.downcast_ref::<String>().unwrap();
    assert!(message.contains("invalid `input`"), "{message}");
}

#[test]
fn padded_rows_are_zero_past_their_length_and_keep_their_final_state() {
    let device = Default::default();
    let model = CudnnCompatibleLstmConfig::new(3, 4).init::<B>(&device);
    let x = input::<B>([2, 5, 3]);
    let (y, state) = model.forward_with_lengths(x.clone(), &[5, 2], None);
    let short = x.clone().slice([1..2, 0..2]);
    let (y_short, state_short) = model.forward(short, None);
    let y = to_f64(y);
    // Row 1: steps 0..2 equal a run on the truncated row, steps 2..5 are zero.
    let row1: Vec<f64> = y[5 * 4..].to_vec();
    assert!(rel_err(&row1[..8], &to_f64(y_short)) < 1e-6);
    assert!(row1[8..].iter().all(|v| *v == 0.0));
    let hidden = to_f64(state.hidden);
    assert!(rel_err(&hidden[4..], &to_f64(state_short.hidden)) < 1e-6);
    let cell = to_f64(state.cell);
    assert!(rel_err(&cell[4..], &to_f64(state_short.cell)) < 1e-6);
    // Row 0, at full length, equals a run of its own.
    let (y_full, state_full) = model.forward(x.narrow(0, 0, 1), None);
    assert!(rel_err(&y[..5 * 4], &to_f64(y_full)) < 1e-6);
    assert!(rel_err(&hidden[..4], &to_f64(state_full.hidden)) < 1e-6);
    assert!(rel_err(&cell[..4], &to_f64(state_full.cell)) < 1e-6);
}

#[test]
fn dropout_only_while_training() {
    let device = Default::default();
    let cfg = CudnnCompatibleLstmConfig::new(3, 8)
        .with_num_layers(2)
        .with_dropout(0.5);
    let model = cfg.init::<AD>(&device);
    let x = input::<AD>([2, 5, 3]);
    let (train_a, _) = model.forward(x.clone(), None);
    let (train_b, _) = model.forward(x.clone(), None);
    assert_ne!(
        to_f64(train_a),
        to_f64(train_b),
        "training draws fresh masks"
    );
    // In inference the dropout rate changes nothing: the same weights without dropout
    // give the same numbers.
    let inference = model.valid();
    let mut without_dropout = inference.clone();
    without_dropout.dropout = 0.0;
    let x = x.inner();
    assert_eq!(
        to_f64(inference.forward(x.clone(), None).0),
        to_f64(without_dropout.forward(x, None).0)
    );
}

/// Every parameter's gradient, in canonical order.
fn canonical_grads(
    model: &CudnnCompatibleLstm<AD>,
    grads: &<AD as burn::tensor::backend::AutodiffBackend>::Gradients,
) -> Vec<f64> {
    let mut values = Vec::new();
    for cell in model.directions() {
        let params = [Some(&cell.weight_ih), Some(&cell.weight_hh)];
        for param in params.into_iter().flatten() {
            values.extend(to_f64(param.grad(grads).expect("a weight's gradient")));
        }
        for bias in [&cell.bias_ih, &cell.bias_hh].into_iter().flatten() {
            values.extend(to_f64(bias.grad(grads).expect("a bias's gradient")));
        }
        if let Some(w) = &cell.weight_hr {
            values.extend(to_f64(w.grad(grads).expect("weight_hr's gradient")));
        }
    }
    values
}

#[test]
fn an_untracked_input_gets_no_gradient_and_changes_no_other() {
    // The fused CPU kernel skips the input's gradient when autodiff does not track the
    // input (raw features); the parameters' and the initial state's stay the same, bit
    // for bit (two layers, both directions, a projection).
    let device = Default::default();
    let model = config().init::<AD>(&device);
    let x = input::<B>([3, 4, 5]);
    let h0 = Tensor::<AD, 3>::random([4, 3, 3], Distribution::Default, &device).require_grad();
    let c0 = Tensor::<AD, 3>::random([4, 3, 6], Distribution::Default, &device).require_grad();
    let run = |x: Tensor<AD, 3>| {
        let state = LstmState::new(h0.clone(), c0.clone());
        let (y, state) = model.forward(x.clone(), Some(state));
        let grads = (y.sum() + state.cell.sum()).backward();
        let initial = [&h0, &c0].map(|t| to_f64(t.grad(&grads).expect("a state gradient")));
        (x.grad(&grads), canonical_grads(&model, &grads), initial)
    };
    let (dx, params, initial) = run(Tensor::from_inner(x.clone()).require_grad());
    let dx = dx.expect("a tracked input has a gradient");
    assert_eq!(dx.dims(), [3, 4, 5]);
    assert!(to_f64(dx).iter().any(|&v| v != 0.0));
    let (none, params_without, initial_without) = run(Tensor::from_inner(x));
    assert!(none.is_none(), "an untracked input gets no gradient");
    assert_eq!(params_without, params, "the parameters' gradients");
    assert_eq!(initial_without, initial, "the initial state's gradients");
}

fn kernel_choice_is_reported_on<B: RnnBackend>() {
    let device = Default::default();
    let model = config().init::<B>(&device);
    let choice = model.kernel(&device, 4, 10);
    assert_eq!(choice.kernel, RnnKernel::FusedCpu);
    assert_eq!(choice.fallback_reason, None, "{choice}");
    let ad = config().init::<Autodiff<B>>(&device);
    assert_eq!(
        ad.kernel(&device, 4, 10),
        choice,
        "autodiff reports its inner backend's kernel"
    );

    let portable = model.clone().with_kernel(Some(RnnKernel::Portable));
    let choice = portable.kernel(&device, 4, 10);
    assert_eq!(choice.kernel, RnnKernel::Portable);
    assert!(choice.to_string().contains("asked for"), "{choice}");

    let cudnn = model.with_kernel(Some(RnnKernel::Cudnn));
    let choice = cudnn.kernel(&device, 4, 10);
    assert_eq!(choice.kernel, RnnKernel::FusedCpu);
    assert!(choice.to_string().contains("CUDA"), "{choice}");
}

#[test]
fn kernel_choice_is_reported() {
    kernel_choice_is_reported_on::<NdArray<f32>>();
}

#[test]
fn kernel_choice_is_reported_on_flex() {
    kernel_choice_is_reported_on::<Flex>();
}

#[test]
fn threads_sharing_one_module_get_identical_results() {
    // Large enough that every call splits its steps over a team of threads.
    let device = Default::default();
    let model = CudnnCompatibleLstmConfig::new(48, 64)
        .with_num_layers(2)
        .with_bidirectional(true)
        .init::<B>(&device);
    let x = input::<B>([16, 12, 48]);
    let expected = to_f64(model.forward(x.clone(), None).0);
    let results: Vec<Vec<f64>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..4)
            .map(|_| scope.spawn(|| to_f64(model.forward(x.clone(), None).0)))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    for result in results {
        assert_eq!(result, expected, "a concurrent call gave different numbers");
    }
}

/// Set in the child process of [`overlapping_calls_sharing_the_threads_give_the_same_numbers`].
const SHARED_CHILD: &str = "BURN_LSTM_SHARED_TEST_CHILD";

/// With `BURN_LSTM_THREADS_SHARED=1` (and 4 threads a call), calls that overlap run on
/// fewer threads each than a lone call (the share each call takes is tested in
/// `kernels/fused_cpu/threads.rs`): their outputs (f32 on NdArray and Flex, the int8
/// copy) and gradients (a training step, whose batch-first input of 288 KiB is copied
/// on the call's threads) stay those of the lone call, up to the last bits a change of
/// thread count may move.
#[test]
fn overlapping_calls_sharing_the_threads_give_the_same_numbers() {
    if lstm_cpu::reran_in_child(
        module_path!(),
        "overlapping_calls_sharing_the_threads_give_the_same_numbers",
        &[
            (SHARED_CHILD, "1"),
            ("BURN_LSTM_THREADS_SHARED", "1"),
            ("BURN_LSTM_THREADS", "4"),
        ],
    ) {
        return;
    }
    assert!(burn_lstm::cpu_threads_shared(), "read from the environment");
    assert_eq!(burn_lstm::cpu_threads(), 4);
    let config = CudnnCompatibleLstmConfig::new(48, 64)
        .with_num_layers(2)
        .with_bidirectional(true);
    let ndarray = config.init::<B>(&Default::default());
    let flex = config.init::<Flex>(&Default::default());
    let int8 = flex.quantized_int8().unwrap();
    let x = input::<B>([16, 12, 48]);
    let x_flex = Tensor::<Flex, 3>::from_data(x.to_data(), &Default::default());
    let trained = config.init::<AD>(&Default::default());
    let x_trained = input::<B>([64, 24, 48]);
    let gradient = || {
        let x = Tensor::<AD, 3>::from_inner(x_trained.clone()).require_grad();
        let grads = trained
            .forward(x.clone(), None)
            .0
            .powi_scalar(2)
            .sum()
            .backward();
        to_f64(x.grad(&grads).expect("the input's gradient"))
    };
    let calls: [(&str, &(dyn Fn() -> Vec<f64> + Sync)); 4] = [
        ("NdArray f32", &|| {
            to_f64(ndarray.forward(x.clone(), None).0)
        }),
        ("Flex f32", &|| to_f64(flex.forward(x_flex.clone(), None).0)),
        ("Flex int8", &|| {
            to_f64(int8.forward(x_flex.clone(), None).0)
        }),
        ("NdArray training", &gradient),
    ];
    for (what, call) in calls {
        let alone = call();
        let start = std::sync::Barrier::new(4);
        let overlapping: Vec<Vec<f64>> = std::thread::scope(|scope| {
            let handles: Vec<_> = (0..4)
                .map(|_| {
                    let start = &start;
                    scope.spawn(move || {
                        start.wait();
                        (0..3).map(|_| call()).collect::<Vec<_>>()
                    })
                })
                .collect();
            handles
                .into_iter()
                .flat_map(|h| h.join().unwrap())
                .collect()
        });
        for result in overlapping {
            let error = rel_err(&result, &alone);
            assert!(error < 1e-5, "{what}: an overlapping call is {error:e} off");
        }
    }
}

fn changed_parameters_are_used_at_once_on<B: RnnBackend>() {
    // The fused kernel packs weights per call; a parameter changed between two calls
    // must change the second call exactly as a freshly built module would.
    let device = Default::default();
    let model = config().init::<B>(&device);
    let x = input::<B>([3, 7, 5]);
    let before = to_f64(model.forward(x.clone(), None).0);
    let mut changed = model.clone();
    changed.layers[1].forward.weight_hh = changed.layers[1]
        .forward
        .weight_hh
        .clone()
        .map(|w| w.mul_scalar(1.5));
    let after = to_f64(changed.forward(x.clone(), None).0);
    assert!(rel_err(&after, &before) > 1e-3, "the change had no effect");
    let reference = to_f64(
        changed
            .with_kernel(Some(RnnKernel::Portable))
            .forward(x, None)
            .0,
    );
    assert!(rel_err(&after, &reference) < 1e-5);
}

#[test]
fn changed_parameters_are_used_at_once() {
    changed_parameters_are_used_at_once_on::<NdArray<f32>>();
}

#[test]
fn changed_parameters_are_used_at_once_on_flex() {
    changed_parameters_are_used_at_once_on::<Flex>();
}

fn inference_reuses_packed_weights_only_while_the_parameters_are_unchanged_on<B: RnnBackend>() {
    // NdArray and Flex inference keep the flat and packed copies of the parameters they
    // last saw (weights_cache.rs), keyed on the parameters' storage. The hazard: a
    // parameter whose tensor nobody else holds is changed *in place* (same storage, same
    // key) by the backend. The cache holds a clone of every parameter, so that cannot happen; this
    // checks the numbers after such a change, after loading a record, and after a
    // release.
    let device = Default::default();
    let portable = |m: &CudnnCompatibleLstm<B>, x: &Tensor<B, 3>| {
        to_f64(
            m.clone()
                .with_kernel(Some(RnnKernel::Portable))
                .forward(x.clone(), None)
                .0,
        )
    };
    let mut model = config().init::<B>(&device);
    let x = input::<B>([3, 7, 5]);
    let first = to_f64(model.forward(x.clone(), None).0);
    let second = to_f64(model.forward(x.clone(), None).0);
    assert_eq!(first, second, "the second call (cached weights) differs");
    assert!(rel_err(&first, &portable(&model, &x)) < 1e-5);

    // Moved out (no clone), so `mul_scalar` may work in place on the only handle.
    let layer = &mut model.layers[1].forward;
    let placeholder = Param::from_tensor(Tensor::zeros([1, 1], &device));
    let weight_hh = std::mem::replace(&mut layer.weight_hh, placeholder);
    layer.weight_hh = weight_hh.map(|w| w.mul_scalar(1.5));
    let after = to_f64(model.forward(x.clone(), None).0);
    assert!(rel_err(&after, &first) > 1e-3, "the change had no effect");
    assert!(rel_err(&after, &portable(&model, &x)) < 1e-5);

    let other = config().init::<B>(&device);
    let expected = to_f64(other.forward(x.clone(), None).0);
    let model = model.load_record(other.into_record());
    assert_eq!(to_f64(model.forward(x.clone(), None).0), expected);

    burn_lstm::release_cpu_buffers();
    assert_eq!(to_f64(model.forward(x, None).0), expected);
}

#[test]
fn inference_reuses_packed_weights_only_while_the_parameters_are_unchanged() {
    inference_reuses_packed_weights_only_while_the_parameters_are_unchanged_on::<NdArray<f32>>();
}

#[test]
fn inference_reuses_packed_weights_only_while_the_parameters_are_unchanged_on_flex() {
    inference_reuses_packed_weights_only_while_the_parameters_are_unchanged_on::<Flex>();
}

/// Every parameter's values in the canonical order, read one by one through
/// `into_data` (the reference for the op's flat buffer).
fn canonical_values<Bk: burn::tensor::backend::Backend>(
    model: &CudnnCompatibleLstm<Bk>,
) -> Vec<f64> {
    let mut values = Vec::new();
    for cell in model.directions() {
        values.extend(to_f64(cell.weight_ih.val()));
        values.extend(to_f64(cell.weight_hh.val()));
        for bias in [&cell.bias_ih, &cell.bias_hh].into_iter().flatten() {
            values.extend(to_f64(bias.val()));
        }
        if let Some(w) = &cell.weight_hr {
            values.extend(to_f64(w.val()));
        }
    }
    values
}

fn flat_weights_hold_every_parameter_in_canonical_order_on<B: RnnBackend>() {
    // NdArray and Flex build the buffer themselves (row by row through strides), autodiff
    // with tracked parameters by appends, autodiff without through the inner backend.
    // A parameter stored transposed (a strided view) must be read in its logical order.
    let device = Default::default();
    let mut model = config().init::<B>(&device);
    let w = model.layers[0].forward.weight_ih.val();
    let [rows, cols] = w.dims();
    let transposed =
        Tensor::<B, 2>::random([cols, rows], Distribution::Default, &device).transpose();
    model.layers[0].forward.weight_ih = burn::module::Param::from_tensor(transposed);
    let expected = canonical_values(&model);
    assert_eq!(expected.len(), model.arch().weight_count());
    assert_eq!(to_f64(model.flat_weights()), expected, "the plain backend");

    let tracked = config().init::<Autodiff<B>>(&device);
    let expected = canonical_values(&tracked);
    let flat = tracked.flat_weights();
    assert_eq!(to_f64(flat.clone()), expected, "autodiff, tracked");
    // Tracked: the gradient of the buffer reaches each parameter, in its place.
    let scale = Tensor::<Autodiff<B>, 1>::from_floats(
        (0..expected.len())
            .map(|i| i as f32)
            .collect::<Vec<_>>()
            .as_slice(),
        &device,
    );
    let grads = (flat * scale).sum().backward();
    let grad_hr = tracked.layers[1]
        .reverse
        .as_ref()
        .unwrap()
        .weight_hr
        .as_ref()
        .unwrap();
    let offset = tracked
        .arch()
        .direction_layout(1, 1)
        .weight_hr
        .unwrap()
        .start;
    let got = to_f64(grad_hr.grad(&grads).expect("weight_hr has a gradient"));
    let want: Vec<f64> = (offset..offset + got.len()).map(|i| i as f64).collect();
    assert_eq!(
        got, want,
        "the gradient of weight_hr is its slice of the buffer's"
    );

    let untracked = tracked.no_grad();
    assert_eq!(
        to_f64(untracked.flat_weights()),
        expected,
        "autodiff, untracked"
    );
}

#[test]
fn flat_weights_hold_every_parameter_in_canonical_order() {
    flat_weights_hold_every_parameter_in_canonical_order_on::<NdArray<f32>>();
}

#[test]
fn flat_weights_hold_every_parameter_in_canonical_order_on_flex() {
    flat_weights_hold_every_parameter_in_canonical_order_on::<Flex>();
}

/// Fine-tuning with frozen layers: `no_grad` on the bottom layer (or on the whole layer,
/// with a trained input) leaves the other gradients exactly as a fully tracked model's,
/// and gives the frozen parameters none, on the fused CPU kernel and the portable one.
fn frozen_parameters_get_no_gradient_and_change_no_other_on<Bk: RnnBackend>(kernel: RnnKernel) {
    let device = Default::default();
    let model = config()
        .init::<Autodiff<Bk>>(&device)
        .with_kernel(Some(kernel));
    let x =
        Tensor::<Autodiff<Bk>, 3>::random([3, 4, 5], Distribution::Default, &device).require_grad();
    let run = |model: &CudnnCompatibleLstm<Autodiff<Bk>>| {
        let (y, state) = model.forward(x.clone(), None);
        let grads = (y.powi_scalar(2).sum() + state.cell.sum()).backward();
        let dx = to_f64(x.grad(&grads).expect("the input's gradient"));
        let per_param: Vec<Option<Vec<f64>>> = model
            .directions()
            .flat_map(|cell| {
                let mut params = vec![&cell.weight_ih, &cell.weight_hh];
                params.extend(&cell.weight_hr);
                let mut grads_of: Vec<Option<Vec<f64>>> = params
                    .into_iter()
                    .map(|p| p.grad(&grads).map(to_f64))
                    .collect();
                for bias in [&cell.bias_ih, &cell.bias_hh].into_iter().flatten() {
                    grads_of.push(bias.grad(&grads).map(to_f64));
                }
                grads_of
            })
            .collect();
        (dx, per_param)
    };
    let (dx, all) = run(&model);
    let mut bottom_frozen = model.clone();
    bottom_frozen.layers[0] = bottom_frozen.layers[0].clone().no_grad();
    let (dx_frozen, some) = run(&bottom_frozen);
    assert_eq!(dx_frozen, dx, "{kernel:?}: the input's gradient");
    // Two directions of the bottom layer, five parameters each (weight_hr included).
    let frozen = 10;
    for (i, (got, want)) in some.iter().zip(&all).enumerate() {
        if i < frozen {
            assert!(
                got.is_none(),
                "{kernel:?}: frozen parameter {i} has no gradient"
            );
        } else {
            assert_eq!(got, want, "{kernel:?}: parameter {i}'s gradient");
        }
    }
    let (dx_all_frozen, none) = run(&model.clone().no_grad());
    assert_eq!(
        dx_all_frozen, dx,
        "{kernel:?}: the input's gradient, every layer frozen"
    );
    assert!(none.iter().all(Option::is_none));
}

#[test]
fn frozen_parameters_get_no_gradient_and_change_no_other() {
    for kernel in [RnnKernel::FusedCpu, RnnKernel::Portable] {
        frozen_parameters_get_no_gradient_and_change_no_other_on::<NdArray<f32>>(kernel);
        frozen_parameters_get_no_gradient_and_change_no_other_on::<Flex>(kernel);
    }
}
