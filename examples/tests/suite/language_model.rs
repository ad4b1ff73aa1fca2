//! The word-level language model (`examples/src/language_model`): the corpus read as
//! PyTorch's `data.py` reads it, a tiny training run whose loss falls and whose saved
//! model reloads to the same numbers, truncated BPTT's carried state against one long
//! sequence (outputs and gradients), the loss and perplexity against direct
//! computations, and the errors a damaged or mismatched model directory gives.

use crate::scratch;
use std::path::{Path, PathBuf};

use burn::backend::{Autodiff, Flex};
use burn::config::Config;
use burn::module::{AutodiffModule, Param};
use burn::optim::GradientsParams;
use burn::tensor::{Distribution, Int, Tensor, TensorData};
use burn_lstm::LstmState;
use lstm_examples::language_model::{
    self, CONFIG_FILE, Corpus, Dictionary, LmConfig, LmError, MODEL_FILE, Sampler, TrainOptions,
    VOCAB_FILE, WordLm, batchify, cross_entropy, decoder_nll, decoder_nll_loss, encode_file,
    evaluate, fused_nll_loss, load_model, nll_loss, perplexity, window_loss,
};

type B = Flex;
type A = Autodiff<Flex>;

/// A tiny corpus: a few sentences over a dozen words, repeated with variations.
fn tiny_corpus(dir: &Path) {
    let sentences = [
        "the cat sat on the mat",
        "the dog sat on the log",
        "a cat saw the dog",
        "the dog saw a cat on the mat",
    ];
    let train: String = (0..400)
        .map(|i| format!("{}\n", sentences[i % sentences.len()]))
        .collect();
    std::fs::write(dir.join("train.txt"), train).unwrap();
    let held_out = |lines: [&str; 3]| lines.map(|l| format!("{l}\n")).concat().repeat(3);
    let valid = held_out([
        "the cat sat on the log",
        "a dog saw the cat",
        "the cat sat on the mat",
    ]);
    let test = held_out([
        "the dog sat on the mat",
        "a cat saw the dog",
        "the dog saw a cat",
    ]);
    std::fs::write(dir.join("valid.txt"), valid).unwrap();
    std::fs::write(dir.join("test.txt"), test).unwrap();
}

fn tiny_options(save: Option<PathBuf>) -> TrainOptions {
    TrainOptions {
        emsize: 16,
        nhid: 16,
        nlayers: 2,
        lr: 5.0,
        clip: 0.25,
        epochs: 2,
        batch_size: 8,
        bptt: 6,
        dropout: 0.0,
        tied: false,
        seed: 7,
        log_interval: 1000,
        save,
        profile: false,
        quiet: true,
        max_batches: None,
        fused_loss: true,
    }
}

fn ids<Bk: burn::tensor::backend::Backend>(
    values: &[i64],
    shape: [usize; 2],
    device: &Bk::Device,
) -> Tensor<Bk, 2, Int> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), device)
}

fn values<Bk: burn::tensor::backend::Backend, const D: usize>(t: Tensor<Bk, D>) -> Vec<f32> {
    t.into_data().convert::<f32>().into_vec::<f32>().unwrap()
}

/// Largest absolute difference, relative to the largest magnitude of `b`.
fn relative_difference(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    let scale = b.iter().fold(0.0f32, |m, v| m.max(v.abs())).max(1e-30);
    a.iter()
        .zip(b)
        .fold(0.0f32, |m, (x, y)| m.max((x - y).abs()))
        / scale
}

