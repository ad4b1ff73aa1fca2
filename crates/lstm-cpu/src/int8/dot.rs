//! The raw integer sums of a quantized product, tile by tile: `Σ_k a[r, k] · w[n, k]`
//! of a few rows of `u8` activations against a few panels of `i8` weights
//! ([`Panels`](crate::int8::panels::Panels)), by the kernel this CPU runs for the weights' [`QuantLevels`]; every
//! kernel exact (the sums stay within `i32` up to
//! [`MAX_DEPTH`](crate::int8::MAX_DEPTH) inputs).

use std::ops::Range;
use std::sync::OnceLock;

use crate::int8::QuantLevels;
use crate::int8::panels::GROUP;
use crate::int8::tile::{Output, Tile, TileOutputs, group_of};
use crate::simd::{Isa, isa};

/// The kernels of the raw sums.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum DotKernel {
    /// One product at a time, in `i32`: the reference.
    Scalar,
    /// AVX2: `vpmaddubsw` adds pairs of `u8 × i8` products into `i16` lanes, `vpmaddwd`
    /// widens them to `i32`. The pair sums saturate past `i16`, so only weights of
    /// [`QuantLevels::Reduced`] run it (2 · 255 · 63 = 32,130).
    Avx2,
    /// AVX-VNNI: the 256-bit `vpdpbusd`, four `u8 × i8` products into each of 8 `i32`
    /// lanes, on the AVX2 kernel's panels.
    AvxVnni,
    /// AVX-512 VNNI: `vpdpbusd`, four `u8 × i8` products into each of 16 `i32` lanes.
    Avx512Vnni,
}

/// How a product's rows go in a kernel's tiles ([`DotKernel::row_tiles`]): groups of
/// tiles of the same rows, first to last, covering every row once.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RowTiles {
    kernel: DotKernel,
    rows: usize,
    /// `(tiles, rows of each)`.
    groups: [(usize, usize); 3],
}

impl RowTiles {
    /// The groups of tiles: `(tiles, rows of each)`, first to last.
    pub(crate) fn groups(&self) -> [(usize, usize); 3] {
        self.groups
    }

    /// Each tile's rows, first to last.
    pub(crate) fn iter(&self) -> impl Iterator<Item = Range<usize>> {
        self.groups
            .into_iter()
            .flat_map(|(count, size)| std::iter::repeat_n(size, count))
            .scan(0, |start, size| {
                let tile = *start..*start + size;
                *start += size;
                Some(tile)
            })
    }
}

/// What this CPU runs, read once (`LSTM_CPU_ISA` caps it as it caps the f32 kernels;
/// `LSTM_CPU_VNNI=off` leaves out both VNNI kernels, to run and time the AVX2 kernel of
/// CPUs without VNNI on one with it).
#[derive(Clone, Copy)]
struct Detected {
    avx2: bool,
    avx_vnni: bool,
    vnni: bool,
}

fn detected() -> Detected {
    static DETECTED: OnceLock<Detected> = OnceLock::new();
    *DETECTED.get_or_init(|| {
        let isa = isa();
        #[cfg(target_arch = "x86_64")]
        let vnni_on = std::env::var("LSTM_CPU_VNNI").as_deref() != Ok("off");
        #[cfg(target_arch = "x86_64")]
        let vnni = vnni_on
            && isa == Isa::Avx512
            && std::is_x86_feature_detected!("avx512bw")
            && std::is_x86_feature_detected!("avx512vnni");
        #[cfg(target_arch = "x86_64")]
        let avx_vnni = vnni_on && isa != Isa::Baseline && std::is_x86_feature_detected!("avxvnni");
        #[cfg(not(target_arch = "x86_64"))]
        let (vnni, avx_vnni) = (false, false);
        Detected {
            avx2: cfg!(target_arch = "x86_64") && isa != Isa::Baseline,
            avx_vnni,
            vnni,
        }
    })
}

impl DotKernel {
    /// The kernels this CPU can run, the scalar one first (each is checked against it).
    #[cfg(test)]
    pub(crate) fn available() -> Vec<Self> {
        let Detected {
            avx2,
            avx_vnni,
            vnni,
        } = detected();
        [
            (Self::Scalar, true),
            (Self::Avx2, avx2),
            (Self::AvxVnni, avx_vnni),
            (Self::Avx512Vnni, vnni),
        ]
        .into_iter()
        .filter_map(|(kernel, runs)| runs.then_some(kernel))
        .collect()
    }

