//! Runnable examples live in `examples/`; this library is empty.
