//! A monthly sunspot-number forecaster built around `CudnnCompatibleLstm`: the data
//! (`data.rs`), the model (`model.rs`), training through burn-train's `Learner`
//! (`learner.rs` with `loader.rs`, `metric.rs`, `renderer.rs`; `data_parallel.rs` for
//! `--devices N`), checkpoints
//! (`checkpoint.rs`), serving (`evaluate.rs`) and the forecast picture (`plot.rs`).

mod checkpoint;
mod data;
#[cfg(feature = "distributed")]
mod data_parallel;
mod error;
mod evaluate;
mod learner;
mod loader;
mod metric;
mod model;
mod plot;
mod renderer;

pub use checkpoint::{CONFIG_FILE, MODEL_FILE, load_forecaster, save_forecaster};
pub use data::{Series, default_data_path, load_series};
#[cfg(feature = "distributed")]
pub use data_parallel::{DataParallel, data_parallel_step};
pub use error::ExampleError;
pub use evaluate::{Evaluation, evaluate, forecast_ahead};
pub use learner::{Progress, TrainOptions, train, train_on_flex};
pub use loader::{WindowBatch, WindowLoader};
pub use metric::HeldBackRmse;
pub use model::{ForecastConfig, Forecaster, ForecasterRecord, Int8Forecaster, Predict};
pub use plot::write_svg;
pub use renderer::EpochLog;
