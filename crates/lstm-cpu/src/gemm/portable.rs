//! The micro-kernel in plain Rust over fixed-size arrays, compiled once per instruction
//! set (and the only one off x86-64).

use crate::real::{Real, fmadd};

use super::micro::{Micro, load, store_pieces};
use super::params::BANK_DEPTH;

#[inline(always)]
pub(super) unsafe fn kernel_body<T: Real, const MR: usize, const NR: usize, const FMA: bool>(
    m: Micro<T>,
) {
    let mut acc = [[T::ZERO; NR]; MR];
    // SAFETY: reads of A's MR rows and B's packed rows, writes of C's rows, all within
    // the valid `Micro` `m` (the caller's promise).
    unsafe {
        if MR == 1 {
            // Matrix-vector: four banks hide the FMA latency a single chain would expose,
            // summed into the row every `BANK_DEPTH` k's (see there).
            let mut k0 = 0;
            while k0 < m.depth {
                let end = (k0 + BANK_DEPTH).min(m.depth);
                let mut banks = [[T::ZERO; NR]; 4];
                let mut k = k0;
                while k + 4 <= end {
                    for (u, bank) in banks.iter_mut().enumerate() {
                        let av = *m.a.add((k + u) * m.cs);
                        let bv = load::<T, NR>(m.b.add((k + u) * NR));
                        for j in 0..NR {
                            bank[j] = fmadd::<T, FMA>(av, bv[j], bank[j]);
                        }
                    }
                    k += 4;
                }
                while k < end {
                    let av = *m.a.add(k * m.cs);
                    let bv = load::<T, NR>(m.b.add(k * NR));
                    for j in 0..NR {
                        banks[0][j] = fmadd::<T, FMA>(av, bv[j], banks[0][j]);
                    }
                    k += 1;
                }
                for j in 0..NR {
                    acc[0][j] += (banks[0][j] + banks[1][j]) + (banks[2][j] + banks[3][j]);
                }
                k0 = end;
            }
        } else {
            for k in 0..m.depth {
                let bv = load::<T, NR>(m.b.add(k * NR));
                let a_col = m.a.add(k * m.cs);
                for (i, row) in acc.iter_mut().enumerate() {
                    let av = *a_col.add(i * m.rs);
                    for j in 0..NR {
                        row[j] = fmadd::<T, FMA>(av, bv[j], row[j]);
                    }
                }
            }
        }
        for (i, row) in acc.iter().enumerate() {
            let c_row = m.c.add(i * m.ldc);
            let base = if m.bias.is_null() {
                c_row as *const T
            } else {
                m.bias
            };
            store_pieces(&m, row, c_row, base);
        }
    }
}
