//! Keeping freed memory in the process. A training step of the language model allocates
//! and frees tensors of the logits' size (`[bptt * batch, vocabulary]`, 51 MB with
//! WikiText-2's defaults) a dozen times. glibc's `malloc` serves blocks that large with a
//! fresh `mmap` and returns them with `munmap`, so every one of them is page-faulted in
//! again, page by page: measured on this example, a quarter of the step's time went to
//! the kernel's page faults. Serving them from the heap and not trimming it keeps the
//! pages mapped from one step to the next.

/// Makes glibc's `malloc` serve blocks up to 1 GiB from its heap and keep freed memory
/// (`M_MMAP_THRESHOLD`, `M_TRIM_THRESHOLD`); the process then holds its peak memory
/// until it exits. Returns whether both settings were taken. Does nothing (and returns
/// `false`) on other C libraries and systems.
pub fn keep_freed_memory() -> bool {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        // SAFETY: mallopt only changes glibc's allocation thresholds; it may be called at
        // any time, and memory allocated before keeps being freed correctly.
        unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, 1 << 30) == 1
                && libc::mallopt(libc::M_TRIM_THRESHOLD, i32::MAX) == 1
        }
    }
    #[cfg(not(all(target_os = "linux", target_env = "gnu")))]
    {
        false
    }
}
