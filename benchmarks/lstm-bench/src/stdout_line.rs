//! One line of output on stdout, where the reader may have gone (`... | head -1`):
//! `println!` panics there, with a backtrace, once per line it cannot write. Shared by
//! `lstm-bench` and `cpu-peak` (each includes this file).

use std::io::Write;

/// Writes `line` and a newline, and flushes.
pub fn write_line(out: &mut impl Write, line: impl std::fmt::Display) -> std::io::Result<()> {
    writeln!(out, "{line}")?;
    out.flush()
}

/// [`write_line`] on stdout.
pub fn print_line(line: impl std::fmt::Display) -> std::io::Result<()> {
    write_line(&mut std::io::stdout().lock(), line)
}

/// [`print_line`] for the binaries whose reader may stop early (`runner-wake | head -2`):
/// a reader that has gone ends the run quietly, with exit code 0.
// lstm-bench's own `main` includes this file too but ends with an error instead: its
// one line is the result.
#[allow(dead_code)]
pub fn print_line_or_end(line: impl std::fmt::Display) {
    if print_line(line).is_err() {
        std::process::exit(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer whose reader has gone, as a closed pipe.
    struct Closed;

    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_line_is_written_whole_and_a_closed_reader_is_an_error() {
        let mut out = Vec::new();
        write_line(
            &mut out,
            serde_json::json!({"what": "fma-peak", "gflops": 1.5}),
        )
        .unwrap();
        assert_eq!(
            String::from_utf8(out).unwrap(),
            "{\"gflops\":1.5,\"what\":\"fma-peak\"}\n"
        );
        let error = write_line(&mut Closed, "x").unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::BrokenPipe);
    }
}
