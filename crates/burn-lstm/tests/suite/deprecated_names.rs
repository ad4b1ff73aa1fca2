//! The names of the 0.1 API, kept for one release as deprecated aliases: code written
//! against them still builds and gets the results of the new names.

#![allow(deprecated)]

use burn::backend::Flex;
use burn::tensor::{Distribution, Tensor};
use burn_lstm::{
    CellKind, CudnnCompatibleLstmConfig, KernelChoice, LstmArch, LstmBackend, LstmKernel, LstmSpec,
    RnnKernel, RnnSpec, lstm, rnn,
};

/// A helper written against the old names: a bound on `LstmBackend`, an `LstmSpec`
/// built as a struct, the old method names and the `lstm` function.
fn old_api_call<B: LstmBackend>(
    x: Tensor<B, 3>,
    weights: Tensor<B, 1>,
    h0: Tensor<B, 3>,
    spec: &LstmSpec,
) -> (KernelChoice, Tensor<B, 3>) {
    let choice = B::lstm_kernel(&x.device(), spec);
    let (y, _, _) = lstm(x, weights, h0, None, spec);
    (choice, y)
}

#[test]
fn old_names_build_and_give_the_new_names_results() {
    let device = Default::default();
    let config = CudnnCompatibleLstmConfig::new(3, 5).with_num_layers(2);
    let model = config.init::<Flex>(&device);
    let arch: LstmArch = model.arch();
    assert_eq!(arch.cell, CellKind::Lstm);
    let spec: RnnSpec = LstmSpec {
        arch: arch.clone(),
        seq_len: 4,
        batch: 2,
        lengths: None,
        dropout: 0.0,
        training: false,
        dropout_seed: None,
        kernel: Some(LstmKernel::FusedCpu),
    };
    let x = Tensor::<Flex, 3>::random([4, 2, 3], Distribution::Normal(0.0, 1.0), &device);
    let h0 = Tensor::<Flex, 3>::zeros([arch.cells(), 2, 5], &device);
    let (choice, y_old) = old_api_call(x.clone(), model.flat_weights(), h0.clone(), &spec);
    assert_eq!(choice.kernel, RnnKernel::FusedCpu, "{choice}");
    let (y_new, _, _) = rnn(x, model.flat_weights(), h0, None, &spec);
    let (old, new) = (y_old.into_data(), y_new.into_data());
    assert_eq!(old.shape.to_vec(), vec![4, 2, 5]);
    assert_eq!(old, new, "the old names run the same op");
}
