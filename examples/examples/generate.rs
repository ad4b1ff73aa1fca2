//! Serves a model saved by `language_model` on the CPU (Flex): loads it with checks (the
//! vocabulary against the checkpoint's embedding and decoder shapes, the checkpoint
//! against its config), reports its test perplexity, and samples words like PyTorch's
//! `generate.py`: each drawn from `softmax(logits / temperature)` and fed back with the
//! LSTM's state carried.
//!
//! ```text
//! cargo run --release --example generate -- target/language-model
//! cargo run --release --example generate -- target/language-model --words 100 --temperature 0.8 --prompt "the"
//! ```

use std::path::PathBuf;

use burn::backend::Flex;
use clap::Parser;
use lstm_examples::language_model::{
    self, EVAL_BATCH_SIZE, LmError, Sampler, VOCAB_FILE, batchify, encode_file, evaluate,
    evaluate_with, load_model, perplexity,
};
use lstm_examples::say;

/// Loads a saved language model, reports its test perplexity and samples words.
#[derive(Parser, Debug)]
#[command(name = "generate")]
struct Args {
    /// The model directory (`model.mpk`, `config.json`, `vocab.txt`).
    model: PathBuf,
    /// Folder of the corpus; its `test.txt` gives the test perplexity.
    #[arg(long, default_value_os_t = language_model::default_data_dir())]
    data: PathBuf,
    /// Words to sample.
    #[arg(long, default_value_t = 100)]
    words: usize,
    /// Higher gives more diverse words (at least 1e-3).
    #[arg(long, default_value_t = 1.0)]
    temperature: f64,
    /// Seed of the sampling.
    #[arg(long, default_value_t = 1111)]
    seed: u64,
    /// Words to start from (in the vocabulary); default: one random word, as generate.py.
    #[arg(long)]
    prompt: Option<String>,
    /// Window length of the test evaluation.
    #[arg(long, default_value_t = 35)]
    bptt: usize,
    /// Skip the test perplexity (it reads the whole test split).
    #[arg(long)]
    no_test: bool,
    /// Also report the test perplexity with the LSTM quantized to int8
    /// (`quantized_int8()`).
    #[arg(long)]
    int8: bool,
}

fn main() {
    if let Err(e) = run(Args::parse()) {
        eprintln!("generate: {e}");
        std::process::exit(2);
    }
}

fn run(args: Args) -> Result<(), LmError> {
    language_model::keep_freed_memory();
    let device = Default::default();
    let saved = load_model::<Flex>(&args.model, &device)?;
    let (model, config, dictionary) = (saved.model, saved.config, saved.dictionary);
    say!(
        "loaded {} (vocabulary {} words, emsize {}, nhid {}, nlayers {}{}); LSTM kernel: {}",
        args.model.display(),
        dictionary.len(),
        config.emsize,
        config.nhid,
        config.nlayers,
        if config.tied { ", tied" } else { "" },
        model.rnn.kernel(&device, 1, 1)
    );
    if !args.no_test {
        if args.bptt == 0 {
            return Err(LmError::Usage("--bptt: expected at least 1, got 0".into()));
        }
        let test_path = args.data.join("test.txt");
        let ids = encode_file(&test_path, &dictionary)?;
        let test = batchify::<Flex>(&ids, EVAL_BATCH_SIZE, "test.txt", &device)?;
        let loss = evaluate(&model, &test, args.bptt);
        say!(
            "| {} | test loss {loss:5.2} | test ppl {:8.2}",
            test_path.display(),
            perplexity(loss)
        );
        if args.int8 {
            let int8 = model.rnn.quantized_int8().map_err(|e| {
                LmError::Usage(format!("--int8: the model's LSTM does not quantize: {e}"))
            })?;
            let int8_loss = evaluate_with(&model, &int8, &test, args.bptt);
            let (ppl, int8_ppl) = (perplexity(loss), perplexity(int8_loss));
            say!(
                "| int8 LSTM ({}) | test loss {int8_loss:5.2} | test ppl {int8_ppl:8.2} ({:+.3} % against f32)",
                int8.kernel(),
                100.0 * (int8_ppl - ppl) / ppl
            );
        }
    }
    let mut sampler = Sampler::new(args.seed);
    let prompt: Vec<u32> = match &args.prompt {
        Some(text) => language_model::lines(text)
            .flat_map(|line| line.split_whitespace())
            .map(|word| {
                dictionary.id(word).ok_or_else(|| {
                    LmError::Usage(format!(
                        "--prompt: the word {word:?} is not in the vocabulary ({} words in {})",
                        dictionary.len(),
                        args.model.join(VOCAB_FILE).display()
                    ))
                })
            })
            .collect::<Result<_, _>>()?,
        // generate.py starts from a uniformly drawn word.
        None => vec![
            ((sampler.uniform() * dictionary.len() as f64) as u32).min(dictionary.len() as u32 - 1),
        ],
    };
    let sampled = language_model::generate(
        &model,
        &prompt,
        args.words,
        args.temperature,
        &mut sampler,
        &device,
    )?;
    let word = |id: &u32| dictionary.word(*id).unwrap_or("<?>").to_string();
    say!(
        "prompt: {}",
        prompt.iter().map(word).collect::<Vec<_>>().join(" ")
    );
    // Twenty words a line, as generate.py writes them.
    for line in sampled.chunks(20) {
        say!("{}", line.iter().map(word).collect::<Vec<_>>().join(" "));
    }
    Ok(())
}
