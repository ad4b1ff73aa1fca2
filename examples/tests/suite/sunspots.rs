//! The train → save → infer path of the examples on a tiny config (a few steps, trained
//! with burn-train's `Learner` on `Autodiff<Flex>`, served on Flex and NdArray), and the
//! errors a user can meet: missing or corrupt checkpoint, a checkpoint from another
//! config, a missing data file.

use crate::scratch;
use std::path::PathBuf;

use burn::backend::{Flex, NdArray};
use burn::config::Config;
use lstm_examples::sunspots::{
    self, CONFIG_FILE, ExampleError, ForecastConfig, MODEL_FILE, Progress, TrainOptions,
};

fn tiny() -> TrainOptions {
    TrainOptions {
        config: ForecastConfig::new()
            .with_window(12)
            .with_hidden(6)
            .with_layers(2)
            .with_test_months(60),
        epochs: 1,
        batch_size: 32,
        learning_rate: 1e-2,
        seed: 7,
        max_batches_per_epoch: Some(4),
        progress: Progress::Quiet,
        devices: 1,
    }
}

#[test]
fn trains_saves_and_infers_from_the_saved_files() {
    let _serial = crate::one_seeded_run_at_a_time();
    let series = sunspots::load_series(&sunspots::default_data_path()).unwrap();
    assert_eq!(series.values.len(), 3120);
    assert_eq!(series.dates[0], (1749, 1));
    let (_dir, dir) = scratch("roundtrip");
    let trained = sunspots::train_on_flex(&series, &tiny(), &dir).unwrap();
    assert!(dir.join(MODEL_FILE).is_file() && dir.join(CONFIG_FILE).is_file());
    // The Learner's checkpoint of the (only) epoch, for resuming.
    assert!(dir.join("checkpoint/model-1.mpk").is_file());

    let device = Default::default();
    let (model, config) = sunspots::load_forecaster::<Flex>(&dir, None, &device).unwrap();
    assert_eq!(
        (config.window, config.hidden, config.test_months),
        (12, 6, 60)
    );
    // The saved normalisation is the training months' statistics, not the defaults.
    assert!(config.mean > 10.0 && config.std > 10.0, "{config:?}");
    let served = sunspots::evaluate(&model, &config, &series, &device).unwrap();
    assert_eq!(served.forecasts.len(), 60);
    assert_eq!(served.start, 3120 - 60);
    // The loaded model is the trained one. The LSTM serves bit for bit across a save
    // and a load (tests/suite/backends.rs in burn-lstm); the linear head may differ in the last
    // bit: the Learner hands back parameters laid out as Adam left them, a loaded record
    // is contiguous, and Flex's matmul picks its kernel by the operands' layout.
    let close = |a: &[f32], b: &[f32]| {
        a.len() == b.len()
            && a.iter()
                .zip(b)
                .all(|(x, y)| (x - y).abs() <= 1e-5 * y.abs())
    };
    assert!(close(&served.forecasts, &trained.forecasts));
    // Flex and NdArray serve the same checkpoint alike: the same fused LSTM kernel, each
    // backend's own matmul for the head.
    let (on_ndarray, _) =
        sunspots::load_forecaster::<NdArray>(&dir, None, &Default::default()).unwrap();
    let served_ndarray =
        sunspots::evaluate(&on_ndarray, &config, &series, &Default::default()).unwrap();
    assert!(close(&served_ndarray.forecasts, &served.forecasts));
    assert!(served.rmse.is_finite() && served.rmse > 0.0);
    assert!(served.persistence_rmse > 0.0);
    // Served with an int8 LSTM: the held-back error within 1 % of the f32 model's.
    let int8 = model.quantized_int8().unwrap();
    let quantized = sunspots::evaluate(&int8, &config, &series, &device).unwrap();
    let change = (quantized.rmse - served.rmse).abs() / served.rmse;
    assert!(
        change < 0.01,
        "int8 RMSE {} against f32 {}",
        quantized.rmse,
        served.rmse
    );
    assert_ne!(quantized.forecasts, served.forecasts, "int8 ran");
    let ahead = sunspots::forecast_ahead(&model, &config, &series, 3, &device);
    assert_eq!(ahead.len(), 3);
    assert!(ahead.iter().all(|v| v.is_finite() && *v >= 0.0));

    let plot = dir.join("plot.svg");
    sunspots::write_svg(&plot, &series, &served).unwrap();
    let svg = std::fs::read_to_string(&plot).unwrap();
    // The two series (real and forecast) are the polylines with a point per held-back
    // month; the others are the grid and the legend.
    let series_lines = svg
        .split("points=\"")
        .skip(1)
        .filter(|rest| {
            let points = rest.split('"').next().unwrap_or("");
            points.split_whitespace().count() == 60
        })
        .count();
    assert_eq!(series_lines, 2, "{svg}");
    assert!(svg.contains(">\nreal\n<") && svg.contains(">\nLSTM forecast\n<"));
}

