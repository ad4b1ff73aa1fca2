//! Lines on stdout for the examples' command-line tools ([`say!`](crate::say)). Where
//! stdout is a closed pipe (`| head`) they go silent and the run goes on (its files are
//! still written), where `println!` panics; another write error (a full disk) ends the
//! program with an error.

use std::io::Write as _;
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once stdout is a closed pipe.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes `line` and a line end on stdout (see the module's documentation).
pub fn line(line: std::fmt::Arguments) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    match writeln!(std::io::stdout(), "{line}") {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => {
            CLOSED.store(true, Ordering::Relaxed)
        }
        Err(e) => {
            let program = std::env::args_os().next().unwrap_or_default();
            let name = std::path::Path::new(&program)
                .file_stem()
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            eprintln!("{name}: stdout: {e}");
            std::process::exit(1);
        }
    }
}

/// `println!` for the examples' tools: silent once stdout is a closed pipe, an error
/// exit on another write error ([`line()`](crate::stdout::line)).
#[macro_export]
macro_rules! say {
    () => {
        $crate::stdout::line(format_args!(""))
    };
    ($($arg:tt)*) => {
        $crate::stdout::line(format_args!($($arg)*))
    };
}
