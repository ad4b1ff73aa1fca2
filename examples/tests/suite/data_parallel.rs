//! Data-parallel training (feature `distributed`): one step over 2 peers (burn-collective's
//! all-reduce, each peer a copy of the CPU device) gives the parameter gradients of one
//! device on the same global batch, in f64, through `CudnnCompatibleLstm` (whose op
//! registers its gradients on the parameters' nodes): the LSTM's gradients reach Burn's
//! gradient synchronisation. Then `train --devices 2` end to end against `--devices 1`.
#![cfg(feature = "distributed")]

use burn::backend::{Autodiff, NdArray};
use burn::module::Param;
use burn::optim::GradientsParams;
use burn::tensor::{Tensor, TensorData, backend::Backend};
use burn::train::TrainStep;
use lstm_examples::sunspots::{
    self, DataParallel, ForecastConfig, Forecaster, Progress, TrainOptions, WindowBatch,
    data_parallel_step,
};

type B = Autodiff<NdArray<f64>>;

fn batch(rows: usize, window: usize) -> WindowBatch<B> {
    let device = Default::default();
    let value = |i: usize| ((i * 7919) % 1000) as f64 / 500.0 - 1.0;
    let windows: Vec<f64> = (0..rows * window).map(value).collect();
    let targets: Vec<f64> = (0..rows).map(|i| value(i + 13)).collect();
    WindowBatch::new(
        Tensor::from_data(TensorData::new(windows, [rows, window]), &device),
        Tensor::from_data(TensorData::new(targets, [rows]), &device),
    )
}

/// Every parameter's gradient, in a fixed order (LSTM parameters, then the head's).
fn all_grads(model: &Forecaster<B>, grads: &GradientsParams) -> Vec<(String, Vec<f64>)> {
    type Inner = <B as burn::tensor::backend::AutodiffBackend>::InnerBackend;
    fn values<const D: usize>(p: &Param<Tensor<B, D>>, g: &GradientsParams) -> Vec<f64> {
        g.get::<Inner, D>(p.id)
            .expect("every parameter has a gradient")
            .into_data()
            .to_vec::<f64>()
            .unwrap()
    }
    let mut out = Vec::new();
    for (l, layer) in model.lstm.layers.iter().enumerate() {
        let w = &layer.forward;
        out.push((format!("weight_ih_l{l}"), values(&w.weight_ih, grads)));
        out.push((format!("weight_hh_l{l}"), values(&w.weight_hh, grads)));
        out.push((
            format!("bias_ih_l{l}"),
            values(w.bias_ih.as_ref().unwrap(), grads),
        ));
        out.push((
            format!("bias_hh_l{l}"),
            values(w.bias_hh.as_ref().unwrap(), grads),
        ));
    }
    out.push(("head.weight".into(), values(&model.head.weight, grads)));
    out.push((
        "head.bias".into(),
        values(model.head.bias.as_ref().unwrap(), grads),
    ));
    out
}

/// Every gradient of `got` equals `reference`'s up to summation order (1e-12 of its
/// largest value, in f64), none of them zero.
fn assert_same_grads(reference: &[(String, Vec<f64>)], got: &[(String, Vec<f64>)]) {
    assert_eq!(reference.len(), got.len());
    for ((name, a), (_, b)) in reference.iter().zip(got) {
        let scale = a.iter().fold(0.0f64, |m, v| m.max(v.abs()));
        let diff = a
            .iter()
            .zip(b)
            .fold(0.0f64, |m, (x, y)| m.max((x - y).abs()));
        println!("{name}: largest gradient {scale:.3e}, difference {diff:.1e}");
        assert!(scale > 0.0, "{name}: a zero gradient proves nothing");
        assert!(
            diff <= 1e-12 * scale,
            "{name}: differs by {diff:e} of {scale:e}"
        );
    }
}

/// `peers` peers on a batch of `rows` rows give the gradients one device gives the
/// whole batch; returns the number of outputs the step reports.
fn peers_give_the_gradients_of_one_device(rows: usize, peers: usize, layers: usize) -> usize {
    let _serial = crate::one_seeded_run_at_a_time();
    B::seed(&Default::default(), 3);
    let config = ForecastConfig::new()
        .with_window(7)
        .with_hidden(5)
        .with_layers(layers)
        .with_dropout(0.0);
    let model = config.init::<B>(&Default::default());
    let one = TrainStep::step(&model, batch(rows, 7)).grads;
    let reference = all_grads(&model, &one);

    let devices = vec![Default::default(); peers];
    let _peers = DataParallel::<B>::new(devices.clone()).registered();
    let (parallel, outputs) = data_parallel_step(&model, batch(rows, 7), &devices);
    assert_same_grads(&reference, &all_grads(&model, &parallel));
    outputs.len()
}

#[test]
fn two_peers_give_the_gradients_of_one_device() {
    // 11 rows: shards of 6 and 5, so the per-shard weights matter.
    assert_eq!(peers_give_the_gradients_of_one_device(11, 2, 2), 2);
}

/// More peers than the batch has rows (an epoch's last batch): every peer still joins
/// the all-reduce (it waits for all registered peers), the extra ones with a shard of
/// weight 0, and the gradients are still the whole batch's.
#[test]
fn more_peers_than_rows_give_the_gradients_of_one_device() {
    let outputs = peers_give_the_gradients_of_one_device(3, 5, 1);
    assert_eq!(outputs, 3, "one output per shard that holds rows");
}

/// `train --devices 2` trains the model `--devices 1` trains (same seed, same global
/// batches): in f64 the forecasts agree up to summation order. (In f32, Adam's first steps
/// turn a rounding-sized difference of a near-zero gradient into a whole step of the
/// learning rate, so f32 runs differ visibly after a few steps.)
#[test]
fn train_with_two_devices_trains_the_one_device_model() {
    let _serial = crate::one_seeded_run_at_a_time();
    let series = sunspots::load_series(&sunspots::default_data_path()).unwrap();
    let run = |devices: usize| {
        let dir = tempfile::Builder::new()
            .prefix(&format!("lstm-examples-ddp-{devices}-"))
            .tempdir()
            .unwrap();
        let options = TrainOptions {
            config: ForecastConfig::new()
                .with_window(12)
                .with_hidden(6)
                .with_layers(2)
                // Dropout masks are drawn per peer, so they differ from one device's.
                .with_dropout(0.0)
                .with_test_months(60),
            epochs: 1,
            batch_size: 32,
            learning_rate: 1e-2,
            seed: 7,
            max_batches_per_epoch: Some(3),
            progress: Progress::Quiet,
            devices,
        };
        let evaluation =
            sunspots::train::<B>(&series, &options, dir.path(), &Default::default()).unwrap();
        assert!(dir.path().join(sunspots::MODEL_FILE).is_file());
        evaluation
    };
    let (one, two) = (run(1), run(2));
    assert_eq!(one.forecasts.len(), two.forecasts.len());
    let worst = one
        .forecasts
        .iter()
        .zip(&two.forecasts)
        .map(|(a, b)| (a - b).abs() / a.abs().max(1.0))
        .fold(0.0f32, f32::max);
    println!("forecasts, 1 vs 2 devices: worst relative difference {worst:.1e}");
    assert!(worst < 1e-9, "2 devices trained another model: {worst:e}");
    assert!(one.rmse.is_finite() && (one.rmse - two.rmse).abs() < 1e-9 * one.rmse);
}