#[test]
fn user_errors_name_the_file_and_the_problem() {
    let _serial = crate::one_seeded_run_at_a_time();
    let device = Default::default();
    let load = |dir: &PathBuf| sunspots::load_forecaster::<NdArray>(dir, None, &device);

    let (_missing, missing) = scratch("missing");
    let err = load(&missing).unwrap_err();
    assert!(
        matches!(
            err,
            ExampleError::Missing {
                what: "checkpoint",
                ..
            }
        ),
        "{err}"
    );
    assert!(err.to_string().contains(MODEL_FILE), "{err}");

    let series = sunspots::load_series(&sunspots::default_data_path()).unwrap();
    let (_good, good) = scratch("good");
    sunspots::train_on_flex(&series, &tiny(), &good).unwrap();

    // A learning rate that would train to NaN or uphill, saved without a word.
    for lr in [f64::NAN, f64::INFINITY, -1e-2, 0.0] {
        let options = TrainOptions {
            learning_rate: lr,
            ..tiny()
        };
        let (_out, out) = scratch("bad-lr");
        let err = sunspots::train_on_flex(&series, &options, &out).unwrap_err();
        assert!(
            matches!(&err, ExampleError::Usage(m) if m.contains("--lr: expected a finite number > 0")),
            "{err}"
        );
    }

    // A corrupt checkpoint.
    let (_corrupt, corrupt) = scratch("corrupt");
    std::fs::write(corrupt.join(MODEL_FILE), b"not a checkpoint").unwrap();
    std::fs::copy(good.join(CONFIG_FILE), corrupt.join(CONFIG_FILE)).unwrap();
    let err = load(&corrupt).unwrap_err();
    assert!(
        matches!(
            err,
            ExampleError::Corrupt {
                what: "checkpoint",
                ..
            }
        ),
        "{err}"
    );

    // A checkpoint with another run's config next to it.
    let (_other, other) = scratch("other");
    std::fs::copy(good.join(MODEL_FILE), other.join(MODEL_FILE)).unwrap();
    tiny()
        .config
        .with_hidden(9)
        .save(other.join(CONFIG_FILE))
        .unwrap();
    let err = load(&other).unwrap_err();
    assert!(matches!(err, ExampleError::ConfigMismatch { .. }), "{err}");
    assert!(err.to_string().contains("the config needs"), "{err}");

    // No config.
    let (_no_config, no_config) = scratch("no-config");
    std::fs::copy(good.join(MODEL_FILE), no_config.join(MODEL_FILE)).unwrap();
    let err = load(&no_config).unwrap_err();
    assert!(
        matches!(err, ExampleError::Missing { what: "config", .. }),
        "{err}"
    );

    // A missing or malformed data file.
    let err = sunspots::load_series(&missing.join("nope.csv")).unwrap_err();
    assert!(err.to_string().starts_with("data file not found"), "{err}");
    let bad = missing.join("bad.csv");
    std::fs::write(&bad, "year,month,sunspots\n1749,1,abc\n").unwrap();
    let err = sunspots::load_series(&bad).unwrap_err();
    assert!(err.to_string().contains("line 2"), "{err}");
}

/// Damaged copies of a real checkpoint and config given to `infer`'s loader: every
/// truncation and every absurd or malformed config is a named error; a flipped bit is an
/// error or (inside a value: no format here has a checksum) a model; nothing panics.
#[test]
fn damaged_checkpoints_are_named_errors_never_panics() {
    let _serial = crate::one_seeded_run_at_a_time();
    let series = sunspots::load_series(&sunspots::default_data_path()).unwrap();
    let (_good, good) = scratch("fuzz-good");
    sunspots::train_on_flex(&series, &tiny(), &good).unwrap();
    let model = std::fs::read(good.join(MODEL_FILE)).unwrap();
    let config = std::fs::read_to_string(good.join(CONFIG_FILE)).unwrap();
    let (_dir, dir) = scratch("fuzz");
    let device = Default::default();
    let load = |model_bytes: &[u8], config_text: &str| {
        std::fs::write(dir.join(MODEL_FILE), model_bytes).unwrap();
        std::fs::write(dir.join(CONFIG_FILE), config_text).unwrap();
        sunspots::load_forecaster::<Flex>(&dir, None, &device)
    };
    assert!(load(&model, &config).is_ok(), "the intact copy loads");

    for cut in (0..model.len()).step_by(model.len() / 97 + 1) {
        let err = load(&model[..cut], &config).unwrap_err();
        assert!(
            matches!(
                err,
                ExampleError::Corrupt {
                    what: "checkpoint",
                    ..
                }
            ),
            "cut at {cut}: {err}"
        );
    }
    let mut loaded = 0;
    for (i, at) in (0..model.len()).step_by(model.len() / 300 + 1).enumerate() {
        let mut flipped = model.clone();
        flipped[at] ^= 1 << (i % 8);
        match load(&flipped, &config) {
            Ok(_) => loaded += 1,
            Err(e) => assert!(
                matches!(
                    e,
                    ExampleError::Corrupt { .. } | ExampleError::ConfigMismatch { .. }
                ),
                "flip at {at}: {e}"
            ),
        }
    }
    assert!(loaded > 0, "flips inside values load (no checksum)");
    for (field, value) in [
        ("hidden", "1000000000000"),
        ("hidden", "0"),
        ("layers", "100000"),
        ("window", "0"),
        ("std", "0.0"),
        ("dropout", "1.5"),
    ] {
        let damaged = replace_field(&config, field, value);
        let err = load(&model, &damaged).unwrap_err();
        assert!(
            matches!(err, ExampleError::Corrupt { what: "config", .. })
                && err.to_string().contains(field),
            "{field} = {value}: {err}"
        );
    }
    let err = load(&model, &replace_field(&config, "layers", "3")).unwrap_err();
    assert!(matches!(err, ExampleError::ConfigMismatch { .. }), "{err}");
    let err = load(&model, "{ not json").unwrap_err();
    assert!(
        matches!(err, ExampleError::Corrupt { what: "config", .. }),
        "{err}"
    );
}

/// `config` (JSON) with `field` set to `value`.
fn replace_field(config: &str, field: &str, value: &str) -> String {
    let mut json: serde_json::Value = serde_json::from_str(config).unwrap();
    json[field] = serde_json::from_str(value).unwrap();
    json.to_string()
}
