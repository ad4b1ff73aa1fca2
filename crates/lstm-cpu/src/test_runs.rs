//! For tests (feature `testing`): running a test again on every instruction set below
//! the best one this CPU has. The choice is read once per process (`LSTM_CPU_ISA` caps
//! it, see `simd.rs`), so a test covers the lower instruction sets by running itself
//! again as a child process with the cap set.

use crate::simd::{Isa, isa};

/// The instruction sets below [`instruction_set`](crate::instruction_set) that
/// `LSTM_CPU_ISA` can select on this CPU, best first.
pub fn lower_instruction_sets() -> Vec<&'static str> {
    match isa() {
        Isa::Avx512 => vec!["avx2", "baseline"],
        Isa::Avx2 => vec!["baseline"],
        Isa::Baseline => Vec::new(),
    }
}

/// For tests: runs the test function `test` of the module `module` (the caller's
/// `module_path!()`) of the current test binary again, once per instruction set in
/// [`lower_instruction_sets`], with `LSTM_CPU_ISA` set, and panics with the child's
/// output if one fails. A child (whose `LSTM_CPU_ISA` is set) runs nothing more, so the
/// caller's own body then checks the best instruction set. Returns the instruction sets
/// it ran.
///
/// ```no_run
/// #[test]
/// fn golden_cases() {
///     lstm_cpu::rerun_test_on_lower_instruction_sets(module_path!(), "golden_cases");
///     // ... the checks, on this process's instruction set
/// }
/// ```
pub fn rerun_test_on_lower_instruction_sets(module: &str, test: &str) -> Vec<&'static str> {
    if std::env::var_os("LSTM_CPU_ISA").is_some() {
        return Vec::new();
    }
    let lower = lower_instruction_sets();
    for cap in &lower {
        rerun_test_with_env(module, test, &[("LSTM_CPU_ISA", cap)]);
    }
    lower
}

/// For tests: runs the test function `test` of the module `module` (the caller's
/// `module_path!()`) of the current test binary again, in a child process with `env`
/// set, prints the child's output (one line per golden case, say) and panics with it if
/// the test failed there. For settings that hold for a whole process once made (the
/// instruction set, Burn's float type of a device), which a test binary sharing one
/// process between many tests cannot give one of them. The child also runs a test that
/// is `#[ignore]`d (a GPU test run with `--ignored`).
pub fn rerun_test_with_env(module: &str, test: &str, env: &[(&str, &str)]) {
    let name = harness_name(module, test);
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = std::process::Command::new(&exe);
    command.args([
        name.as_str(),
        "--exact",
        "--include-ignored",
        "--nocapture",
        "--test-threads",
        "1",
    ]);
    for (key, value) in env {
        command.env(key, value);
    }
    let output = command.output().expect("the test binary runs again");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    // The child's lines belong in this test's output.
    print!("{text}");
    assert!(
        output.status.success() && text.contains("1 passed"),
        "{name} with {env:?} failed:\n{text}"
    );
}

/// For tests whose whole body runs in a child process: whether this process is not
/// that child. In the test's own process (the environment does not hold every pair of
/// `env`), runs `test` in a child with `env` set ([`rerun_test_with_env`], which panics
/// if it fails there) and returns `true`: the caller returns. In the child, returns
/// `false`: the caller runs its checks. Give `env` a variable of the test's own to tell
/// the child apart when the settings it needs could already be set outside.
///
/// ```no_run
/// #[test]
/// fn one_thread_a_call() {
///     if lstm_cpu::reran_in_child(module_path!(), "one_thread_a_call", &[
///         ("MY_TEST_CHILD", "1"),
///         ("BURN_LSTM_THREADS", "1"),
///     ]) {
///         return;
///     }
///     // ... the checks, in a process started with those settings
/// }
/// ```
pub fn reran_in_child(module: &str, test: &str, env: &[(&str, &str)]) -> bool {
    let in_child = env
        .iter()
        .all(|(key, value)| std::env::var_os(key).is_some_and(|v| v == *value));
    if !in_child {
        rerun_test_with_env(module, test, env);
    }
    !in_child
}

/// The name the test harness gives the test function `test` of `module` (a
/// `module_path!()`): the path without the crate's name, as `--exact` wants it.
fn harness_name(module: &str, test: &str) -> String {
    match module.split_once("::") {
        Some((_crate, inner)) => format!("{inner}::{test}"),
        None => test.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::harness_name;

    #[test]
    fn harness_names_drop_the_crate_and_keep_the_modules() {
        assert_eq!(harness_name("teams", "t"), "t");
        assert_eq!(harness_name("suite::golden_f32", "t"), "golden_f32::t");
        assert_eq!(harness_name("suite::a::b", "t"), "a::b::t");
    }
}
