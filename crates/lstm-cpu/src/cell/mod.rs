//! The gate math of each cell, one file per cell: what a step does to one row's units
//! once the products are done, forward and backward. The loops around it (products,
//! threads, padding, the tape) are shared by every cell (`forward.rs`, `backward.rs`);
//! a new cell adds its file here and its branch where those loops call the gate math
//! (docs/architecture.md, "Adding a cell type").

pub(crate) mod gru;
pub(crate) mod lstm;
