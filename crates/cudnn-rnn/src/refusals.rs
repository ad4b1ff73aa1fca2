//! What cuDNN refused, remembered: a call tries its algorithm and layout, then the
//! fallbacks of [`refusal_fallbacks`], until cuDNN accepts one ([`first_accepted`]). An
//! attempt cuDNN refused ([`CudnnRnnError::is_refusal`]: the same descriptors are refused
//! again) is remembered for its configuration and call ([`Refusals`]), so that later
//! calls of that configuration and shape go straight to the attempt that runs, instead of
//! paying the refused attempt's host work (buffer addresses, ordering, descriptors) on
//! every call. Failures that may pass (out of memory, a driver error) are not remembered.
//!
//! The policy is pure: tested without a device.

use std::sync::Mutex;

use crate::algo::refusal_fallbacks;
use crate::config::RnnConfig;
use crate::error::CudnnRnnError;
use crate::reuse::{CallCache, CallKey};
use crate::rnn_algo::RnnAlgo;
use crate::shape::{SeqLayout, SeqShape};

/// Refusals a [`Refusals`] keeps at most; past this many the least recently looked up is
/// forgotten (it costs one refused attempt again).
pub const REFUSALS_KEPT: usize = 64;

/// A failed attempt of a call: what went wrong, and whether cuDNN refused the call's
/// descriptors (so that the same attempt would be refused again).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AttemptError {
    /// The error, in words.
    pub message: String,
    /// Whether cuDNN refused the attempt's configuration, algorithm or layout for this
    /// call (remembered by [`first_accepted`]).
    pub refused: bool,
}

impl From<CudnnRnnError> for AttemptError {
    fn from(error: CudnnRnnError) -> Self {
        Self {
            refused: error.is_refusal(),
            message: error.to_string(),
        }
    }
}

impl From<String> for AttemptError {
    /// A failure that is not a refusal (it may pass on a later call).
    fn from(message: String) -> Self {
        Self {
            message,
            refused: false,
        }
    }
}

impl From<AttemptError> for String {
    fn from(error: AttemptError) -> Self {
        error.message
    }
}

/// The attempts cuDNN refused on one handle, by configuration (its algorithm included)
/// and call (shape, layout, training or inference); at most [`REFUSALS_KEPT`], the least
/// recently looked up forgotten first.
#[derive(Debug)]
pub struct Refusals {
    refused: CallCache<(RnnConfig, CallKey), String>,
}

impl Default for Refusals {
    fn default() -> Self {
        Self::new(REFUSALS_KEPT)
    }
}

impl Refusals {
    /// An empty memory that keeps at most `capacity` refusals (at least 1).
    pub fn new(capacity: usize) -> Self {
        Self {
            refused: CallCache::new(capacity),
        }
    }

    /// Why cuDNN refused `config` (with its algorithm) on a call of `shape` (with its
    /// layout), training or not, if it did and that is still remembered.
    pub fn refusal(
        &mut self,
        config: &RnnConfig,
        shape: &SeqShape,
        training: bool,
    ) -> Option<&str> {
        self.refused
            .find(|(c, key)| c == config && key.matches(shape, training))
            .map(String::as_str)
    }

    /// Remembers that cuDNN refused `config` on a call of `shape`, training or not, and
    /// why.
    pub fn remember(&mut self, config: &RnnConfig, shape: &SeqShape, training: bool, why: &str) {
        let key = (config.clone(), CallKey::new(shape, training));
        self.refused.insert(key, why.to_owned());
    }

    /// The attempt a call of `config` (its algorithm the pick) on `shape` (its layout the
    /// input's), training or not, starts at: the first of [`first_accepted`]'s order not
    /// remembered as refused, with the refusal remembered just before it (`None` when
    /// every attempt is).
    pub fn first_unrefused(
        &mut self,
        config: &RnnConfig,
        shape: &SeqShape,
        training: bool,
    ) -> Option<Attempt> {
        let mut after = None;
        for (algo, layout, config, shape) in attempts(config, shape) {
            match self.refusal(&config, &shape, training) {
                Some(why) => after = Some((algo, layout, why.to_owned())),
                None => {
                    return Some(Attempt {
                        algo,
                        layout,
                        after,
                    });
                }
            }
        }
        None
    }

    /// Refusals remembered.
    pub fn len(&self) -> usize {
        self.refused.len()
    }

    /// Whether none is remembered.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One attempt of a call: the algorithm and layout to run, and for a fallback, the
/// attempt before it and why cuDNN refused it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// The algorithm.
    pub algo: RnnAlgo,
    /// The layout of the sequence tensors.
    pub layout: SeqLayout,
    /// The attempt refused before this one, its layout and cuDNN's reason; `None` for
    /// the call's first choice.
    pub after: Option<(RnnAlgo, SeqLayout, String)>,
}

