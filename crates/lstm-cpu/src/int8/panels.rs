//! The int8 weights' packed layout, in which every kernel reads them: panels of
//! `panel_rows` output rows (16 for AVX-512 VNNI and the scalar kernel, 8 for AVX2);
//! within a panel, for each group of four inputs, `panel_rows × 4` bytes, row `j`'s four
//! inputs at `4j..4j + 4`. One vector load is then four inputs of every row of the panel,
//! the operand `vpdpbusd` (or `vpmaddubsw` and `vpmaddwd`) multiplies by four broadcast
//! activations, and each lane accumulates one output: no horizontal sums. Rows past the
//! matrix's last (in its last panel) and inputs past its last (in its last group) are
//! zeros, so they add nothing.

/// Inputs of one group: the four `u8 × i8` products each 32-bit lane adds.
pub(crate) const GROUP: usize = 4;

/// 64 bytes on a cache line of their own: the panels' storage, so that a kernel's
/// vector loads (32 or 64 bytes at multiples of that from a panel's start) never
/// straddle two lines, whatever address the allocator would give bytes (a plain
/// `Vec<i8>` above glibc's mmap threshold starts 16 bytes past a page: every AVX-512
/// load then touched two lines, and a process's speed depended on where its weights
/// landed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C, align(64))]
struct CacheLine([i8; 64]);

/// A `rows × cols` int8 matrix in panels of `panel_rows` rows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Panels {
    rows: usize,
    cols: usize,
    panel_rows: usize,
    /// `count() · panel_len()` bytes from the first line's start, zeros past them.
    lines: Vec<CacheLine>,
}

impl Panels {
    /// Packs the row-major `rows × cols` values.
    pub(crate) fn pack(values: &[i8], rows: usize, cols: usize, panel_rows: usize) -> Self {
        assert_eq!(values.len(), rows * cols, "int8 values of another shape");
        let mut packed = Self {
            rows,
            cols,
            panel_rows,
            lines: Vec::new(),
        };
        let len = packed.count() * packed.panel_len();
        packed.lines = vec![CacheLine([0; 64]); len.div_ceil(64)];
        for (n, row) in values.chunks_exact(cols.max(1)).take(rows).enumerate() {
            for (k, &v) in row.iter().enumerate() {
                let at = packed.index(n, k);
                packed.lines[at / 64].0[at % 64] = v;
            }
        }
        packed
    }

    /// Rows of the matrix.
    pub(crate) fn rows(&self) -> usize {
        self.rows
    }

    /// Inputs of each row.
    pub(crate) fn cols(&self) -> usize {
        self.cols
    }

    /// Rows of each panel.
    pub(crate) fn panel_rows(&self) -> usize {
        self.panel_rows
    }

    /// Panels: `rows / panel_rows`, rounded up.
    pub(crate) fn count(&self) -> usize {
        self.rows.div_ceil(self.panel_rows)
    }

    /// Groups of [`GROUP`] inputs: `cols / 4`, rounded up.
    pub(crate) fn groups(&self) -> usize {
        self.cols.div_ceil(GROUP)
    }

    /// Bytes of one panel.
    pub(crate) fn panel_len(&self) -> usize {
        self.groups() * self.panel_rows * GROUP
    }

    /// Every panel, first to last: `count() · panel_len()` bytes, from the start of a
    /// cache line.
    pub(crate) fn bytes(&self) -> &[i8] {
        let len = self.count() * self.panel_len();
        debug_assert!(len <= self.lines.len() * 64);
        // SAFETY: `lines` holds `lines.len() · 64` initialized bytes, contiguous (an
        // array of `[i8; 64]` with no padding: size 64, align 64), at least `len` of them
        // (`pack` allocates them so); the slice borrows `self`.
        unsafe { core::slice::from_raw_parts(self.lines.as_ptr().cast::<i8>(), len) }
    }

    /// Where value `(n, k)` is stored.
    #[inline]
    pub(crate) fn index(&self, n: usize, k: usize) -> usize {
        let (panel, row) = (n / self.panel_rows, n % self.panel_rows);
        panel * self.panel_len() + (k / GROUP * self.panel_rows + row) * GROUP + k % GROUP
    }

    /// The values, row-major.
    pub(crate) fn to_row_major(&self) -> Vec<i8> {
        (0..self.rows)
            .flat_map(|n| (0..self.cols).map(move |k| (n, k)))
            .map(|(n, k)| self.bytes()[self.index(n, k)])
            .collect()
    }
}
