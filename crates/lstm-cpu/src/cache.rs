//! The size of a core's L2 cache, read once per process: how large a weight matrix the
//! forward and the backward may have every team member read at every step
//! (`forward::Split`).
//!
//! Why it is read and not fixed: the split by batch rows makes each member read all of
//! `W_hh` every step, which pays while `W_hh` streams from the member's own L2 and not
//! beyond: rows and units cross over near twice a core's L2, on machines of 512 KiB and
//! of 2 MiB of L2 alike (docs/dev/fused-cpu-measurements.md).

use std::sync::OnceLock;

/// What is assumed where the size cannot be read: a small current L2 (the split by rows
/// then stops at a `W_hh` of 1 MiB).
const FALLBACK_L2_BYTES: usize = 512 << 10;

/// Bytes of L2 (or of the unified level-2 cache) per core; `LSTM_CPU_L2_KIB` sets it
/// (benchmarks, tests), else Linux's `/sys/devices/system/cpu/cpu0/cache`, else 512 KiB.
pub(crate) fn l2_bytes() -> usize {
    static L2: OnceLock<usize> = OnceLock::new();
    *L2.get_or_init(|| {
        std::env::var("LSTM_CPU_L2_KIB")
            .ok()
            .and_then(|kib| kib.trim().parse::<usize>().ok())
            .map(|kib| kib << 10)
            .or_else(read_l2_bytes)
            .filter(|&bytes| bytes > 0)
            .unwrap_or(FALLBACK_L2_BYTES)
    })
}

/// The level-2 data or unified cache of CPU 0, from sysfs.
fn read_l2_bytes() -> Option<usize> {
    let dir = std::fs::read_dir("/sys/devices/system/cpu/cpu0/cache").ok()?;
    dir.filter_map(Result::ok).find_map(|entry| {
        let read = |name: &str| std::fs::read_to_string(entry.path().join(name)).ok();
        let level = read("level")?;
        let kind = read("type")?;
        if level.trim() != "2" || kind.trim() == "Instruction" {
            return None;
        }
        parse_size(&read("size")?)
    })
}

/// Parses sysfs's cache sizes: `2048K`, `1M`, or bytes.
fn parse_size(text: &str) -> Option<usize> {
    let text = text.trim();
    let (digits, unit) = match text.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        Some((at, _)) => text.split_at(at),
        None => (text, ""),
    };
    let value: usize = digits.parse().ok()?;
    match unit {
        "" => Some(value),
        "K" | "k" => Some(value << 10),
        "M" | "m" => Some(value << 20),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sysfs_sizes_parse() {
        assert_eq!(parse_size("2048K\n"), Some(2 << 20));
        assert_eq!(parse_size("1M"), Some(1 << 20));
        assert_eq!(parse_size("524288"), Some(512 << 10));
        assert_eq!(parse_size("12Q"), None);
        assert_eq!(parse_size(""), None);
    }

    #[test]
    fn some_size_is_always_known() {
        assert!(l2_bytes() >= 64 << 10, "{} bytes", l2_bytes());
    }
}
