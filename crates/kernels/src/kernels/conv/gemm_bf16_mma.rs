//! A warp's bf16 products on the tensor cores through `ldmatrix` and `mma.m16n8k16`
//! (CubeCL's manual matrix API), shared by the forward, channels-last and weight-gradient
//! GEMMs: `ldmatrix .trans` reads a staged 8 × 8 block in one instruction and transposes it
//! into the operand's registers, where a `wmma` fragment load takes a generic `LD` plus a
//! `MOVM` transpose per register (`docs/perf-log/2026-11-28-bf16-ldmatrix.md`).

use cubecl::prelude::*;

use super::gemm::Four;
use super::tensor_tile::{
    BF16_PRODUCT_DEPTH, MMA_COLUMNS, PRODUCT_SIDE, SLICE_DEPTH, TensorTile, WARP_MMA_COLUMNS,
    WARP_PRODUCTS,
};

/// Two adjacent values: a register of two bf16 operands, or two of an `mma`'s fp32 sums.
pub(crate) type Two = Const<2>;
/// Lanes of a CUDA warp: the matrix instructions' unit of work, fixed on every GPU with
/// matrix units that these kernels run on.
pub(crate) const WARP_LANES: u32 = 32;

/// The one `mma` shape the bf16 products run (in every GEMM that uses this file): 16 rows ×
/// 8 columns × 16 deep, bf16 (`S`) operands and fp32 (`F`) sums. Their loads, products and
/// the store of their sums must all name this same shape.
#[cube]
pub(crate) fn bf16_mma<F: Float, S: Float>() -> cmma::MmaDefinition<S, S, F> {
    cmma::MmaDefinition::<S, S, F>::new(
        PRODUCT_SIDE as usize,
        MMA_COLUMNS as usize,
        BF16_PRODUCT_DEPTH as usize,
    )
}

/// This unit's warp in a cube of one dimension.
#[cube]
pub(crate) fn warp_of_unit() -> u32 {
    UNIT_POS_X / WARP_LANES
}

/// This unit's lane in its warp, in a cube of one dimension. Why not `UNIT_POS_PLANE`: on
/// CUDA that is the absolute position modulo the runtime's warp size, a division that the
/// compiler would redo in every slice of the products.
#[cube]
pub(crate) fn lane_of_unit() -> u32 {
    UNIT_POS_X % WARP_LANES
}

/// Which 16-byte run of a transposed (depth-major) staging this lane names in the
/// `ldmatrix .trans` loads of one 16-deep `mma` step. The A operand is four 8 × 8 blocks in
/// one load: depths 0–7 of rows 0–7, then of rows 8–15, then depths 8–15 of each, the order
/// of its registers; the lane's run starts at (`a_depth`, `a_row`). The B operand is two
/// blocks, depths 0–7 then 8–15 of 8 columns: the lane's run is at depth `b_depth`.
#[derive(CubeType)]
pub(crate) struct LdmatrixRuns {
    pub a_depth: u32,
    pub a_row: u32,
    pub b_depth: u32,
}

#[cube]
impl LdmatrixRuns {
    pub(crate) fn of_this_lane() -> LdmatrixRuns {
        let lane = lane_of_unit();
        LdmatrixRuns {
            a_depth: lane % 8 + 8 * (lane / 16),
            a_row: 8 * ((lane / 8) % 2),
            // Lanes 16–31 take no part in a two-block load, but must name a valid address.
            b_depth: lane % 16,
        }
    }
}

/// A warp's `count` sums of 16 × 8 `mma`s at zero: four fp32 values a lane, as two pairs.
#[cube]
pub(crate) fn mma_accumulators<F: Float>(
    #[comptime] count: u32,
) -> Sequence<Array<Vector<F, Two>>> {
    let mut sums = Sequence::new();
    #[unroll]
    for _ in 0..count {
        let mut sum = Array::<Vector<F, Two>>::new(2usize);
        #[unroll]
        for pair in 0..2usize {
            sum[pair] = Vector::new(F::new(0.0));
        }
        sums.push(sum);
    }
    sums
}