    /// The name [`kernel_name`] reports.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Scalar => "scalar",
            Self::Avx2 => "avx2",
            Self::AvxVnni => "avx-vnni",
            Self::Avx512Vnni => "avx512-vnni",
        }
    }

    /// The widest weight range whose sums this kernel computes exactly.
    pub(crate) fn levels(self) -> QuantLevels {
        match self {
            Self::Avx2 => QuantLevels::Reduced,
            Self::Scalar | Self::AvxVnni | Self::Avx512Vnni => QuantLevels::Full,
        }
    }

    /// Rows of the weight panels this kernel reads: the `i32` lanes of its vector.
    pub(crate) fn panel_rows(self) -> usize {
        match self {
            Self::Avx2 | Self::AvxVnni => 8,
            Self::Scalar | Self::Avx512Vnni => 16,
        }
    }

    /// Rows of one tile: enough independent sums (rows × panels) to cover the latency
    /// of the multiply-add (5 cycles, two issued a cycle: 10 or more), as many as the
    /// vector registers hold beside the operands (16 `ymm`: 6 rows × 2 panels, the 2
    /// panels' weights and one broadcast; 32 `zmm`: 4 × 4). AVX2's multiply-add takes
    /// two more registers (the `i16` pair sums and the ones that widen them), so its
    /// tiles keep 4 rows.
    pub(crate) fn tile_rows(self) -> usize {
        match self {
            Self::AvxVnni => 6,
            Self::Scalar | Self::Avx2 | Self::Avx512Vnni => 4,
        }
    }

    /// How a product's `rows` activation rows go in tiles: as few tiles as
    /// [`Self::tile_rows`] allows, their rows evened out (10 rows in tiles of 4: 4, 3
    /// and 3, not 4, 4 and a latency-bound 2). AVX-VNNI's tiles of 3, 5 and 6 rows keep
    /// 12 or more sums going (3 rows in two sets of sums) where 4 rows keep 8, whose
    /// multiply-adds wait on each other: its rows go in tiles of 6 with a tail of 5 and
    /// 3 rows (8 rows: 5 and 3, not 4 and 4) or 5 and 5, and 4 rows of `depth` 128 or
    /// more in 3 and 1 (a row's tile keeps 8 sums in 4 sets; over fewer inputs the
    /// second tile's set-up cost more than it saved). Computed once per part of a
    /// product (integer divisions), not per block.
    pub(crate) fn row_tiles(self, rows: usize, depth: usize) -> RowTiles {
        let most = self.tile_rows();
        let groups = if self == Self::AvxVnni && rows == 4 && depth >= 128 {
            [(1, 3), (1, 1), (0, 0)]
        } else if self == Self::AvxVnni && rows > most {
            let (sixes, rest) = (rows / 6, rows % 6);
            match rest {
                2 => [(sixes - 1, 6), (1, 5), (1, 3)],
                4 => [(sixes - 1, 6), (2, 5), (0, 0)],
                rest => [(sixes, 6), (usize::from(rest > 0), rest), (0, 0)],
            }
        } else {
            let tiles = rows.div_ceil(most);
            let (base, larger) = rows
                .checked_div(tiles)
                .map_or((0, 0), |base| (base, rows % tiles));
            [(larger, base + 1), (tiles - larger, base), (0, 0)]
        };
        RowTiles {
            kernel: self,
            rows,
            groups,
        }
    }

    /// Panels of one tile: with [`Self::tile_rows`] rows, as many sums as the vector
    /// registers hold beside the operands.
    pub(crate) fn tile_panels(self) -> usize {
        match self {
            Self::Avx2 | Self::AvxVnni => 2,
            Self::Scalar | Self::Avx512Vnni => 4,
        }
    }

    /// `sums[r · width + j] = Σ_k tile.a[r · depth + k] · w(j, k)` for each row `r` of
    /// the tile and each row `j` of its panels (`width = panels · panel_rows`), each
    /// weight in `-m..=m` for `m` of [`Self::levels`].
    ///
    /// # Panics
    /// When the tile is larger than the kernel's, or `a`, `w` or `sums` is shorter than
    /// the tile.
    pub(crate) fn sums(self, tile: &Tile<'_>, sums: &mut [i32]) {
        self.check(tile, sums.len());
        match self {
            Self::Scalar => scalar(tile, sums),
            Self::Avx2 => avx2(tile, sums),
            Self::AvxVnni => avx_vnni(tile, sums),
            Self::Avx512Vnni => vnni(tile, sums),
        }
    }

    /// Panics unless the tile fits this kernel and `sums` values hold its sums.
    fn check(self, tile: &Tile<'_>, sums: usize) {
        let width = tile.panels * self.panel_rows();
        assert!(
            (1..=self.tile_rows()).contains(&tile.rows)
                && (1..=self.tile_panels()).contains(&tile.panels),
            "an int8 tile of {} rows and {} panels",
            tile.rows,
            tile.panels
        );
        assert!(
            self.holds(tile) && sums >= tile.rows * width,
            "int8 tile operands shorter than the tile"
        );
    }

    /// Whether a tile's (or a part's) operands hold all of its rows and panels, in
    /// panels of this kernel's rows.
    fn holds(self, tile: &Tile<'_>) -> bool {
        tile.a.len() >= tile.rows * tile.depth
            && tile.w.len() >= tile.panels * tile.panel_len
            && tile.panel_len >= tile.depth.div_ceil(GROUP) * GROUP * self.panel_rows()
    }
}