#[test]
fn reads_the_corpus_as_data_py_does() {
    let (_dir, dir) = scratch("corpus");
    // \r\n and \r end lines too; runs of whitespace split once; an empty line is `<eos>`.
    std::fs::write(dir.join("train.txt"), "b a\r\n\n a  c\r").unwrap();
    std::fs::write(dir.join("valid.txt"), "d b").unwrap();
    std::fs::write(dir.join("test.txt"), "e\u{a0}a\n").unwrap();
    let corpus = Corpus::load(&dir).unwrap();
    // Ids in order of first appearance over train, valid, test.
    assert_eq!(
        corpus.dictionary.words(),
        ["b", "a", "<eos>", "c", "d", "e"]
    );
    assert_eq!(corpus.train, [0, 1, 2, 2, 1, 3, 2]);
    assert_eq!(corpus.valid, [4, 0, 2]);
    assert_eq!(corpus.test, [5, 1, 2]);

    // An empty split is named, not reported later as a vocabulary of 0 words.
    let (_empty, empty) = scratch("corpus-empty");
    for name in ["train.txt", "valid.txt", "test.txt"] {
        std::fs::write(
            empty.join(name),
            if name == "valid.txt" { "" } else { "a b" },
        )
        .unwrap();
    }
    let message = Corpus::load(&empty).unwrap_err().to_string();
    assert!(
        message.contains("valid.txt") && message.contains("no words"),
        "{message}"
    );

    // The shipped WikiText-2 files, as Python's data.py counts them.
    let shipped = Corpus::load(&language_model::default_data_dir()).unwrap();
    assert_eq!(
        (shipped.train.len(), shipped.valid.len(), shipped.test.len()),
        (195_890, 21_756, 245_569)
    );
    assert_eq!(shipped.dictionary.len(), 18_328);

    // batchify: columns of consecutive words, time-major.
    let source =
        batchify::<B>(&[0, 1, 2, 3, 4, 5, 6], 2, "train.txt", &Default::default()).unwrap();
    assert_eq!(
        source
            .into_data()
            .convert::<i64>()
            .into_vec::<i64>()
            .unwrap(),
        [0, 3, 1, 4, 2, 5]
    );
    let err = batchify::<B>(&[0, 1, 2], 2, "valid.txt", &Default::default()).unwrap_err();
    assert!(err.to_string().contains("valid.txt"), "{err}");
    assert_eq!(
        language_model::windows(9, 3).collect::<Vec<_>>(),
        [(0, 3), (3, 3), (6, 2)]
    );
}

#[test]
fn trains_on_a_tiny_corpus_and_the_saved_model_reloads() {
    let _serial = crate::one_seeded_run_at_a_time();
    let (_dir, dir) = scratch("train");
    tiny_corpus(&dir);
    let corpus = Corpus::load(&dir).unwrap();
    let save = dir.join("model");
    let report = language_model::train::<B>(
        &corpus,
        &tiny_options(Some(save.clone())),
        &Default::default(),
    )
    .unwrap();
    assert_eq!(report.epochs.len(), 2);
    assert_eq!(report.kernel, "fused-cpu");
    let (first, second) = (&report.epochs[0], &report.epochs[1]);
    // 2,900 words (400 lines of 5-8 words, each + <eos>) cut into 8 columns of 362
    // steps, windows of 6 over the 361 steps that have a next word: 61 batches an epoch.
    assert_eq!(corpus.train.len(), 2_900);
    assert_eq!(report.batches, 122);
    // Measured: 2.22 then 1.83 (uniform over the 13 words: ln 13 = 2.56).
    assert!(
        second.train_loss < first.train_loss - 0.2,
        "training loss {} then {}",
        first.train_loss,
        second.train_loss
    );
    // Far better than uniform over the vocabulary (13 words: ppl 13).
    assert!(
        report.valid_ppl < 10.0 && report.test_ppl < 10.0,
        "{report:?}"
    );
    assert!(report.median_ms_per_batch > 0.0 && report.words_per_s > 0.0);

    // The saved model is the best epoch's: it gives that epoch's numbers again.
    let device = Default::default();
    let saved = load_model::<B>(&save, &device).unwrap();
    assert_eq!(saved.dictionary, corpus.dictionary);
    assert_eq!(
        saved.config,
        tiny_options(None).config(corpus.dictionary.len())
    );
    let best = report
        .epochs
        .iter()
        .min_by(|a, b| a.valid_loss.total_cmp(&b.valid_loss))
        .unwrap();
    let test = batchify::<B>(
        &corpus.test,
        language_model::EVAL_BATCH_SIZE,
        "test",
        &device,
    );
    let test = test.unwrap();
    let reloaded = evaluate(&saved.model, &test, 6);
    assert!(
        (reloaded - best.test_loss).abs() <= 1e-6 * best.test_loss,
        "reloaded test loss {reloaded}, in training {}",
        best.test_loss
    );
    // With the LSTM quantized to int8: the test perplexity within 1 % of the f32 one.
    let int8 = saved.model.rnn.quantized_int8().unwrap();
    let int8_loss = language_model::evaluate_with(&saved.model, &int8, &test, 6);
    let change = (perplexity(int8_loss) - perplexity(reloaded)).abs() / perplexity(reloaded);
    assert!(change < 0.01, "int8 test loss {int8_loss}, f32 {reloaded}");
    assert_ne!(int8_loss, reloaded, "int8 ran");
    assert!((perplexity(reloaded) - report.test_ppl).abs() <= 1e-5 * report.test_ppl);

    // Sampling from it is seeded and stays in the vocabulary.
    let prompt = [saved.dictionary.id("the").unwrap()];
    let draw = |seed| {
        language_model::generate(
            &saved.model,
            &prompt,
            30,
            1.0,
            &mut Sampler::new(seed),
            &device,
        )
        .unwrap()
    };
    let words = draw(3);
    assert_eq!(words.len(), 30);
    assert!(
        words
            .iter()
            .all(|&id| (id as usize) < saved.dictionary.len())
    );
    assert_eq!(words, draw(3));
    let err =
        language_model::generate(&saved.model, &prompt, 1, 0.0, &mut Sampler::new(1), &device)
            .unwrap_err();
    assert!(err.to_string().contains("--temperature"), "{err}");

    // Tied weights: no decoder weight of its own, saved and reloaded as such.
    let tied = dir.join("tied");
    let options = TrainOptions {
        tied: true,
        epochs: 1,
        max_batches: Some(3),
        ..tiny_options(Some(tied.clone()))
    };
    let report = language_model::train::<B>(&corpus, &options, &Default::default()).unwrap();
    let saved = load_model::<B>(&tied, &device).unwrap();
    assert!(saved.config.tied && saved.model.decoder.weight.is_none());
    let reloaded = evaluate(
        &saved.model,
        &batchify::<B>(
            &corpus.test,
            language_model::EVAL_BATCH_SIZE,
            "test",
            &device,
        )
        .unwrap(),
        6,
    );
    assert!((perplexity(reloaded) - report.test_ppl).abs() <= 1e-5 * report.test_ppl);
}