/// The attempts of a call of `config` (its algorithm the pick) on `shape` (its layout the
/// input's), in [`refusal_fallbacks`]' order: each one's algorithm and layout, and the
/// configuration and shape it runs with.
fn attempts<'a>(
    config: &'a RnnConfig,
    shape: &'a SeqShape,
) -> impl Iterator<Item = (RnnAlgo, SeqLayout, RnnConfig, SeqShape)> + 'a {
    refusal_fallbacks(config.algo, shape.layout())
        .into_iter()
        .map(|(algo, layout)| {
            let config = RnnConfig {
                algo,
                ..config.clone()
            };
            (algo, layout, config, shape.clone().with_layout(layout))
        })
}

/// Runs `run` on the attempts of [`refusal_fallbacks`] for `config`'s algorithm and
/// `shape`'s layout, in order, until one succeeds: an attempt `refusals` remembers as
/// refused for this configuration and call is skipped (its remembered reason passed on),
/// one that cuDNN refuses now is remembered, one that fails otherwise is not. Returns
/// the first success, else the error of the last attempt that ran, else (every attempt
/// remembered as refused) the last remembered refusal.
pub fn first_accepted<T>(
    config: &RnnConfig,
    shape: &SeqShape,
    training: bool,
    refusals: &Mutex<Refusals>,
    mut run: impl FnMut(Attempt) -> Result<T, AttemptError>,
) -> Result<T, AttemptError> {
    let locked = || refusals.lock().unwrap_or_else(|e| e.into_inner());
    let mut after: Option<(RnnAlgo, SeqLayout, String)> = None;
    let (mut last_ran, mut last_remembered) = (None, None);
    for (algo, layout, config, shape) in attempts(config, shape) {
        let remembered = locked()
            .refusal(&config, &shape, training)
            .map(str::to_owned);
        if let Some(why) = remembered {
            last_remembered = Some(AttemptError {
                message: why.clone(),
                refused: true,
            });
            after = Some((algo, layout, why));
            continue;
        }
        match run(Attempt {
            algo,
            layout,
            after: after.take(),
        }) {
            Ok(value) => return Ok(value),
            Err(error) => {
                if error.refused {
                    locked().remember(&config, &shape, training, &error.message);
                }
                after = Some((algo, layout, error.message.clone()));
                last_ran = Some(error);
            }
        }
    }
    Err(last_ran
        .or(last_remembered)
        .unwrap_or_else(|| String::from("no attempt").into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::{DataType, MathMode, RnnCell};
    use RnnAlgo::{PersistStatic, PersistStaticSmallH, Standard};
    use SeqLayout::{BatchMajor, SeqMajor};

    fn config(algo: RnnAlgo) -> RnnConfig {
        RnnConfig {
            cell: RnnCell::Lstm,
            input_size: 128,
            hidden_size: 128,
            proj_size: 0,
            num_layers: 1,
            bidirectional: false,
            bias: true,
            data_type: DataType::F16,
            math: MathMode::Fma,
            algo,
        }
    }

    fn shape(batch: usize, layout: SeqLayout) -> SeqShape {
        SeqShape::full(50, batch).unwrap().with_layout(layout)
    }

    fn refused(why: &str) -> AttemptError {
        AttemptError {
            message: why.into(),
            refused: true,
        }
    }

    /// A fake cuDNN that refuses some (algorithm, layout) pairs, fails others once (out
    /// of memory), and records every attempt it was given.
    struct Fake {
        refuses: Vec<(RnnAlgo, SeqLayout)>,
        fails_once: Vec<(RnnAlgo, SeqLayout)>,
        attempts: Vec<Attempt>,
    }

    impl Fake {
        fn new(refuses: &[(RnnAlgo, SeqLayout)]) -> Self {
            Self {
                refuses: refuses.to_vec(),
                fails_once: Vec::new(),
                attempts: Vec::new(),
            }
        }

        fn run(&mut self, attempt: Attempt) -> Result<(RnnAlgo, SeqLayout), AttemptError> {
            let tried = (attempt.algo, attempt.layout);
            self.attempts.push(attempt);
            if self.refuses.contains(&tried) {
                return Err(refused(&format!("{} refused", tried.0)));
            }
            if let Some(at) = self.fails_once.iter().position(|&f| f == tried) {
                self.fails_once.remove(at);
                return Err(String::from("out of memory").into());
            }
            Ok(tried)
        }

        /// The (algorithm, layout) of each attempt since the last call of this.
        fn tried(&mut self) -> Vec<(RnnAlgo, SeqLayout)> {
            self.attempts
                .drain(..)
                .map(|a| (a.algo, a.layout))
                .collect()
        }
    }

    /// One call of `algo` on `shape` through `cudnn`.
    fn call(
        cudnn: &mut Fake,
        refusals: &Mutex<Refusals>,
        algo: RnnAlgo,
        shape: &SeqShape,
        training: bool,
    ) -> Result<(RnnAlgo, SeqLayout), AttemptError> {
        first_accepted(&config(algo), shape, training, refusals, |a| cudnn.run(a))
    }

    #[test]
    fn a_refused_attempt_is_skipped_on_the_next_call_of_the_same_shape() {
        let refusals = Mutex::new(Refusals::default());
        let mut cudnn = Fake::new(&[(PersistStatic, BatchMajor), (PersistStatic, SeqMajor)]);
        let (batch_64, batch_32) = (shape(64, BatchMajor), shape(32, BatchMajor));
        let ran = call(&mut cudnn, &refusals, PersistStatic, &batch_64, true);
        assert_eq!(ran, Ok((Standard, SeqMajor)));
        assert_eq!(
            cudnn.tried(),
            [
                (PersistStatic, BatchMajor),
                (PersistStatic, SeqMajor),
                (Standard, SeqMajor)
            ]
        );
        assert_eq!(refusals.lock().unwrap().len(), 2);
        for _ in 0..3 {
            let ran = call(&mut cudnn, &refusals, PersistStatic, &batch_64, true);
            assert_eq!(ran, Ok((Standard, SeqMajor)));
            // One attempt, told what was refused before it and why.
            let attempts = std::mem::take(&mut cudnn.attempts);
            assert_eq!(attempts.len(), 1, "{attempts:?}");
            let refused_before = (PersistStatic, SeqMajor, "persist_static refused".into());
            assert_eq!(attempts[0].after, Some(refused_before));
        }
        // Another batch is another call: its refusals are found anew.
        let ran = call(&mut cudnn, &refusals, PersistStatic, &batch_32, true);
        assert_eq!(ran, Ok((Standard, SeqMajor)));
        assert_eq!(cudnn.tried().len(), 3);
        assert_eq!(refusals.lock().unwrap().len(), 4);
    }

    #[test]
    fn the_first_fallback_knows_the_first_refusal() {
        let refusals = Mutex::new(Refusals::default());
        let mut cudnn = Fake::new(&[(PersistStaticSmallH, BatchMajor)]);
        let batch_major = shape(8, BatchMajor);
        let ran = call(
            &mut cudnn,
            &refusals,
            PersistStaticSmallH,
            &batch_major,
            false,
        );
        assert_eq!(ran, Ok((PersistStaticSmallH, SeqMajor)));
        assert_eq!(cudnn.attempts[0].after, None);
        let why = "persist_static_small_h refused".to_owned();
        assert_eq!(
            cudnn.attempts[1].after,
            Some((PersistStaticSmallH, BatchMajor, why))
        );
    }

    #[test]
    fn a_failure_that_may_pass_is_tried_again() {
        let refusals = Mutex::new(Refusals::default());
        let mut cudnn = Fake::new(&[]);
        cudnn.fails_once = vec![(PersistStatic, SeqMajor)];
        let seq_major = shape(64, SeqMajor);
        let ran = call(&mut cudnn, &refusals, PersistStatic, &seq_major, false);
        assert_eq!(ran, Ok((Standard, SeqMajor)));
        let ran = call(&mut cudnn, &refusals, PersistStatic, &seq_major, false);
        assert_eq!(ran, Ok((PersistStatic, SeqMajor)));
        assert!(refusals.lock().unwrap().is_empty());
        assert_eq!(
            cudnn.tried(),
            [
                (PersistStatic, SeqMajor),
                (Standard, SeqMajor),
                (PersistStatic, SeqMajor)
            ]
        );
    }

    #[test]
    fn training_and_inference_are_remembered_apart() {
        let refusals = Mutex::new(Refusals::default());
        let mut cudnn = Fake::new(&[(PersistStatic, SeqMajor)]);
        let seq_major = shape(64, SeqMajor);
        for training in [true, false] {
            call(&mut cudnn, &refusals, PersistStatic, &seq_major, training).unwrap();
        }
        assert_eq!(cudnn.tried().len(), 4);
        call(&mut cudnn, &refusals, PersistStatic, &seq_major, false).unwrap();
        assert_eq!(cudnn.tried(), [(Standard, SeqMajor)]);
    }

    #[test]
    fn when_every_attempt_is_refused_the_last_refusal_is_the_error() {
        let refusals = Mutex::new(Refusals::default());
        let mut cudnn = Fake::new(&[(PersistStatic, SeqMajor), (Standard, SeqMajor)]);
        let seq_major = shape(64, SeqMajor);
        let ran = call(&mut cudnn, &refusals, PersistStatic, &seq_major, false);
        assert_eq!(ran, Err(refused("standard refused")));
        assert_eq!(cudnn.tried().len(), 2);
        // Remembered: no attempt runs, the error is the same.
        let ran = call(&mut cudnn, &refusals, PersistStatic, &seq_major, false);
        assert_eq!(ran, Err(refused("standard refused")));
        assert!(cudnn.tried().is_empty());
    }

    #[test]
    fn the_error_of_an_attempt_that_ran_wins_over_a_remembered_refusal() {
        let refusals = Mutex::new(Refusals::default());
        let seq_major = shape(64, SeqMajor);
        let standard = config(Standard);
        refusals
            .lock()
            .unwrap()
            .remember(&standard, &seq_major, false, "standard refused");
        let mut cudnn = Fake::new(&[]);
        cudnn.fails_once = vec![(PersistStatic, SeqMajor)];
        // persist_static runs out of memory; standard is skipped (remembered): the
        // caller hears of the memory, not of the old refusal.
        let ran = call(&mut cudnn, &refusals, PersistStatic, &seq_major, false);
        assert_eq!(ran, Err(String::from("out of memory").into()));
        assert_eq!(cudnn.tried(), [(PersistStatic, SeqMajor)]);
    }

    #[test]
    fn a_call_starts_at_the_first_attempt_not_remembered_as_refused() {
        let attempt = |algo, layout, after: Option<(RnnAlgo, SeqLayout, &str)>| Attempt {
            algo,
            layout,
            after: after.map(|(algo, layout, why)| (algo, layout, why.to_owned())),
        };
        let mut refusals = Refusals::default();
        let persist = config(PersistStatic);
        let (batch_major, seq_major) = (shape(64, BatchMajor), shape(64, SeqMajor));
        let starts = |refusals: &mut Refusals, shape: &SeqShape, training| {
            refusals.first_unrefused(&persist, shape, training)
        };
        let first = attempt(PersistStatic, BatchMajor, None);
        assert_eq!(starts(&mut refusals, &batch_major, false), Some(first));
        refusals.remember(&persist, &batch_major, false, "no batch-major");
        let refused_before = Some((PersistStatic, BatchMajor, "no batch-major"));
        let fallback = attempt(PersistStatic, SeqMajor, refused_before);
        assert_eq!(starts(&mut refusals, &batch_major, false), Some(fallback));
        refusals.remember(&persist, &seq_major, false, "NOT_SUPPORTED");
        let refused_before = Some((PersistStatic, SeqMajor, "NOT_SUPPORTED"));
        let standard = attempt(Standard, SeqMajor, refused_before);
        assert_eq!(
            starts(&mut refusals, &batch_major, false),
            Some(standard.clone())
        );
        // The same from a sequence-major call; another mode is another call.
        assert_eq!(starts(&mut refusals, &seq_major, false), Some(standard));
        let untouched = attempt(PersistStatic, SeqMajor, None);
        assert_eq!(starts(&mut refusals, &seq_major, true), Some(untouched));
        refusals.remember(&config(Standard), &seq_major, false, "standard refused");
        assert_eq!(starts(&mut refusals, &seq_major, false), None);
    }

    #[test]
    fn the_least_recently_looked_up_refusal_is_forgotten_first() {
        let mut refusals = Refusals::new(2);
        let (a, b, c) = (shape(8, SeqMajor), shape(16, SeqMajor), shape(24, SeqMajor));
        let persist = config(PersistStatic);
        refusals.remember(&persist, &a, false, "a");
        refusals.remember(&persist, &b, false, "b");
        // Looked up: `b` is now the least recently used.
        assert_eq!(refusals.refusal(&persist, &a, false), Some("a"));
        refusals.remember(&persist, &c, false, "c");
        assert_eq!(refusals.len(), 2);
        assert_eq!(refusals.refusal(&persist, &b, false), None);
        assert_eq!(refusals.refusal(&persist, &a, false), Some("a"));
        assert_eq!(refusals.refusal(&persist, &c, false), Some("c"));
        // Remembered again: the newer reason, still one entry.
        refusals.remember(&persist, &c, false, "c again");
        assert_eq!(refusals.refusal(&persist, &c, false), Some("c again"));
        assert_eq!(refusals.len(), 2);
        // Keyed by the algorithm, the layout and the mode too.
        assert_eq!(refusals.refusal(&config(Standard), &c, false), None);
        assert_eq!(
            refusals.refusal(&persist, &shape(24, BatchMajor), false),
            None
        );
        assert_eq!(refusals.refusal(&persist, &c, true), None);
    }
}