impl DotKernel {
    /// Whether [`Self::part_outputs`] finishes this kernel's tiles in its registers
    /// (the vector kernels; the scalar reference's sums go through the product's
    /// epilogue loop).
    pub(crate) fn finishes_in_registers(self) -> bool {
        self != Self::Scalar
    }

    /// The outputs of a part of a product: all of `part.rows` activation rows against
    /// its panels, a block of [`Self::tile_panels`] at a time, each block's rows walked
    /// in `tiles` (this kernel's [`Self::row_tiles`] of the part's rows) and each tile
    /// finished in the kernel's registers; for a kernel that
    /// [`Self::finishes_in_registers`]. One call per part: the checks, the dispatch and
    /// the loops' set-up once for all of its blocks (per block they took a quarter of
    /// a product of 3 rows by 800 × 200 on 256-bit vectors, 2026-11-27).
    ///
    /// # Safety
    /// `outputs.out` points at the part's rows of `outputs.stride` values, with
    /// `outputs.cols` valid outputs each, that no other thread touches meanwhile.
    ///
    /// # Panics
    /// For a kernel that does not finish in registers, tiles of another kernel or
    /// number of rows, a panel without valid outputs, or operands or slices of
    /// `outputs` shorter than the part.
    pub(crate) unsafe fn part_outputs(
        self,
        part: &Tile<'_>,
        tiles: &RowTiles,
        outputs: &TileOutputs<'_>,
    ) {
        let cols = outputs.cols;
        assert!(
            self.finishes_in_registers() && tiles.kernel == self && tiles.rows == part.rows,
            "an int8 part of {} rows for {self:?}, its tiles {tiles:?}",
            part.rows,
        );
        assert!(
            self.holds(part)
                && part.panels > 0
                && (part.panels - 1) * self.panel_rows() < cols
                && cols <= part.panels * self.panel_rows()
                && outputs.a_scales.len() >= part.rows
                && outputs.w_scales.len() >= cols
                && outputs.zero_point.len() >= cols
                && match outputs.output {
                    Output::Set(Some(bias)) => bias.len() >= cols,
                    Output::Set(None) | Output::Add => true,
                },
            "int8 part operands or outputs unlike its {} panels and {cols} outputs a row",
            part.panels
        );
        let (tiles, tile_panels) = (tiles.groups(), self.tile_panels());
        #[cfg(target_arch = "x86_64")]
        // SAFETY: each kernel runs only where the CPU reported its features (AVX-512
        // VNNI: avx512f, avx512bw, avx512vnni; AVX-VNNI: avx2, avxvnni; AVX2: avx2); the
        // part's operands and the outputs' slices were checked, every panel has valid
        // outputs, the block width is the kernel's, its tiles are the kernel's for the
        // part's rows (`row_tiles`: at most `tile_rows` rows each, covering the rows
        // once), and `outputs.out` is the caller's promise.
        unsafe {
            use crate::int8::{avx256, vnni};
            match self {
                Self::AvxVnni => avx256::avx_vnni::part_outputs(part, outputs, tiles, tile_panels),
                Self::Avx2 => avx256::avx2::part_outputs(part, outputs, tiles, tile_panels),
                Self::Avx512Vnni => vnni::part_outputs(part, outputs, tiles, tile_panels),
                Self::Scalar => unreachable!("the scalar kernel's sums go through the epilogue"),
            }
        }
        #[cfg(not(target_arch = "x86_64"))]
        unreachable!("the vector kernels are never chosen off x86_64")
    }
}

