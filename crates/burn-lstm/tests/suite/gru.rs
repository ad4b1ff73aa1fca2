//! `CudnnCompatibleGru`'s contract beyond the golden numbers: which kernel runs and
//! why, empty and padded rows, errors on bad input, Burn checkpoints and PyTorch
//! safetensors (both directions, and an LSTM's file refused by name).

use crate::common;

use burn::backend::{Autodiff, Flex, NdArray};
use burn::module::{AutodiffModule, Module};
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::tensor::{Distribution, Tensor, backend::Backend};
use burn_lstm::{
    CudnnCompatibleGru, CudnnCompatibleGruConfig, CudnnCompatibleLstmConfig, GruState, RnnBackend,
    RnnError, RnnKernel,
};
use common::to_f64;

type B = NdArray<f32>;
type AD = Autodiff<B>;

fn input<Bk: Backend>(dims: [usize; 3]) -> Tensor<Bk, 3> {
    Tensor::random(dims, Distribution::Normal(0.0, 1.0), &Default::default())
}

fn config() -> CudnnCompatibleGruConfig {
    CudnnCompatibleGruConfig::new(5, 6)
        .with_num_layers(2)
        .with_bidirectional(true)
}

/// A test's scratch directory, removed when the test ends.
fn scratch() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("burn-gru-test-")
        .tempdir()
        .unwrap()
}

fn kernel_choice_is_reported_on<Bk: RnnBackend>() {
    let device = Default::default();
    let model = config().init::<Bk>(&device);
    let choice = model.clone().kernel(&device, 4, 10);
    assert_eq!(choice.kernel, RnnKernel::FusedCpu, "{choice}");
    // Right-padded rows, one of them empty: the choice of the LSTM of the same sizes.
    let lengths = Some(&[10, 0, 4, 7][..]);
    let choice = model.kernel_with_lengths(&device, 4, 10, lengths);
    let c = config();
    let lstm = burn_lstm::CudnnCompatibleLstmConfig::new(c.input_size, c.hidden_size)
        .with_num_layers(c.num_layers)
        .with_bidirectional(c.bidirectional)
        .init::<Bk>(&device);
    let lstm_choice = lstm.kernel_with_lengths(&device, 4, 10, lengths);
    assert_eq!(choice.kernel, RnnKernel::FusedCpu, "{choice}");
    assert_eq!(
        (choice.kernel, &choice.fallback_reason),
        (lstm_choice.kernel, &lstm_choice.fallback_reason)
    );
    let choice = model
        .clone()
        .with_kernel(Some(RnnKernel::Portable))
        .kernel(&device, 4, 10);
    assert_eq!(choice.kernel, RnnKernel::Portable, "{choice}");
    let choice = model
        .with_kernel(Some(RnnKernel::Cudnn))
        .kernel(&device, 4, 10);
    assert_eq!(choice.kernel, RnnKernel::FusedCpu, "{choice}");
    assert!(choice.to_string().contains("only on CUDA"), "{choice}");
}

#[test]
fn kernel_choice_says_a_gru_runs_the_fused_cpu_kernel() {
    kernel_choice_is_reported_on::<B>();
    kernel_choice_is_reported_on::<Flex>();
    kernel_choice_is_reported_on::<AD>();
}

#[test]
fn shapes_of_outputs_and_state() {
    let device = Default::default();
    let model = config().init::<B>(&device);
    let (y, state) = model.forward(input::<B>([3, 7, 5]), None);
    assert_eq!(y.dims(), [3, 7, 12]);
    assert_eq!(state.hidden.dims(), [4, 3, 6]);
    let model = config().with_batch_first(false).init::<B>(&device);
    let (y, _) = model.forward(input::<B>([7, 3, 5]), None);
    assert_eq!(y.dims(), [7, 3, 12]);
}