#[test]
fn the_carried_state_equals_one_long_sequence() {
    let _serial = crate::one_seeded_run_at_a_time();
    let device = Default::default();
    let config = LmConfig::new(11)
        .with_emsize(6)
        .with_nhid(5)
        .with_nlayers(2)
        .with_dropout(0.0);
    <A as burn::tensor::backend::Backend>::seed(&device, 3);
    let model = config.init::<A>(&device);
    let (steps, batch, split) = (9, 3, 5);
    let words: Vec<i64> = (0..(steps + 1) * batch)
        .map(|i| (i * 7 % 11) as i64)
        .collect();
    let all = ids::<A>(&words, [steps + 1, batch], &device);
    let input = all.clone().slice([0..steps, 0..batch]);
    let targets = all.slice([1..steps + 1, 0..batch]).reshape([steps * batch]);
    let (x1, x2) = (
        input.clone().slice([0..split, 0..batch]),
        input.clone().slice([split..steps, 0..batch]),
    );
    let t2 = targets.clone().slice(split * batch..steps * batch);

    // Forward: two windows with the state carried = one call over both.
    let (long, long_state) = model.forward(input.clone(), None);
    let (y1, s1) = model.forward(x1.clone(), None);
    let (y2, s2) = model.forward(x2.clone(), Some(s1.clone()));
    let windows = Tensor::cat(vec![y1, y2], 0);
    assert!(relative_difference(&values(windows), &values(long.clone())) < 1e-5);
    assert!(relative_difference(&values(s2.hidden), &values(long_state.hidden)) < 1e-5);
    assert!(relative_difference(&values(s2.cell), &values(long_state.cell)) < 1e-5);

    // Gradients of the last window with truncation: the training step's (state carried,
    // detached, fused loss) = the last window run alone from the carried values as
    // constants (Burn's CrossEntropyLoss) ...
    let grads_of = |loss: Tensor<A, 1>| GradientsParams::from_grads(loss.backward(), &model);
    let (loss, _) = window_loss(&model, x2.clone(), t2.clone(), Some(s1), true);
    let truncated = grads_of(loss.clone());
    let inner = model.valid();
    let (_, s1_values) = inner.forward(x1.inner(), None);
    let constant = LstmState::new(
        Tensor::<A, 3>::from_inner(s1_values.hidden),
        Tensor::<A, 3>::from_inner(s1_values.cell),
    );
    let (logits, _) = model.forward(x2, Some(constant));
    let reference_loss = cross_entropy(logits, t2.clone());
    let reference = grads_of(reference_loss.clone());
    // ... and differs from the untruncated gradient (through the first window too).
    let long_rows = long_rows(&model, input, split * batch, steps * batch);
    let untruncated = grads_of(cross_entropy(long_rows, t2));
    assert!(relative_difference(&values(loss), &values(reference_loss)) < 1e-6);

    let weight_hh = model.rnn.layers[0].forward.weight_hh.id;
    let params = [
        ("encoder.weight", model.encoder.weight.id),
        ("rnn.layers.0.forward.weight_hh", weight_hh),
        (
            "rnn.layers.1.forward.weight_ih",
            model.rnn.layers[1].forward.weight_ih.id,
        ),
        ("decoder.weight", model.decoder.weight.as_ref().unwrap().id),
        ("decoder.bias", model.decoder.bias.id),
    ];
    for (name, id) in params {
        let a = truncated
            .get::<B, 2>(id)
            .map(values)
            .or_else(|| truncated.get::<B, 1>(id).map(values));
        let b = reference
            .get::<B, 2>(id)
            .map(values)
            .or_else(|| reference.get::<B, 1>(id).map(values));
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(relative_difference(&a, &b) < 1e-4, "{name}: {a:?} vs {b:?}");
    }
    let truncated_hh = values(truncated.get::<B, 2>(weight_hh).unwrap());
    let untruncated_hh = values(untruncated.get::<B, 2>(weight_hh).unwrap());
    assert!(
        relative_difference(&truncated_hh, &untruncated_hh) > 1e-3,
        "truncation changed nothing: the carried state was not detached"
    );
}

