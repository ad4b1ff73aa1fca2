//! Batches of windows for burn-train's `Learner`: a `DataLoader` over a set of target
//! months, reshuffled at every epoch by the same seeded xorshift Fisher–Yates as the
//! hand-written loop it replaced (so `--seed` gives the same batches), or in order.

use std::sync::{Arc, Mutex};

use burn::data::dataloader::{DataLoader, DataLoaderIterator, Progress};
use burn::tensor::{Tensor, backend::Backend};

use super::model::{ForecastConfig, windows};

/// Standardised windows `[N, window]` and the standardised next month of each `[N]`.
#[derive(Clone, Debug)]
pub struct WindowBatch<B: Backend> {
    /// The months each forecast reads.
    pub windows: Tensor<B, 2>,
    /// The month each forecasts.
    pub targets: Tensor<B, 1>,
    /// Factor of the batch's mean squared error in its loss: 1, or for a shard of a
    /// data-parallel batch, its share of the batch times the number of shards (so that
    /// the mean of the shards' gradients is the whole batch's gradient).
    pub loss_scale: f64,
}

impl<B: Backend> WindowBatch<B> {
    /// A batch whose loss is its mean squared error.
    pub fn new(windows: Tensor<B, 2>, targets: Tensor<B, 1>) -> Self {
        Self {
            windows,
            targets,
            loss_scale: 1.0,
        }
    }

    /// The batch (of at least one row) cut into exactly `n` shards (`n` at least 1), for
    /// `n` peers that must all take part in each all-reduce: the first
    /// `min(n, rows)` hold consecutive rows, sizes differing by at most one, each
    /// weighted by its share (see [`Self::loss_scale`]); where the batch has fewer rows
    /// than peers (an epoch's last batch), the others hold a copy of the first row
    /// weighted 0, which adds nothing to the mean of the gradients.
    pub fn shards(self, n: usize) -> Vec<Self> {
        let rows = self.targets.dims()[0];
        let n = n.max(1);
        let real = n.min(rows);
        let (base, extra) = (rows / real, rows % real);
        let mut start = 0;
        (0..n)
            .map(|i| {
                let (from, len, weight) = if i < real {
                    let len = base + usize::from(i < extra);
                    start += len;
                    (start - len, len, (len * n) as f64 / rows as f64)
                } else {
                    (0, 1, 0.0)
                };
                Self {
                    windows: self.windows.clone().narrow(0, from, len),
                    targets: self.targets.clone().narrow(0, from, len),
                    loss_scale: self.loss_scale * weight,
                }
            })
            .collect()
    }

    /// The batch on `device`.
    pub fn to_device(self, device: &B::Device) -> Self {
        Self {
            windows: self.windows.to_device(device),
            targets: self.targets.to_device(device),
            loss_scale: self.loss_scale,
        }
    }
}

/// The epoch-to-epoch state of a shuffled loader.
#[derive(Debug)]
struct Shuffle {
    rng: u64,
    order: Vec<usize>,
}

/// A loader over `targets` (indices into the series), `batch_size` at a time.
pub struct WindowLoader<B: Backend> {
    values: Arc<Vec<f32>>,
    targets: Vec<usize>,
    config: ForecastConfig,
    batch_size: usize,
    /// `Some` for training: the order of the previous epoch, reshuffled at each `iter`.
    shuffle: Option<Arc<Mutex<Shuffle>>>,
    /// At most this many batches per epoch (tests).
    max_batches: Option<usize>,
    device: B::Device,
}

impl<B: Backend> WindowLoader<B> {
    /// The months `targets` of `values`, reshuffled each epoch from `seed` when given.
    pub fn new(
        values: Arc<Vec<f32>>,
        targets: Vec<usize>,
        config: ForecastConfig,
        batch_size: usize,
        seed: Option<u64>,
        device: B::Device,
    ) -> Self {
        let shuffle = seed.map(|seed| {
            Arc::new(Mutex::new(Shuffle {
                rng: seed | 1,
                order: targets.clone(),
            }))
        });
        Self {
            values,
            targets,
            config,
            batch_size: batch_size.max(1),
            shuffle,
            max_batches: None,
            device,
        }
    }

    /// Stops every epoch after `max` batches.
    pub fn with_max_batches(mut self, max: Option<usize>) -> Self {
        self.max_batches = max;
        self
    }

    /// This epoch's order of the targets.
    fn epoch_order(&self) -> Vec<usize> {
        let Some(shuffle) = &self.shuffle else {
            return self.targets.clone();
        };
        let mut state = shuffle.lock().unwrap_or_else(|e| e.into_inner());
        let Shuffle { rng, order } = &mut *state;
        for i in (1..order.len()).rev() {
            *rng ^= *rng << 13;
            *rng ^= *rng >> 7;
            *rng ^= *rng << 17;
            order.swap(i, (*rng % (i as u64 + 1)) as usize);
        }
        order.clone()
    }

    fn with_targets(&self, targets: Vec<usize>, device: B::Device) -> Self {
        let seed = self
            .shuffle
            .as_ref()
            .map(|s| s.lock().unwrap_or_else(|e| e.into_inner()).rng);
        Self {
            max_batches: self.max_batches,
            ..Self::new(
                self.values.clone(),
                targets,
                self.config.clone(),
                self.batch_size,
                seed,
                device,
            )
        }
    }
}

struct WindowIterator<'a, B: Backend> {
    loader: &'a WindowLoader<B>,
    order: Vec<usize>,
    next: usize,
    batches: usize,
}

impl<B: Backend> Iterator for WindowIterator<'_, B> {
    type Item = WindowBatch<B>;

    fn next(&mut self) -> Option<WindowBatch<B>> {
        let loader = self.loader;
        if self.next >= self.order.len() || loader.max_batches.is_some_and(|m| self.batches >= m) {
            return None;
        }
        let end = (self.next + loader.batch_size).min(self.order.len());
        let batch = &self.order[self.next..end];
        self.next = end;
        self.batches += 1;
        let (windows, targets) =
            windows::<B>(&loader.values, batch, &loader.config, &loader.device);
        Some(WindowBatch::new(windows, targets))
    }
}

impl<B: Backend> DataLoaderIterator<WindowBatch<B>> for WindowIterator<'_, B> {
    fn progress(&self) -> Progress {
        Progress::new(self.next, self.order.len())
    }
}

impl<B: Backend> DataLoader<B, WindowBatch<B>> for WindowLoader<B> {
    fn iter<'a>(&'a self) -> Box<dyn DataLoaderIterator<WindowBatch<B>> + 'a> {
        Box::new(WindowIterator {
            loader: self,
            order: self.epoch_order(),
            next: 0,
            batches: 0,
        })
    }

    fn num_items(&self) -> usize {
        self.targets.len()
    }

    fn to_device(&self, device: &B::Device) -> Arc<dyn DataLoader<B, WindowBatch<B>>> {
        Arc::new(self.with_targets(self.targets.clone(), device.clone()))
    }

    fn slice(&self, start: usize, end: usize) -> Arc<dyn DataLoader<B, WindowBatch<B>>> {
        let targets = self.targets[start.min(end)..end.min(self.targets.len())].to_vec();
        Arc::new(self.with_targets(targets, self.device.clone()))
    }
}