/// The fastest kernel this CPU runs exactly for weights of `levels`.
pub(crate) fn dot_kernel(levels: QuantLevels) -> DotKernel {
    let Detected {
        avx2,
        avx_vnni,
        vnni,
    } = detected();
    [
        (DotKernel::Avx512Vnni, vnni),
        (DotKernel::AvxVnni, avx_vnni),
        (DotKernel::Avx2, avx2),
    ]
    .into_iter()
    .find(|&(kernel, runs)| runs && kernel.levels().max() >= levels.max())
    .map_or(DotKernel::Scalar, |(kernel, _)| kernel)
}

/// The kernel the int8 product runs in this process for weights quantized to `levels`:
/// `avx512-vnni`, `avx-vnni`, `avx2` (weights of [`QuantLevels::Reduced`] only) or
/// `scalar`.
pub fn kernel_name(levels: QuantLevels) -> &'static str {
    dot_kernel(levels).name()
}

/// The weight range whose products run fastest on this CPU: [`QuantLevels::Full`]
/// where a VNNI kernel runs (AVX-512 VNNI or AVX-VNNI) or no vector kernel does,
/// [`QuantLevels::Reduced`] where AVX2 without VNNI is the widest.
pub fn fastest_levels() -> QuantLevels {
    match dot_kernel(QuantLevels::Reduced) {
        DotKernel::Avx2 => QuantLevels::Reduced,
        DotKernel::Scalar | DotKernel::AvxVnni | DotKernel::Avx512Vnni => QuantLevels::Full,
    }
}

/// The reference: each sum over the panel layout, one product at a time, in `i32`.
fn scalar(tile: &Tile<'_>, sums: &mut [i32]) {
    // `DotKernel::Scalar.panel_rows()`.
    const ROWS: usize = 16;
    let width = tile.panels * ROWS;
    for r in 0..tile.rows {
        let a = &tile.a[r * tile.depth..][..tile.depth];
        for p in 0..tile.panels {
            let panel = &tile.w[p * tile.panel_len..][..tile.panel_len];
            let mut acc = [0i32; ROWS];
            for (g, block) in panel.chunks_exact(ROWS * GROUP).enumerate() {
                let x = group_of(a, g * GROUP).to_le_bytes();
                for (acc, weights) in acc.iter_mut().zip(block.chunks_exact(GROUP)) {
                    for (&x, &v) in x.iter().zip(weights) {
                        *acc += i32::from(x) * i32::from(v);
                    }
                }
            }
            sums[r * width + p * ROWS..][..ROWS].copy_from_slice(&acc);
        }
    }
}

/// [`DotKernel::Avx512Vnni`]'s sums.
#[cfg(target_arch = "x86_64")]
fn vnni(tile: &Tile<'_>, sums: &mut [i32]) {
    // SAFETY: this kernel is only chosen (`dot_kernel`) or listed (`available`) where
    // the CPU reported avx512f, avx512bw and avx512vnni; `sums` checked the tile's size
    // and its operands' lengths.
    unsafe { crate::int8::vnni::sums(tile, sums) }
}

/// [`DotKernel::Avx2`]'s sums.
#[cfg(target_arch = "x86_64")]
fn avx2(tile: &Tile<'_>, sums: &mut [i32]) {
    // SAFETY: this kernel is only chosen (`dot_kernel`) or listed (`available`) where
    // the CPU reported avx2 (`Isa::Avx2` or wider); `sums` checked the tile's size and
    // its operands' lengths.
    unsafe { crate::int8::avx256::avx2::sums(tile, sums) }
}

/// [`DotKernel::AvxVnni`]'s sums.
#[cfg(target_arch = "x86_64")]
fn avx_vnni(tile: &Tile<'_>, sums: &mut [i32]) {
    // SAFETY: this kernel is only chosen (`dot_kernel`) or listed (`available`) where
    // the CPU reported avx2 and avxvnni; `sums` checked the tile's size and its
    // operands' lengths.
    unsafe { crate::int8::avx256::avx_vnni::sums(tile, sums) }
}

#[cfg(not(target_arch = "x86_64"))]
fn avx_vnni(_: &Tile<'_>, _: &mut [i32]) {
    unreachable!("AVX-VNNI is never chosen off x86_64")
}

#[cfg(not(target_arch = "x86_64"))]
fn vnni(_: &Tile<'_>, _: &mut [i32]) {
    unreachable!("AVX-512 VNNI is never chosen off x86_64")
}

#[cfg(not(target_arch = "x86_64"))]
fn avx2(_: &Tile<'_>, _: &mut [i32]) {
    unreachable!("AVX2 is never chosen off x86_64")
}