/// This warp's products of one staged slice (bf16, `S`) through `ldmatrix` and
/// `mma.m16n8k16`: for each 16-deep step, its [`WARP_PRODUCTS`] patch blocks of 16 rows
/// times its [`WARP_MMA_COLUMNS`] filter blocks of 8 columns, into `sums` (row block-major).
///
/// The staging is depth-major (a run of rows, or of columns, contiguous at each depth), the
/// transpose of the operand layouts `mma` takes; `ldmatrix .trans` reads each 8 × 8 block of
/// it transposed, each lane naming one run ([`LdmatrixRuns`]): the patches are the A
/// operand, the filters the B operand.
#[cube]
pub(crate) fn mma_slice<F: Float, S: Float>(
    staged: &SharedMemory<Vector<S, Four>>,
    sums: &mut Sequence<Array<Vector<F, Two>>>,
    warp_row: u32,
    warp_col: u32,
    #[comptime] tile: TensorTile,
) {
    let mma = bf16_mma::<F, S>();
    let rows_stride = comptime!(tile.rows_stride());
    let filter_row = comptime!(tile.filter_row());
    let filters_at = comptime!(tile.patch_vectors());
    let runs = LdmatrixRuns::of_this_lane();
    #[unroll]
    for step in 0..comptime!(SLICE_DEPTH / BF16_PRODUCT_DEPTH) {
        let k = step * BF16_PRODUCT_DEPTH;
        let mut patches = Sequence::<Array<Vector<S, Two>>>::new();
        #[unroll]
        for i in 0..WARP_PRODUCTS {
            let row = warp_row + i * PRODUCT_SIDE + runs.a_row;
            let at = ((k + runs.a_depth) * rows_stride + row / 4) as usize;
            patches.push(mma.load_matrix::<Vector<S, Four>, Two>(
                &staged.slice(at, at + 2usize),
                cmma::MatrixIdent::A,
                4usize,
                true,
            ));
        }
        #[unroll]
        for j in 0..WARP_MMA_COLUMNS {
            let column = warp_col + j * MMA_COLUMNS;
            let at = (filters_at + (k + runs.b_depth) * filter_row + column / 4) as usize;
            let filters = mma.load_matrix::<Vector<S, Four>, Two>(
                &staged.slice(at, at + 2usize),
                cmma::MatrixIdent::B,
                2usize,
                true,
            );
            #[unroll]
            for i in 0..WARP_PRODUCTS {
                mma.execute_inplace(
                    patches.index(comptime!(i as usize)),
                    &filters,
                    sums.index_mut(comptime!((i * WARP_MMA_COLUMNS + j) as usize)),
                );
            }
        }
    }
}

/// The warp's `mma` sums (`row_blocks` × `column_blocks` products of 16 × 8, row
/// block-major) into `finished`: value (row, column) of the warp's block at `first +
/// row · row_step + column · column_step`, each where the `mma` layout puts it. With
/// `run_rows`, row r of row block i is row 4 · (r mod 8) + 2i + r / 8 and column n of column
/// block j is column 4n + j, the TF32 weight gradient's mapping
/// ([`super::gemm_weight_grad_tf32`]); with `add`, the sums are added to the values there.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn store_mma_sums<F: Float, S: Float>(
    sums: &Sequence<Array<Vector<F, Two>>>,
    finished: &mut SharedMemory<F>,
    first: u32,
    #[comptime] row_step: u32,
    #[comptime] column_step: u32,
    #[comptime] row_blocks: u32,
    #[comptime] column_blocks: u32,
    #[comptime] run_rows: bool,
    #[comptime] add: bool,
) {
    let mma = bf16_mma::<F, S>();
    let lane = lane_of_unit();
    #[unroll]
    for i in 0..row_blocks {
        #[unroll]
        for j in 0..column_blocks {
            let sum = sums.index(comptime!((i * column_blocks + j) as usize));
            #[unroll]
            for pair in 0..2u32 {
                let values = sum[pair as usize];
                #[unroll]
                for e in 0..2u32 {
                    let (in_row, in_column) =
                        mma.position_of_nth(lane, pair * 2 + e, cmma::MatrixIdent::Accumulator);
                    let mut row = i * PRODUCT_SIDE + in_row;
                    let mut column = j * MMA_COLUMNS + in_column;
                    if run_rows {
                        row = 4 * (in_row % 8) + 2 * i + in_row / 8;
                        column = 4 * in_column + j;
                    }
                    let at = (first + row * row_step + column * column_step) as usize;
                    if add {
                        finished[at] += values[e as usize];
                    } else {
                        finished[at] = values[e as usize];
                    }
                }
            }
        }
    }
}