/// Padded and empty rows give what each row gives alone: zeros past its length, its
/// own final state (the initial state for an empty row).
#[test]
fn padded_and_empty_rows_match_each_row_run_alone() {
    let device = Default::default();
    let model = config().init::<B>(&device);
    let x = input::<B>([3, 6, 5]);
    let h0 = input::<B>([4, 3, 6]);
    let lengths = [6, 0, 3];
    let (y, state) =
        model.forward_with_lengths(x.clone(), &lengths, Some(GruState::new(h0.clone())));
    for (row, &len) in lengths.iter().enumerate() {
        let y_row = to_f64(y.clone().narrow(0, row, 1));
        let h_row = to_f64(state.hidden.clone().narrow(1, row, 1));
        let h0_row = h0.clone().narrow(1, row, 1);
        if len == 0 {
            assert!(y_row.iter().all(|&v| v == 0.0));
            assert_eq!(h_row, to_f64(h0_row));
            continue;
        }
        let alone = x.clone().narrow(0, row, 1).narrow(1, 0, len);
        let (y_alone, s_alone) = model.forward(alone, Some(GruState::new(h0_row)));
        let y_alone = to_f64(y_alone);
        let width = 12;
        for (k, (&a, &b)) in y_row[..len * width].iter().zip(&y_alone).enumerate() {
            assert!((a - b).abs() < 1e-6, "row {row} value {k}: {a} vs {b}");
        }
        assert!(y_row[len * width..].iter().all(|&v| v == 0.0));
        for (&a, &b) in h_row.iter().zip(&to_f64(s_alone.hidden)) {
            assert!((a - b).abs() < 1e-6, "row {row} final state: {a} vs {b}");
        }
    }
}

#[test]
fn bad_input_and_config_are_clear_errors() {
    let device = Default::default();
    let model = config().init::<B>(&device);
    let err = model
        .try_forward(input::<B>([3, 7, 4]), None, None)
        .unwrap_err();
    assert!(err.to_string().contains("input"), "{err}");
    let wrong_state = GruState::new(input::<B>([2, 3, 6]));
    match model.try_forward(input::<B>([3, 7, 5]), Some(wrong_state), None) {
        Err(RnnError::InvalidArgument {
            argument,
            expected,
            actual,
        }) => {
            assert_eq!(argument, "state.hidden");
            assert!(expected.contains("[4, 3, 6]"), "{expected}");
            assert_eq!(actual, "[2, 3, 6]");
        }
        other => panic!("expected a state error, got {other:?}"),
    }
    let err = model
        .try_forward(input::<B>([3, 7, 5]), None, Some(&[7, 8, 1]))
        .unwrap_err();
    assert!(err.to_string().contains("lengths[1]"), "{err}");
    let err = config()
        .with_dropout(1.0)
        .try_init::<B>(&device)
        .unwrap_err();
    assert!(err.to_string().contains("dropout"), "{err}");
}

#[test]
fn checkpoint_from_autodiff_loads_on_ndarray_and_flex_with_identical_outputs() {
    let device = Default::default();
    let trained = config().init::<AD>(&device);
    let x = input::<B>([3, 7, 5]);
    let (y_trained, s_trained) = trained.valid().forward(x.clone(), None);
    let dir = scratch();
    let path = dir.path().join("roundtrip");
    let recorder = NamedMpkFileRecorder::<FullPrecisionSettings>::new();
    trained.save_file(&path, &recorder).unwrap();
    let loaded = config()
        .load_checkpoint::<B, _>(path.with_extension("mpk"), &recorder, &device)
        .unwrap();
    let (y_loaded, s_loaded) = loaded.forward(x.clone(), None);
    assert_eq!(to_f64(y_loaded), to_f64(y_trained.clone()));
    assert_eq!(to_f64(s_loaded.hidden), to_f64(s_trained.hidden));

    let on_flex: CudnnCompatibleGru<Flex> = config()
        .load_checkpoint::<Flex, _>(path.with_extension("mpk"), &recorder, &Default::default())
        .unwrap();
    let x_flex = Tensor::<Flex, 3>::from_data(x.into_data(), &Default::default());
    let y_flex = to_f64(on_flex.forward(x_flex, None).0);
    for (a, b) in y_flex.iter().zip(&to_f64(y_trained)) {
        assert!((a - b).abs() < 1e-6, "Flex {a} vs NdArray {b}");
    }

    // Another architecture is a named error, never a changed module.
    let err = CudnnCompatibleGruConfig::new(5, 7)
        .with_num_layers(2)
        .with_bidirectional(true)
        .load_checkpoint::<B, _>(path.with_extension("mpk"), &recorder, &device)
        .unwrap_err();
    assert!(
        matches!(&err, RnnError::ParameterShape { name, expected, .. } if name.ends_with("weight_ih") && *expected == vec![21, 5]),
        "{err}"
    );
    // A damaged file is a named error, never a panic.
    let damaged = dir.path().join("damaged.mpk");
    let bytes = std::fs::read(path.with_extension("mpk")).unwrap();
    std::fs::write(&damaged, &bytes[..bytes.len() / 2]).unwrap();
    let err = config()
        .load_checkpoint::<B, _>(&damaged, &recorder, &device)
        .unwrap_err();
    assert!(matches!(err, RnnError::Io { .. }), "{err}");
}