/// Logits of rows `from..to` of one long call.
fn long_rows(model: &WordLm<A>, input: Tensor<A, 2, Int>, from: usize, to: usize) -> Tensor<A, 2> {
    let (logits, _) = model.forward(input, None);
    let [_, vocab] = logits.dims();
    logits.slice([from..to, 0..vocab])
}

#[test]
fn perplexity_is_exp_of_the_mean_nll() {
    let device = Default::default();
    // Four words; the decoder ignores the LSTM (zero weight) and its bias makes the next
    // word's distribution [1, 2, 3, 4] / 10 after every word.
    let mut model = LmConfig::new(4)
        .with_emsize(3)
        .with_nhid(3)
        .with_nlayers(1)
        .with_dropout(0.0)
        .init::<B>(&device);
    model.decoder.weight = Some(Param::from_tensor(Tensor::zeros([3, 4], &device)));
    let bias: Vec<f32> = [1.0f32, 2.0, 3.0, 4.0].iter().map(|p| p.ln()).collect();
    model.decoder.bias = Param::from_tensor(Tensor::from_floats(bias.as_slice(), &device));
    let stream: Vec<u32> = (0..43u32).map(|i| (i * i + 3 * i) % 4).collect();
    let (batch, bptt) = (2, 5);
    let source = batchify::<B>(&stream, batch, "test", &device).unwrap();
    let mean_nll = evaluate(&model, &source, bptt);

    // Directly: column b is stream[b * steps .. (b + 1) * steps]; every word but the
    // column's first is a target.
    let steps = stream.len() / batch;
    let mut total = 0.0f64;
    for b in 0..batch {
        for t in 1..steps {
            let word = stream[b * steps + t] as f64;
            total -= ((word + 1.0) / 10.0).ln();
        }
    }
    let direct = total / (batch * (steps - 1)) as f64;
    assert!((mean_nll - direct).abs() < 1e-6, "{mean_nll} vs {direct}");
    assert!((perplexity(mean_nll) - direct.exp()).abs() < 1e-5 * direct.exp());
}

