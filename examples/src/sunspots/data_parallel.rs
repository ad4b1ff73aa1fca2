//! `train --devices N` (feature `distributed`): data-parallel training through
//! burn-train's `Learner` with burn-collective's all-reduce.
//!
//! What Burn 0.21 offers: its DDP strategy (`ExecutionStrategy::ddp`, feature
//! `distributed`) all-reduces inside autodiff through `DistributedBackend`, which only
//! CubeCL's CUDA runtime implements (NCCL); with that feature on, `Autodiff<Flex>` and
//! `Autodiff<NdArray>` stop being training backends at all. burn-collective's
//! all-reduce works on every backend, in process. So this is a custom learning strategy:
//! every global batch is cut into `N` shards, one peer thread per device runs the
//! forecaster's `TrainStep` on its shard (the LSTM's gradients come from its op's
//! backward, registered on the parameters' nodes like any Burn op's), the peers
//! all-reduce their `GradientsParams` (mean), and the learner takes one optimizer step.
//! Validation and checkpoints run as in burn-train's single-device strategy.
//!
//! On the CPU backends every "device" is the one CPU (Flex and NdArray have a single
//! device): the peers are threads that share its cores. The strategy is written for
//! several devices of one backend (CUDA GPUs, say); that is untested here for want of a
//! machine with several GPUs (docs/examples.md).

use std::sync::Arc;

use burn::collective::{
    CollectiveConfig, PeerId, ReduceOperation, finish_collective, register, reset_collective,
};
use burn::data::dataloader::Progress;
use burn::module::{AutodiffModule, Module};
use burn::optim::lr_scheduler::LrScheduler;
use burn::optim::{GradientsParams, Optimizer};
use burn::tensor::backend::AutodiffBackend;
use burn::train::{
    EventProcessorTraining, InferenceStep, Learner, LearnerEvent, LearningComponentsMarker,
    RegressionOutput, SupervisedLearningStrategy, SupervisedTrainingEventProcessor, TrainLoader,
    TrainStep, TrainingComponents, TrainingItem, ValidLoader,
};
use burn_lstm::RnnBackend;

use super::loader::WindowBatch;
use super::model::Forecaster;

/// The learning components of the forecaster with optimizer `O` and scheduler `LR`.
type Components<B, LR, O> = LearningComponentsMarker<B, LR, Forecaster<B>, O>;

/// Data-parallel training over `devices` (one peer per device).
pub struct DataParallel<B: AutodiffBackend> {
    devices: Vec<B::Device>,
}

impl<B: AutodiffBackend + RnnBackend> DataParallel<B>
where
    B::InnerBackend: RnnBackend,
{
    /// One peer per device (at least one).
    pub fn new(devices: Vec<B::Device>) -> Self {
        assert!(!devices.is_empty(), "data-parallel training needs a device");
        Self { devices }
    }

    /// The peers registered with burn-collective until the guard is dropped (every peer
    /// must register before any can all-reduce; registration blocks until all have).
    pub fn registered(self) -> Registered<B> {
        reset_collective::<B::InnerBackend>();
        let config = CollectiveConfig::default().with_num_devices(self.devices.len());
        std::thread::scope(|scope| {
            for (peer, device) in self.devices.iter().enumerate() {
                let config = config.clone();
                scope.spawn(move || {
                    register::<B::InnerBackend>(PeerId(peer as u32), device.clone(), config)
                        .expect("a peer registers with burn-collective")
                });
            }
        });
        Registered { peers: self }
    }
}

/// Peers registered with burn-collective; dropping it takes them out again.
pub struct Registered<B: AutodiffBackend> {
    peers: DataParallel<B>,
}

impl<B: AutodiffBackend> Drop for Registered<B> {
    fn drop(&mut self) {
        std::thread::scope(|scope| {
            for peer in 0..self.peers.devices.len() {
                scope.spawn(move || {
                    // Leaving can only fail if the collective is already gone.
                    let _ = finish_collective::<B::InnerBackend>(PeerId(peer as u32));
                });
            }
        });
    }
}