#[test]
fn pytorch_safetensors_export_then_import_is_identical() {
    let device = Default::default();
    let model = config().init::<B>(&device);
    let dir = scratch();
    let path = dir.path().join("gru.safetensors");
    model.save_pytorch_safetensors(&path).unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let file = safetensors::SafeTensors::deserialize(&bytes).unwrap();
    let mut names: Vec<String> = file.names().into_iter().map(|n| n.to_string()).collect();
    names.sort();
    assert_eq!(names.len(), 2 * 2 * 4, "{names:?}");
    assert_eq!(
        file.tensor("weight_hh_l1_reverse").unwrap().shape(),
        [18, 6]
    );

    let loaded = config()
        .load_pytorch_safetensors::<B>(&path, &device)
        .unwrap();
    let x = input::<B>([2, 4, 5]);
    assert_eq!(
        to_f64(loaded.forward(x.clone(), None).0),
        to_f64(model.forward(x, None).0)
    );

    // An `nn.LSTM` state dict under the same names is refused by its shapes.
    let lstm_path = dir.path().join("lstm.safetensors");
    CudnnCompatibleLstmConfig::new(5, 6)
        .with_num_layers(2)
        .with_bidirectional(true)
        .init::<B>(&device)
        .save_pytorch_safetensors(&lstm_path)
        .unwrap();
    let err = config()
        .load_pytorch_safetensors::<B>(&lstm_path, &device)
        .unwrap_err();
    assert_eq!(
        err,
        RnnError::ParameterShape {
            name: "weight_ih_l0".into(),
            expected: vec![18, 5],
            actual: vec![24, 5]
        }
    );
}

/// Inter-layer dropout acts while training only (in inference the same weights without
/// dropout give the same numbers), and a training step gives every parameter of every
/// direction a gradient.
#[test]
fn dropout_only_while_training_and_every_parameter_gets_a_gradient() {
    let device = Default::default();
    let model = config().with_dropout(0.5).init::<AD>(&device);
    let x = input::<AD>([2, 5, 5]);
    let (y_train, _) = model.forward(x.clone(), None);
    let (y_valid, _) = model.valid().forward(x.clone().inner(), None);
    let mut without_dropout = model.valid();
    without_dropout.dropout = 0.0;
    let (y_plain, _) = without_dropout.forward(x.inner(), None);
    assert_ne!(to_f64(y_train.clone()), to_f64(y_valid.clone()));
    assert_eq!(to_f64(y_valid), to_f64(y_plain));
    let grads = y_train.sum().backward();
    for (k, direction) in model.directions().enumerate() {
        let biases = [&direction.bias_ih, &direction.bias_hh].map(|b| b.as_ref().unwrap());
        let gradients = [
            ("weight_ih", direction.weight_ih.grad(&grads).map(to_f64)),
            ("weight_hh", direction.weight_hh.grad(&grads).map(to_f64)),
            ("bias_ih", biases[0].grad(&grads).map(to_f64)),
            ("bias_hh", biases[1].grad(&grads).map(to_f64)),
        ];
        for (name, g) in gradients {
            let g = g.unwrap_or_else(|| panic!("direction {k}: no gradient of {name}"));
            assert!(
                g.iter().any(|&v| v != 0.0),
                "direction {k}: {name}'s gradient is zero"
            );
        }
    }
}

