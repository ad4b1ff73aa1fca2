//! File decoders run on a stack that holds their deepest nesting: Burn's record
//! decoders (`module/checkpoint.rs`, `module/model_checkpoint.rs`) and the HDF5 reads
//! of the Keras importer (`import/hdf5.rs`, whose n-bit filter parameters nest).
//!
//! Burn 0.21's MessagePack decoder (rmp-serde) recurses once per nesting level of the
//! file, up to its own limit of 1,024 levels (serde_json's is 128; bincode nests only as
//! deep as the record's types), in the typed read and again when, after an error, Burn
//! reads the file's metadata alone. A value Burn passes over (a field the record does
//! not have) is walked to its end the same way. A damaged or hostile file nested 1,000
//! deep overflowed the 2 MiB stack of a debug build's thread, and a stack overflow
//! aborts the process: no `catch_unwind` can turn it into an error. So these decode on
//! a stack of [`DECODER_STACK_BYTES`], switched to on the caller's own thread
//! (`stacker`): the tensors are built where they would have been, and nothing needs to
//! cross threads.

/// Stack the decoders run on: 1,024 levels at up to 32 KiB each (a debug build decoded
/// 1,023 levels within 3 MiB; a release build 1,000 within 512 KiB). A mapping: on
/// Linux (with the kernel's default overcommit) only the pages a decode touches become
/// resident, and it is unmapped after the decode.
const DECODER_STACK_BYTES: usize = 32 << 20;

/// `decode()` on a fresh stack of [`DECODER_STACK_BYTES`], on the caller's thread. On
/// the caller's own stack where the target cannot switch stacks, on WebAssembly (where
/// the stack would come from linear memory, which never shrinks), and where the new
/// stack cannot be mapped (`stacker` panics then, before `decode` starts: an address
/// space limit, say; the panic hook still prints `stacker`'s message, as for any panic
/// caught; checked by hand under `ulimit -v`). A panic in `decode` reaches the caller as
/// it would have there.
pub(crate) fn on_decoder_stack<T>(decode: impl FnOnce() -> T) -> T {
    if cfg!(target_family = "wasm") {
        return decode();
    }
    let mut decode = Some(decode);
    let switched = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        stacker::grow(DECODER_STACK_BYTES, || {
            decode.take().expect("the decode runs once")()
        })
    }));
    match (switched, decode) {
        (Ok(value), _) => value,
        // The stack could not be set up: `decode` never ran.
        (Err(_), Some(decode)) => decode(),
        (Err(panic), None) => std::panic::resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Recursion that a 2 MiB stack cannot hold (about 4 MiB of frames) completes, on
    /// the caller's thread; a panic comes back to the caller.
    #[test]
    fn deep_recursion_fits_its_stack_on_the_callers_thread() {
        #[inline(never)]
        fn nest(levels: usize) -> usize {
            let frame = std::hint::black_box([(levels % 200) as u8; 4096]);
            if levels == 0 {
                0
            } else {
                1 + nest(levels - 1) + usize::from(frame[levels % 4096] == 255)
            }
        }
        let caller = std::thread::current().id();
        let (levels, thread) = on_decoder_stack(|| (nest(1000), std::thread::current().id()));
        assert_eq!((levels, thread), (1000, caller));
        let panicked = std::panic::catch_unwind(|| on_decoder_stack(|| panic!("damaged")));
        let message = panicked.unwrap_err();
        assert_eq!(message.downcast_ref::<&str>(), Some(&"damaged"));
    }
}
