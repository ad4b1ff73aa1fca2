//! The examples' integration tests in one test binary (each test file is a binary that
//! links Burn again: docs/ci.md).

mod data_parallel;
mod language_model;
mod sunspots;

use std::path::PathBuf;

/// Tests that seed a backend or train run one at a time: Burn's backends each keep one
/// process-wide random generator (NdArray's is shared by its f32 and f64 tensors), and
/// burn-collective registers its peers process-wide. Side by side, one test's draws
/// fell between another's seed and its model's initialisation (a flaky 19 % difference).
fn one_seeded_run_at_a_time() -> std::sync::MutexGuard<'static, ()> {
    static SEEDED_RUNS: std::sync::Mutex<()> = std::sync::Mutex::new(());
    SEEDED_RUNS.lock().unwrap_or_else(|e| e.into_inner())
}

/// A test's scratch directory and its path. The directory is removed when the `TempDir`
/// drops: callers keep it bound (`let (_dir, dir) = ...`, never `let (_, dir)`) while
/// they use the files.
pub(crate) fn scratch(name: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("lstm-examples-{name}-"))
        .tempdir()
        .unwrap();
    let path = dir.path().to_path_buf();
    (dir, path)
}
