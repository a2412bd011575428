//! [`super::gemm_channels_last`]'s staging of a slice in shared memory (rows of
//! [`SLICE_RUNS`] runs, each at its swizzled place), in a file below it and
//! [`super::gemm_tf32_mma`] because both address the staged runs.

use cubecl::prelude::*;

use super::channels_last::BF16_RUN;
use super::tensor_tile::SLICE_DEPTH;

/// Runs across a slice's depth (32 bf16 depths, 16 TF32 ones).
pub const SLICE_RUNS: u32 = SLICE_DEPTH / BF16_RUN;

/// Where run `run` of staged row `row` lies, in runs (see [`super::gemm_channels_last`]'s
/// notes).
#[cube]
pub(crate) fn swizzled(row: u32, run: u32) -> u32 {
    row * SLICE_RUNS + (run ^ ((row / 2) % SLICE_RUNS))
}