/// The gradients of `model` for the global `batch`, computed by one peer per device on
/// its shard and all-reduced (mean), with each shard's output. Equal to the gradients of
/// the whole batch on one device up to summation order: each shard's loss is weighted by
/// its share of the batch (`WindowBatch::shards`). The peers must be registered.
pub fn data_parallel_step<B: AutodiffBackend + RnnBackend>(
    model: &Forecaster<B>,
    batch: WindowBatch<B>,
    devices: &[B::Device],
) -> (GradientsParams, Vec<RegressionOutput<B>>) {
    // Peers past the batch's rows (an epoch's last batch) run a shard of weight 0: every
    // registered peer must join the all-reduce, which waits for all of them.
    let rows = batch.targets.dims()[0];
    let shards = batch.shards(devices.len());
    let results: Vec<(GradientsParams, RegressionOutput<B>)> = std::thread::scope(|scope| {
        let peers: Vec<_> = shards
            .into_iter()
            .zip(devices)
            .enumerate()
            .map(|(peer, (shard, device))| {
                let model = model.clone().fork(device);
                let shard = shard.to_device(device);
                scope.spawn(move || {
                    let output = TrainStep::step(&model, shard);
                    let grads = output
                        .grads
                        .all_reduce::<B::InnerBackend>(PeerId(peer as u32), ReduceOperation::Mean)
                        .expect("the peers all-reduce their gradients");
                    (grads, output.item)
                })
            })
            .collect();
        peers
            .into_iter()
            .map(|p| p.join().expect("a peer's step"))
            .collect()
    });
    let mut results = results.into_iter();
    let (grads, first) = results.next().expect("at least one peer");
    // Every peer holds the same mean; the first one's serves the optimizer.
    // The outputs of the shards that hold rows of the batch.
    let outputs = core::iter::once(first)
        .chain(results.map(|(_, output)| output))
        .take(rows.max(1))
        .collect();
    (grads, outputs)
}

impl<B, LR, O> SupervisedLearningStrategy<Components<B, LR, O>> for DataParallel<B>
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
    LR: LrScheduler + 'static,
    O: Optimizer<Forecaster<B>, B> + 'static,
{
    fn fit(
        &self,
        components: TrainingComponents<Components<B, LR, O>>,
        mut learner: Learner<Components<B, LR, O>>,
        train: TrainLoader<Components<B, LR, O>>,
        valid: ValidLoader<Components<B, LR, O>>,
        starting_epoch: usize,
    ) -> (
        Forecaster<B>,
        SupervisedTrainingEventProcessor<Components<B, LR, O>>,
    ) {
        let mut events = components.event_processor;
        let mut checkpointer = components.checkpointer;
        let mut early_stopping = components.early_stopping;
        let interrupter = components.interrupter;
        learner.fork(&self.devices[0]);
        let _registered = DataParallel::<B>::new(self.devices.clone()).registered();
        for epoch in starting_epoch..=components.num_epochs {
            let global = Progress::new(epoch, components.num_epochs);
            let mut iterator = train.iter();
            let mut iteration = 0;
            while let Some(batch) = iterator.next() {
                iteration += 1;
                learner.lr_step();
                let progress = iterator.progress();
                let (grads, outputs) = data_parallel_step(&learner.model(), batch, &self.devices);
                learner.optimizer_step(grads);
                for output in outputs {
                    events.process_train(LearnerEvent::ProcessedItem(TrainingItem::new(
                        output,
                        progress.clone(),
                        global.clone(),
                        Some(iteration),
                        Some(learner.lr_current()),
                    )));
                }
                if interrupter.should_stop() {
                    break;
                }
            }
            events.process_train(LearnerEvent::EndEpoch(epoch));
            if interrupter.should_stop() {
                break;
            }

            let model = learner.model().valid();
            let mut iterator = valid.iter();
            let mut iteration = 0;
            while let Some(batch) = iterator.next() {
                iteration += 1;
                let progress = iterator.progress();
                let output = InferenceStep::step(&model, batch);
                events.process_valid(LearnerEvent::ProcessedItem(TrainingItem::new(
                    output,
                    progress,
                    global.clone(),
                    Some(iteration),
                    None,
                )));
            }
            events.process_valid(LearnerEvent::EndEpoch(epoch));

            if let Some(checkpointer) = &mut checkpointer {
                checkpointer.checkpoint(&learner, epoch, &components.event_store);
            }
            if let Some(early_stopping) = &mut early_stopping
                && early_stopping.should_stop(epoch, &components.event_store)
            {
                break;
            }
        }
        (learner.model(), events)
    }
}

/// Keeps the strategy shareable as burn-train's `CustomLearningStrategy`.
pub fn custom_strategy<B, LR, O>(
    devices: Vec<B::Device>,
) -> Arc<dyn SupervisedLearningStrategy<Components<B, LR, O>>>
where
    B: AutodiffBackend + RnnBackend,
    B::InnerBackend: RnnBackend,
    LR: LrScheduler + 'static,
    O: Optimizer<Forecaster<B>, B> + 'static,
{
    Arc::new(DataParallel::<B>::new(devices))
}