#[test]
fn the_losses_equal_burns_cross_entropy() {
    let device = Default::default();
    let targets: Vec<i64> = vec![3, 0, 7, 7, 1, 5];
    // Logits spread wide: a target's probability below f32's smallest normal (row 2).
    let mut logits = Tensor::<B, 2>::random([6, 9], Distribution::Normal(0.0, 3.0), &device);
    logits = logits.slice_assign([2..3, 0..1], Tensor::from_floats([[120.0]], &device));
    let t = Tensor::<B, 1, Int>::from_data(TensorData::new(targets, [6]), &device);
    let reference = values(cross_entropy(logits.clone(), t.clone()))[0];
    let ours = values(nll_loss(logits.clone(), t.clone()))[0];
    assert!(reference.is_finite() && reference > 10.0, "{reference}");
    assert!(
        (ours - reference).abs() <= 1e-5 * reference,
        "{ours} vs {reference}"
    );

    let leaf = || Tensor::<A, 2>::from_inner(logits.clone()).require_grad();
    let t = Tensor::<A, 1, Int>::from_inner(t);
    let (a, b) = (leaf(), leaf());
    let fused = fused_nll_loss(a.clone(), t.clone());
    let composed = cross_entropy(b.clone(), t);
    assert!((values(fused.clone())[0] - reference).abs() <= 1e-5 * reference);
    let grad_fused = values(a.grad(&fused.backward()).unwrap());
    let grad_composed = values(b.grad(&composed.backward()).unwrap());
    assert!(relative_difference(&grad_fused, &grad_composed) < 1e-5);
}

/// The decoder and loss as one op against Burn's `linear` and `CrossEntropyLoss`: the
/// loss and the gradients of the input, the weight and the bias, on Flex (the fused CPU
/// kernel's products) and on NdArray (Burn's ops), with the weight a plain tensor and a
/// transposed view (a tied weight).
#[test]
fn the_decoder_loss_equals_burns_linear_and_cross_entropy() {
    fn check<Q: burn::tensor::backend::Backend>(tied: bool) {
        let device = Default::default();
        let (rows, inputs, vocab) = (13, 7, 41);
        let x = Tensor::<Q, 2>::random([rows, inputs], Distribution::Normal(0.0, 1.0), &device);
        let w_stored = if tied {
            Tensor::<Q, 2>::random([vocab, inputs], Distribution::Normal(0.0, 1.0), &device)
        } else {
            Tensor::<Q, 2>::random([inputs, vocab], Distribution::Normal(0.0, 1.0), &device)
        };
        let b = Tensor::<Q, 1>::random([vocab], Distribution::Normal(0.0, 1.0), &device);
        let targets: Vec<i64> = (0..rows as i64)
            .map(|i| (i * 17 + 3) % vocab as i64)
            .collect();
        let t = Tensor::<Autodiff<Q>, 1, Int>::from_data(TensorData::new(targets, [rows]), &device);
        let run = |fused: bool| {
            let x = Tensor::<Autodiff<Q>, 2>::from_inner(x.clone()).require_grad();
            let w_leaf = Tensor::<Autodiff<Q>, 2>::from_inner(w_stored.clone()).require_grad();
            let b = Tensor::<Autodiff<Q>, 1>::from_inner(b.clone()).require_grad();
            let w = if tied {
                w_leaf.clone().transpose()
            } else {
                w_leaf.clone()
            };
            let loss = if fused {
                decoder_nll_loss(x.clone(), w, b.clone(), t.clone())
            } else {
                cross_entropy(
                    burn::tensor::module::linear(x.clone(), w, Some(b.clone())),
                    t.clone(),
                )
            };
            let grads = loss.backward();
            let grad = |g: Option<Tensor<Q, 2>>| values(g.unwrap());
            (
                values(loss.inner())[0],
                grad(x.grad(&grads)),
                grad(w_leaf.grad(&grads)),
                values(b.grad(&grads).unwrap()),
            )
        };
        let (ours, reference) = (run(true), run(false));
        assert!(reference.0 > 1.0, "{}", reference.0);
        // Without autodiff (evaluation).
        let w = if tied {
            w_stored.clone().transpose()
        } else {
            w_stored.clone()
        };
        let evaluation = values(decoder_nll(x.clone(), w, b.clone(), t.clone().inner()))[0];
        assert!((evaluation - reference.0).abs() <= 1e-5 * reference.0);
        assert!(
            (ours.0 - reference.0).abs() <= 1e-5 * reference.0,
            "{} vs {}",
            ours.0,
            reference.0
        );
        for (name, a, b) in [
            ("x", &ours.1, &reference.1),
            ("weight", &ours.2, &reference.2),
            ("bias", &ours.3, &reference.3),
        ] {
            let difference = relative_difference(a, b);
            assert!(difference < 1e-5, "{name} (tied: {tied}): {difference}");
        }
    }
    for tied in [false, true] {
        check::<B>(tied);
        check::<burn::backend::NdArray>(tied);
    }
}

