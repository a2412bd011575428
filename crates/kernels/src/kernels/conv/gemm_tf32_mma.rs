//! A warp's TF32 products on the tensor cores through `mma.m16n8k8`, for the channels-last
//! GEMM ([`super::gemm_channels_last`]), whose staging holds each row's slice as runs of
//! four fp32 depths (16 bytes).
//!
//! `ldmatrix` moves only 16-bit values, so each lane loads its own operands, a whole run at
//! a time. The sum over a slice's depth does not depend on the order of its terms, so value
//! e of run t counts as the slice's depth t + 4e, in both operands alike: a lane of group g
//! (lane / 4) and index t (lane % 4) then finds in run t of a block's row g the A values of
//! both 8-deep steps of the slice (registers a0 and a2 of each), in run t of its row g + 8
//! their a1 and a3, and in run t of a column block's column g their B values (b0 and b1):
//! one 16-byte load for both steps, where `ldmatrix` takes one a step. The eight lanes of a
//! load's phase read two whole staged rows, 128 bytes, so the loads are free of bank
//! conflicts under any swizzle of the runs within a row.
//!
//! The operands are rounded to TF32 (nearest) as they go into registers, as cuDNN rounds
//! them; the sums stay fp32.

use cubecl::prelude::*;

use super::gemm_bf16_mma::{Two, lane_of_unit};
use super::staged_runs::{SLICE_RUNS, swizzled};
use super::tensor_tile::{
    MMA_COLUMNS, PRODUCT_SIDE, TF32_PRODUCT_DEPTH, TensorTile, WARP_MMA_COLUMNS,
};

/// One register of a TF32 operand.
pub(crate) type One = Const<1>;

/// Runs of a staged row the lanes load at once: the slice's, one a lane of a group.
const LANE_RUNS: u32 = 4;
const _: () = assert!(SLICE_RUNS == LANE_RUNS);

/// The one `mma` shape of the TF32 products (here and in [`super::gemm_weight_grad_tf32`]):
/// 16 rows × 8 columns × 8 deep, TF32 (`M`) operands and fp32 (`F`) sums, whose sums lie in
/// a lane's registers as the bf16 `mma`'s do ([`super::gemm_bf16_mma::store_mma_sums`]
/// stores both).
#[cube]
pub(crate) fn tf32_mma<F: Float, M: Float>() -> cmma::MmaDefinition<M, M, F> {
    cmma::MmaDefinition::<M, M, F>::new(
        PRODUCT_SIDE as usize,
        MMA_COLUMNS as usize,
        TF32_PRODUCT_DEPTH as usize,
    )
}

/// Where this lane's runs start in the staging: run t of row g of the warp's first row
/// block, and of column g of its first column block (see the module's notes). The other
/// blocks, and row g + 8, lie whole rows further at the same swizzle, since a run's swizzle
/// changes every two rows over four and the blocks start at multiples of 8.
#[derive(CubeType)]
pub(crate) struct LaneRuns {
    patches: u32,
    filters: u32,
}

#[cube]
impl LaneRuns {
    pub(crate) fn of_this_lane(
        warp_row: u32,
        warp_col: u32,
        #[comptime] tile: TensorTile,
    ) -> LaneRuns {
        let lane = lane_of_unit();
        let group = lane / LANE_RUNS;
        let run = lane % LANE_RUNS;
        LaneRuns {
            patches: swizzled(warp_row + group, run),
            filters: comptime!(tile.rows() * SLICE_RUNS) + swizzled(warp_col + group, run),
        }
    }
}

/// This warp's products of one staged slice (runs of four fp32 values, `S`) through
/// `mma.m16n8k8` in TF32 (`M`), into `sums` (row block-major, as the bf16 products'): its
/// row blocks of 16 times its [`WARP_MMA_COLUMNS`] column blocks of 8, 16 deep in two steps.
#[cube]
pub(crate) fn tf32_mma_slice<F: Float, S: Float, M: Float, V: Size>(
    staged: &SharedMemory<Vector<S, V>>,
    sums: &mut Sequence<Array<Vector<F, Two>>>,
    runs: &LaneRuns,
    #[comptime] tile: TensorTile,
) {
    let mma = tf32_mma::<F, M>();
    let row_blocks = comptime!(tile.warp_row_blocks as usize);
    // Rows g and g + 8 of each row block, column g of each column block.
    let mut rows = Array::<Vector<S, V>>::new(comptime!(2 * row_blocks));
    #[unroll]
    for i in 0..row_blocks {
        let at = runs.patches + comptime!(i as u32 * PRODUCT_SIDE * SLICE_RUNS);
        rows[2 * i] = staged[at as usize];
        rows[2 * i + 1] = staged[(at + comptime!(8 * SLICE_RUNS)) as usize];
    }
    let mut columns = Array::<Vector<S, V>>::new(WARP_MMA_COLUMNS as usize);
    #[unroll]
    for j in 0..WARP_MMA_COLUMNS as usize {
        let at = runs.filters + comptime!(j as u32 * MMA_COLUMNS * SLICE_RUNS);
        columns[j] = staged[at as usize];
    }
    #[unroll]
    for step in 0..2usize {
        let e = 2 * step;
        let mut patches = Sequence::<Array<Vector<M, One>>>::new();
        #[unroll]
        for i in 0..row_blocks {
            let (top, bottom) = (rows[2 * i], rows[2 * i + 1]);
            let mut a = Array::<Vector<M, One>>::new(4usize);
            a[0] = Vector::new(M::cast_from(top[e]));
            a[1] = Vector::new(M::cast_from(bottom[e]));
            a[2] = Vector::new(M::cast_from(top[e + 1]));
            a[3] = Vector::new(M::cast_from(bottom[e + 1]));
            patches.push(a);
        }
        #[unroll]
        for j in 0..WARP_MMA_COLUMNS as usize {
            let column = columns[j];
            let mut b = Array::<Vector<M, One>>::new(2usize);
            b[0] = Vector::new(M::cast_from(column[e]));
            b[1] = Vector::new(M::cast_from(column[e + 1]));
            #[unroll]
            for i in 0..row_blocks {
                mma.execute_inplace(
                    patches.index(comptime!(i)),
                    &b,
                    sums.index_mut(comptime!(i * WARP_MMA_COLUMNS as usize + j)),
                );
            }
        }
    }
}
