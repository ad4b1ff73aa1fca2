//! What the fuzz targets share: a scratch file per process for the loaders, which read
//! paths, and a panic hook that reports only panics raised in this workspace's code.

use std::path::PathBuf;
use std::sync::Once;

/// The backend every target loads onto.
pub type B = burn_ndarray::NdArray<f32>;

/// Writes `data` to `name` in this process's scratch folder and returns its path.
pub fn scratch_file(name: &str, data: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("burn-lstm-fuzz-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("the scratch folder can be made");
    let path = dir.join(name);
    std::fs::write(&path, data).expect("the scratch file can be written");
    path
}

/// Makes a panic in this workspace's code (`crates/`) abort, so that libFuzzer reports
/// it, even where a loader catches it: the loaders wrap third-party decoders in
/// `catch_unwind` as a last defence (their panics become named errors), and a panic of
/// our own code is a bug either way. Third-party panics that a loader catches are let
/// through silently; one that escapes the target still aborts (libfuzzer-sys).
pub fn report_our_panics() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        std::panic::set_hook(Box::new(|info| {
            let ours = info.location().is_some_and(|at| {
                at.file().contains("crates/burn-lstm/") || at.file().contains("crates/lstm-cpu/")
            });
            if ours {
                eprintln!("{info}");
                std::process::abort();
            }
        }));
    });
}