#[test]
fn burn_nn_gru_and_bigru_convert_with_identical_outputs_and_gradients() {
    use burn::nn::{BiGruConfig, GruConfig};
    let device = Default::default();

    let burn_gru = GruConfig::new(5, 6, true).init::<AD>(&device);
    let ours = CudnnCompatibleGru::from_burn_gru(&burn_gru).unwrap();
    assert!(ours.batch_first && !ours.bidirectional && ours.bias);
    let x = Tensor::<AD, 3>::from_inner(input::<B>([3, 8, 5])).require_grad();
    let h0 = Tensor::<AD, 2>::random([3, 6], Distribution::Normal(0.0, 1.0), &device);
    let y_burn = burn_gru.forward(x.clone(), Some(h0.clone()));
    let (y_ours, s_ours) = ours.forward(x.clone(), Some(GruState::new(h0.unsqueeze_dim(0))));
    let err = |a: Tensor<AD, 3>, b: Tensor<AD, 3>| {
        common::rel_err(&to_f64(a.inner()), &to_f64(b.inner()))
    };
    assert!(err(y_ours.clone(), y_burn.clone()) < 1e-5);
    let last = y_burn.clone().slice([0..3, 7..8, 0..6]).swap_dims(0, 1);
    assert!(err(s_ours.hidden, last) < 1e-5);
    // The same gradient flows back into the input through both (weighted, so that every
    // output element counts differently).
    let weights = input::<AD>([3, 8, 6]);
    let g_burn = (y_burn * weights.clone()).sum().backward();
    let g_ours = (y_ours * weights).sum().backward();
    let dx_burn = x.grad(&g_burn).unwrap();
    let dx_ours = x.grad(&g_ours).unwrap();
    assert!(common::rel_err(&to_f64(dx_ours), &to_f64(dx_burn)) < 1e-5);

    // Sequence-major, with an initial state, and no bias.
    let bi = BiGruConfig::new(5, 6, false)
        .with_batch_first(false)
        .init::<B>(&device);
    let ours = CudnnCompatibleGru::from_burn_bigru(&bi).unwrap();
    assert!(!ours.batch_first && ours.bidirectional && !ours.bias);
    let x = input::<B>([7, 2, 5]);
    let h0 = input::<B>([2, 2, 6]);
    let (y_burn, s_burn) = bi.forward(x.clone(), Some(h0.clone()));
    let (y_ours, s_ours) = ours.forward(x, Some(GruState::new(h0)));
    assert!(common::rel_err(&to_f64(y_ours), &to_f64(y_burn)) < 1e-5);
    assert!(common::rel_err(&to_f64(s_ours.hidden), &to_f64(s_burn)) < 1e-5);
}

#[test]
fn burn_nn_gru_that_cudnn_cannot_run_is_refused_by_name() {
    use burn::nn::activation::ActivationConfig;
    use burn::nn::{BiGruConfig, GruConfig};
    let device = Default::default();
    let refused = |gru: &burn::nn::Gru<B>, argument: &str, fragment: &str| {
        common::expect_invalid(
            CudnnCompatibleGru::from_burn_gru(gru),
            argument,
            &[fragment],
        )
    };
    let base = GruConfig::new(4, 3, true);
    refused(
        &base.clone().with_reset_after(false).init(&device),
        "nn::Gru reset_after",
        "docs/gru.md",
    );
    refused(
        &base.clone().with_clip(Some(2.0)).init(&device),
        "nn::Gru clip",
        "Some(2",
    );
    refused(
        &base
            .clone()
            .with_hidden_activation(ActivationConfig::Relu)
            .init(&device),
        "nn::Gru activations",
        "Relu",
    );
    let bi = BiGruConfig::new(4, 3, true)
        .with_reset_after(false)
        .init::<B>(&device);
    let err = CudnnCompatibleGru::from_burn_bigru(&bi).unwrap_err();
    assert!(
        err.to_string().contains("nn::BiGru forward reset_after"),
        "{err}"
    );
}