#[test]
fn damaged_or_mismatched_model_files_are_named_errors() {
    let _serial = crate::one_seeded_run_at_a_time();
    let (_dir, dir) = scratch("errors");
    tiny_corpus(&dir);
    let corpus = Corpus::load(&dir).unwrap();
    let good = dir.join("good");
    let options = TrainOptions {
        epochs: 1,
        max_batches: Some(1),
        ..tiny_options(Some(good.clone()))
    };
    language_model::train::<B>(&corpus, &options, &Default::default()).unwrap();
    let vocab_size = corpus.dictionary.len();
    let load = |dir: &Path| load_model::<B>(dir, &Default::default()).err().unwrap();
    // A copy of the good model directory with one file replaced.
    let variant = |name: &str, file: &str, contents: &[u8]| {
        let dir = dir.join(name);
        std::fs::create_dir_all(&dir).unwrap();
        for f in [MODEL_FILE, CONFIG_FILE, VOCAB_FILE] {
            std::fs::copy(good.join(f), dir.join(f)).unwrap();
        }
        std::fs::write(dir.join(file), contents).unwrap();
        dir
    };
    let vocab = std::fs::read_to_string(good.join(VOCAB_FILE)).unwrap();
    let config = LmConfig::load(good.join(CONFIG_FILE)).unwrap();

    // A word missing from the vocabulary.
    let short: String = vocab.lines().skip(1).map(|w| format!("{w}\n")).collect();
    let err = load(&variant("short-vocab", VOCAB_FILE, short.as_bytes()));
    assert!(matches!(err, LmError::Mismatch { .. }), "{err}");
    let message = err.to_string();
    assert!(message.contains(VOCAB_FILE), "{message}");
    assert!(
        message.contains(&format!("expected {vocab_size} words"))
            && message.contains(&format!("got {}", vocab_size - 1)),
        "{message}"
    );

    // A vocabulary of the right size for another model's config: the checkpoint's
    // embedding, checked against the model the config builds, names the mismatch.
    let longer = format!("{vocab}extra\n");
    let dir_longer = variant("long-vocab", VOCAB_FILE, longer.as_bytes());
    LmConfig {
        vocab_size: vocab_size + 1,
        ..config.clone()
    }
    .save(dir_longer.join(CONFIG_FILE))
    .unwrap();
    let message = load(&dir_longer).to_string();
    assert!(
        message.contains(MODEL_FILE)
            && message.contains(&format!(
                "encoder.weight: expected shape [{}, 16] ({CONFIG_FILE}), got [{vocab_size}, 16]",
                vocab_size + 1
            )),
        "{message}"
    );

    // A config whose LSTM would take terabytes: refused before anything is allocated.
    let dir_huge = variant("huge-lstm", CONFIG_FILE, b"");
    LmConfig {
        vocab_size: 1,
        emsize: 65_536,
        nhid: 65_536,
        nlayers: 64,
        tied: true,
        ..config.clone()
    }
    .save(dir_huge.join(CONFIG_FILE))
    .unwrap();
    let message = load(&dir_huge).to_string();
    assert!(
        message.contains("the LSTM's parameters") && message.contains("expected at most"),
        "{message}"
    );

    // Damaged vocabularies.
    let twice = vocab.replacen("\n", "\nthe\n", 1);
    let message = load(&variant("twice", VOCAB_FILE, twice.as_bytes())).to_string();
    assert!(
        message.contains("line 2") && message.contains("\"the\" again"),
        "{message}"
    );
    let blank = vocab.replacen("\n", "\n\n", 1);
    let message = load(&variant("blank", VOCAB_FILE, blank.as_bytes())).to_string();
    assert!(message.contains("line 2: expected one word"), "{message}");
    let message = load(&variant("binary", VOCAB_FILE, b"the\n\xff\xfe\n")).to_string();
    assert!(
        message.contains("UTF-8") && message.contains("offset 4"),
        "{message}"
    );

    // Damaged and mismatched checkpoints.
    let corrupt = |name: &str, bytes: &[u8]| {
        let err = load(&variant(name, MODEL_FILE, bytes));
        assert!(
            matches!(
                err,
                LmError::Corrupt {
                    what: "checkpoint",
                    ..
                }
            ),
            "{name}: {err}"
        );
        err
    };
    let err = corrupt("garbage", b"not a checkpoint");
    assert!(err.to_string().contains(MODEL_FILE), "{err}");
    // Nested 1,000 arrays deep (under the decoder's own limit of 1,024): the decoder
    // recurses once per level, which overflowed this test thread's 2 MiB stack.
    let mut nested = vec![0x82, 0xa4];
    nested.extend_from_slice(b"item");
    nested.extend(std::iter::repeat_n(0x91, 1000));
    nested.extend([0xc0, 0xa8]);
    nested.extend_from_slice(b"metadata");
    nested.push(0x80);
    corrupt("nested", &nested);
    let bytes = std::fs::read(good.join(MODEL_FILE)).unwrap();
    corrupt("truncated", &bytes[..bytes.len() / 2]);
    let other = variant("other-emsize", CONFIG_FILE, b"");
    config
        .clone()
        .with_emsize(10)
        .save(other.join(CONFIG_FILE))
        .unwrap();
    let message = load(&other).to_string();
    assert!(
        message.contains(MODEL_FILE)
            && message.contains("encoder.weight: expected shape")
            && message.contains(&format!("[{vocab_size}, 16]")),
        "{message}"
    );
    let tied = variant("tied", CONFIG_FILE, b"");
    config
        .clone()
        .with_tied(true)
        .save(tied.join(CONFIG_FILE))
        .unwrap();
    let message = load(&tied).to_string();
    assert!(
        message.contains("decoder.weight: expected none"),
        "{message}"
    );
    let layers = variant("layers", CONFIG_FILE, b"");
    config
        .clone()
        .with_nlayers(3)
        .save(layers.join(CONFIG_FILE))
        .unwrap();
    let message = load(&layers).to_string();
    assert!(
        message.contains("rnn.layers.2.") && message.contains("expected a tensor"),
        "{message}"
    );
    let bad = variant("bad-config", CONFIG_FILE, b"");
    LmConfig {
        vocab_size: 0,
        ..config.clone()
    }
    .save(bad.join(CONFIG_FILE))
    .unwrap();
    let message = load(&bad).to_string();
    assert!(
        message.contains(CONFIG_FILE) && message.contains("vocab_size: expected 1..="),
        "{message}"
    );

    // Missing files.
    std::fs::remove_file(dir.join("twice").join(VOCAB_FILE)).unwrap();
    let err = load(&dir.join("twice"));
    assert!(
        matches!(
            err,
            LmError::Missing {
                what: "vocabulary",
                ..
            }
        ),
        "{err}"
    );

    // A test file with a word the model never saw.
    std::fs::write(dir.join("new.txt"), "the cat\nthe zebra\n").unwrap();
    let dictionary = Dictionary::load(&good.join(VOCAB_FILE)).unwrap();
    let message = encode_file(&dir.join("new.txt"), &dictionary)
        .unwrap_err()
        .to_string();
    assert!(message.contains("line 2: the word \"zebra\""), "{message}");

    // --tied with different sizes.
    let tied_options = TrainOptions {
        tied: true,
        nhid: 8,
        ..tiny_options(None)
    };
    let message = tied_options.validate().unwrap_err().to_string();
    assert!(
        message.contains("--tied") && message.contains("--emsize 16 and --nhid 8"),
        "{message}"
    );
    // --max-batches 0 would train nothing and save the untrained model as the best.
    let idle = TrainOptions {
        max_batches: Some(0),
        ..tiny_options(None)
    };
    let message = idle.validate().unwrap_err().to_string();
    assert!(
        message.contains("--max-batches: expected at least 1, got 0"),
        "{message}"
    );
}
