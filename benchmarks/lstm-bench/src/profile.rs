//! A sampling profile of the timed calls' host time (feature `profile`): with
//! `LSTM_BENCH_PROFILE=FILE`, every thread of the process is sampled (by CPU time, 4 kHz)
//! while the timed calls run, and FILE gets, per thread, the functions by inclusive and by
//! self samples. On a GPU run this shows where a call's host time goes beyond the op's own
//! phases (`BURN_LSTM_CUDNN_TRACE=1`): Burn's fusion, CubeCL's device thread, the driver.
//! A thread blocked in the kernel is not sampled; one spinning on the GPU is.

use std::collections::{HashMap, HashSet};
use std::fmt::Write as _;

/// Samples per second of CPU time.
const FREQUENCY: i32 = 4000;
/// Functions listed per thread and order.
const TOP: usize = 45;

/// A running profile, or nothing when `LSTM_BENCH_PROFILE` is unset.
pub struct Profile {
    #[cfg(feature = "profile")]
    running: Option<(pprof::ProfilerGuard<'static>, String)>,
}

impl Profile {
    /// Starts sampling when `LSTM_BENCH_PROFILE` names a file (and this build has the
    /// `profile` feature; without it, the variable is refused).
    pub fn start() -> Result<Self, String> {
        let path = std::env::var("LSTM_BENCH_PROFILE")
            .ok()
            .filter(|p| !p.is_empty());
        #[cfg(feature = "profile")]
        {
            let running = match path {
                Some(path) => {
                    let guard = pprof::ProfilerGuardBuilder::default()
                        .frequency(FREQUENCY)
                        .blocklist(&["libc", "libgcc", "pthread", "vdso"])
                        .build()
                        .map_err(|e| format!("LSTM_BENCH_PROFILE: cannot start sampling: {e}"))?;
                    Some((guard, path))
                }
                None => None,
            };
            Ok(Self { running })
        }
        #[cfg(not(feature = "profile"))]
        match path {
            Some(path) => Err(format!(
                "LSTM_BENCH_PROFILE={path}: this build has no profiler (build with --features profile)"
            )),
            None => Ok(Self {}),
        }
    }

    /// Stops sampling and writes the summary, if sampling ran.
    pub fn finish(self) -> Result<(), String> {
        #[cfg(feature = "profile")]
        if let Some((guard, path)) = self.running {
            let report = guard
                .report()
                .build()
                .map_err(|e| format!("LSTM_BENCH_PROFILE: cannot build the report: {e}"))?;
            let stacks = report.data.iter().map(|(frames, &count)| {
                let names = frames
                    .frames
                    .iter()
                    .flat_map(|inlined| inlined.iter().map(|symbol| short_name(&symbol.name())))
                    .collect();
                Stack {
                    thread: frames.thread_name_or_id(),
                    names,
                    count: count.max(0) as u64,
                }
            });
            std::fs::write(&path, summary(stacks.collect()))
                .map_err(|e| format!("LSTM_BENCH_PROFILE={path}: {e}"))?;
        }
        Ok(())
    }
}

/// One sampled call stack, innermost function first.
#[cfg_attr(not(feature = "profile"), allow(dead_code))]
struct Stack {
    thread: String,
    names: Vec<String>,
    count: u64,
}

/// `name` without its hash suffix (`::h0123456789abcdef`) and its generic arguments,
/// which make the lines too long to read.
#[cfg_attr(not(feature = "profile"), allow(dead_code))]
fn short_name(name: &str) -> String {
    let name = match name.rfind("::h") {
        Some(at) if name.len() - at == 19 => &name[..at],
        _ => name,
    };
    let mut out = String::with_capacity(name.len());
    let mut depth = 0usize;
    for c in name.chars() {
        match c {
            '<' => depth += 1,
            '>' => depth = depth.saturating_sub(1),
            _ if depth == 0 => out.push(c),
            _ => {}
        }
    }
    out
}

/// Per thread (threads by samples), the [`TOP`] functions by inclusive samples (once per
/// stack) and by self samples (the innermost frame), each with its share of the thread.
#[cfg_attr(not(feature = "profile"), allow(dead_code))]
fn summary(stacks: Vec<Stack>) -> String {
    let mut threads: HashMap<&str, Vec<&Stack>> = HashMap::new();
    for stack in &stacks {
        threads.entry(&stack.thread).or_default().push(stack);
    }
    let total: u64 = stacks.iter().map(|s| s.count).sum();
    let mut threads: Vec<_> = threads.into_iter().collect();
    threads.sort_by_key(|(_, s)| std::cmp::Reverse(s.iter().map(|s| s.count).sum::<u64>()));
    let mut out = format!("{total} samples at {FREQUENCY} Hz of CPU time\n");
    for (thread, stacks) in threads {
        let samples: u64 = stacks.iter().map(|s| s.count).sum();
        let mut inclusive: HashMap<&str, u64> = HashMap::new();
        let mut own: HashMap<&str, u64> = HashMap::new();
        for stack in &stacks {
            let unique: HashSet<&str> = stack.names.iter().map(String::as_str).collect();
            for name in unique {
                *inclusive.entry(name).or_default() += stack.count;
            }
            if let Some(inner) = stack.names.first() {
                *own.entry(inner).or_default() += stack.count;
            }
        }
        let _ = writeln!(out, "\n== thread {thread}: {samples} samples");
        for (title, counts) in [("inclusive", inclusive), ("self", own)] {
            let _ = writeln!(out, "-- {title}");
            let mut counts: Vec<_> = counts.into_iter().collect();
            counts.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
            for (name, count) in counts.into_iter().take(TOP) {
                let share = 100.0 * count as f64 / samples.max(1) as f64;
                let _ = writeln!(out, "{share:5.1} % {count:7} {name}");
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_lose_their_hash_and_generic_arguments() {
        assert_eq!(
            short_name("burn_fusion::stream::Processor<R>::process::h0123456789abcdef"),
            "burn_fusion::stream::Processor::process"
        );
        assert_eq!(short_name("cuLaunchKernel"), "cuLaunchKernel");
    }

    #[test]
    fn the_summary_counts_a_function_once_per_stack_and_its_self_time() {
        let stack = |thread: &str, names: &[&str], count| Stack {
            thread: thread.into(),
            names: names.iter().map(|n| n.to_string()).collect(),
            count,
        };
        let text = summary(vec![
            stack("main", &["inner", "outer", "inner"], 3),
            stack("main", &["outer"], 1),
            stack("device", &["launch"], 2),
        ]);
        assert!(text.starts_with("6 samples"), "{text}");
        let main = text.split("== thread main: 4 samples").nth(1).expect(&text);
        let (inclusive, own) = main.split_once("-- self").expect(&text);
        assert!(inclusive.contains("100.0 %       4 outer"), "{text}");
        assert!(inclusive.contains(" 75.0 %       3 inner"), "{text}");
        assert!(own.contains(" 75.0 %       3 inner"), "{text}");
        assert!(own.contains(" 25.0 %       1 outer"), "{text}");
        assert!(text.contains("== thread device: 2 samples"), "{text}");
    }
}
