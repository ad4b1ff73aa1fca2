//! Running one test again in a child process of its own test binary, with an
//! environment of its own: for settings that hold for a whole process once made (the
//! float type of Flex's one device, see `flex_f64`), which a test binary sharing a
//! process between many tests cannot give one of them.

/// Runs the test function `test` of the module `module` (the caller's `module_path!()`)
/// again in a child process of this test binary with `env` set, prints the child's
/// output (one line per golden case, say) and panics with it if the test failed there.
pub fn rerun_with_env(module: &str, test: &str, env: &[(&str, &str)]) {
    // `module_path!()` starts with the crate (the test binary); the harness names tests
    // by the path below it.
    let name = match module.split_once("::") {
        Some((_binary, inner)) => format!("{inner}::{test}"),
        None => test.to_string(),
    };
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut command = std::process::Command::new(exe);
    command.args([
        name.as_str(),
        "--exact",
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
    print!("{text}");
    assert!(
        output.status.success() && text.contains("1 passed"),
        "{name} with {env:?} failed:\n{text}"
    );
}
