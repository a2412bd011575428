//! The implicit GEMM of [`super::gemm_tensor_cores`] on channels-last operands
//! ([`super::channels_last`]), in bf16 or TF32: its tiles of quads × filters (and
//! [`TensorTile::TALL`], of warps of 64 × 32), `mma`s on the tensor cores and the same
//! epilogue ([`write_finished`]), with the depth ordered (tap, channel) so that every
//! operand load is a 16-byte run: eight bf16 depths or four fp32 ones.
//!
//! Why: gathered from the NCHW map, each staged patch value is a 4-byte load behind four
//! bounds compares and a conversion, and those gathers, more than the products, set how many
//! instructions the tensor-core forward issues (`docs/perf-log/2026-11-29-bf16-channels-last.md`).
//! Here a unit's loads of a slice are two or four 16-byte loads of a padded map, at
//! addresses worked out once per row plus one offset per slice for the tap, and the
//! filters one.
//!
//! The staging is row-major: a tile row's slice (four runs) side by side, as are a
//! filter's. In bf16, `ldmatrix` without `.trans` then reads the A operand (rows × depth)
//! and the B operand (columns × depth) as `mma.m16n8k16` takes them; in TF32 each lane
//! loads its runs itself ([`super::gemm_tf32_mma`]). Runs are stored at run ⊕ (row / 2 mod
//! 4): the eight rows an `ldmatrix` reads at one run, and the eight runs a quarter-warp
//! stores, then fall in 32 different banks.

use cubecl::prelude::*;

use super::channels_last::{BF16_RUN, ChannelsLast};
use super::gemm::CUBE_UNITS;
use super::gemm_bf16_mma::{
    Two, bf16_mma, lane_of_unit, mma_accumulators, store_mma_sums, warp_of_unit,
};
use super::gemm_tensor_cores::write_finished;
use super::gemm_tf32_mma::{LaneRuns, tf32_mma_slice};
use super::staged_runs::{SLICE_RUNS, swizzled};
use super::tensor_tile::{
    BF16_PRODUCT_DEPTH, FRAGMENT_ALIGN, MMA_COLUMNS, PRODUCT_SIDE, SLICE_DEPTH, TF32_PRODUCT_DEPTH,
    TensorTile, WARP_MMA_COLUMNS, WARP_PRODUCTS,
};
use crate::kernels::geometry::{Nchw, Window};

/// Runs a 16-deep bf16 `mma` step reads of each row.
const STEP_RUNS: u32 = BF16_PRODUCT_DEPTH / BF16_RUN;

/// A run held in registers between its load and its staging: its 16 bytes as four 32-bit
/// words. Held as eight bf16, a run is moved and zeroed half a register at a time, in byte
/// permutes that the forward and the weight gradient would issue for every run
/// (`docs/perf-log/2026-11-29-bf16-products-issue-and-l1.md`).
pub(crate) type RunBits = Vector<u32, Const<4>>;

/// The convolution (+ bias) over the cube's `tile`, as [`super::gemm_tensor_cores`]'s, of
/// `src` (a padded channels-last map of sizes `src_map`) with `filters` ([column][depth]
/// runs, `depth_runs` a column, zeros past the depth and the columns): X picks the cube's
/// quads of the `quads_h` × `quads_w` grid per image, Y its columns; [`write_finished`]
/// writes them into `output`, pooled under an `argmax`. The products take `M` operands,
/// `product_depth` deep: bf16 ones ([`BF16_PRODUCT_DEPTH`], `S` = `M` = bf16) or TF32 ones
/// ([`TF32_PRODUCT_DEPTH`], `S` = fp32). Launched with [`CUBE_UNITS`] units per cube and
/// vectors of a run ([`BF16_RUN`] or [`TF32_RUN`](super::channels_last::TF32_RUN)).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv_gemm_channels_last<F: Float, S: Float, M: Float, V: Size, A: Int>(
    src: &Array<Vector<S, V>>,
    filters: &Array<Vector<S, V>>,
    bias: &ComptimeOption<Array<F>>,
    output: &mut Array<F>,
    argmax: &mut ComptimeOption<Array<A>>,
    src_map: ChannelsLast,
    output_map: Nchw,
    quads_h: u32,
    quads_w: u32,
    depth_runs: u32,
    #[comptime] conv: Window,
    #[comptime] tile: TensorTile,
    #[comptime] product_depth: u32,
    #[define(A)] _argmax_type: StorageType,
) {
    let tf32 = comptime!(product_depth == TF32_PRODUCT_DEPTH);
    let first_quad = CUBE_POS_X as usize * comptime!(tile.quads() as usize);
    let first_col = CUBE_POS_Y as usize * comptime!(tile.columns() as usize);
    let mut loads = UnitLoads::new(
        &src_map, first_quad, first_col, quads_h, quads_w, depth_runs, conv, tile,
    );
    let mut staged = SharedMemory::<Vector<S, V>>::new_aligned(
        comptime!(((tile.rows() + tile.columns()) * SLICE_RUNS) as usize),
        FRAGMENT_ALIGN,
    );
    let mut finished =
        SharedMemory::<F>::new_aligned(comptime!(tile.finished_floats() as usize), FRAGMENT_ALIGN);

    // This warp's block of the tile: rows from `warp_row`, columns from `warp_col`.
    let warp = warp_of_unit();
    let warp_row = (warp / comptime!(tile.warps_across)) * comptime!(tile.warp_rows());
    let warp_col = (warp % comptime!(tile.warps_across)) * WARP_PRODUCTS * PRODUCT_SIDE;
    let mut sums = mma_accumulators::<F>(comptime!(tile.warp_row_blocks * WARP_MMA_COLUMNS));
    let starts = SwizzledStarts::of_this_lane(warp_row, warp_col, tile);
    let lane_runs = LaneRuns::of_this_lane(warp_row, warp_col, tile);

    // The next slice's values, loaded during this slice's products: the unit's rows, then
    // its filter run.
    let mut next = Array::<RunBits>::new(comptime!(row_loads(tile) + 1));
    loads.load_next::<S, V>(src, filters, &mut next, &src_map, conv, tile);
    let slices = depth_runs / SLICE_RUNS;
    for slice in 0..slices {
        loads.stage::<S, V>(&next, &mut staged, tile);
        sync_cube();
        if slice + 1 < slices {
            loads.load_next::<S, V>(src, filters, &mut next, &src_map, conv, tile);
        }
        if tf32 {
            tf32_mma_slice::<F, S, M, V>(&staged, &mut sums, &lane_runs, tile);
        } else {
            mma_slice::<F, S, V>(&staged, &mut sums, &starts, tile);
        }
        sync_cube();
    }

    let rows_floats = comptime!(4 * tile.rows_stride());
    store_mma_sums::<F, S>(
        &sums,
        &mut finished,
        warp_col * rows_floats + warp_row,
        1u32,
        rows_floats,
        comptime!(tile.warp_row_blocks),
        WARP_MMA_COLUMNS,
        false,
        false,
    );
    sync_cube();
    write_finished::<F, A>(
        &finished,
        output,
        argmax,
        bias,
        &output_map,
        first_quad,
        first_col,
        quads_h,
        quads_w,
        tile,
    );
}

/// Where in `src` (in runs) tile row `row` of the tile from `first_quad` reads its first
/// tap: row 4 · quad + 2 · dh + dw is conv position (2 qh + dh, 2 qw + dw) of its image,
/// whose patch starts at that position times the stride in the padded map. A quad past the
/// batch reads the last image instead: its sums are dropped, and the rows of a GEMM are
/// independent.
#[cube]
fn row_start(
    src_map: &ChannelsLast,
    first_quad: usize,
    row: u32,
    quads_h: u32,
    quads_w: u32,
    #[comptime] conv: Window,
) -> usize {
    let quad = first_quad + (row / 4) as usize;
    let plane_quads = (quads_h * quads_w) as usize;
    let mut n = quad / plane_quads;
    if n >= src_map.batch {
        n = src_map.batch - 1;
    }
    let in_plane = (quad % plane_quads) as u32;
    let top = (2 * (in_plane / quads_w) + (row % 4) / 2) * conv.stride_h;
    let left = (2 * (in_plane % quads_w) + row % 2) * conv.stride_w;
    ((n * src_map.rows as usize + top as usize) * src_map.cols as usize + left as usize)
        * src_map.channel_runs as usize
}

/// Row loads a unit makes each slice: the tile's runs over the cube's units.
fn row_loads(tile: TensorTile) -> usize {
    (tile.rows() * SLICE_RUNS / CUBE_UNITS) as usize
}

/// What a unit loads of each slice, and where: run `run` of rows `first_row` + l · 64
/// (the cube's units over [`SLICE_RUNS`]) and of filter `first_row`, adjacent units a row's
/// adjacent runs. The rows' depth run j is tap j / channel runs, channel run j mod channel
/// runs: stepped a slice at a time instead of divided.
#[derive(CubeType)]
struct UnitLoads {
    run: u32,
    first_row: u32,
    rows_at: Array<usize>,
    tap: u32,
    channel_run: u32,
    filter_at: usize,
}

#[cube]
impl UnitLoads {
    #[allow(clippy::too_many_arguments)]
    fn new(
        src_map: &ChannelsLast,
        first_quad: usize,
        first_col: usize,
        quads_h: u32,
        quads_w: u32,
        depth_runs: u32,
        #[comptime] conv: Window,
        #[comptime] tile: TensorTile,
    ) -> UnitLoads {
        let run = UNIT_POS % SLICE_RUNS;
        let first_row = UNIT_POS / SLICE_RUNS;
        let mut rows_at = Array::<usize>::new(comptime!(row_loads(tile)));
        #[unroll]
        for l in 0..comptime!(row_loads(tile)) {
            let row = first_row + l as u32 * comptime!(CUBE_UNITS / SLICE_RUNS);
            rows_at[l] = row_start(src_map, first_quad, row, quads_h, quads_w, conv);
        }
        UnitLoads {
            run,
            first_row,
            rows_at,
            tap: run / src_map.channel_runs,
            channel_run: run % src_map.channel_runs,
            filter_at: (first_col + first_row as usize) * depth_runs as usize + run as usize,
        }
    }

    /// Whether the unit loads a filter run: a tile has fewer of them than units.
    fn loads_filter(&self, #[comptime] tile: TensorTile) -> bool {
        self.first_row < tile.columns()
    }

    /// The slice's values into `next`, then on to the next slice: zeros past the last tap
    /// (the filters are zero there too, but the map's values past it may not be in `src`).
    fn load_next<S: Float, V: Size>(
        &mut self,
        src: &Array<Vector<S, V>>,
        filters: &Array<Vector<S, V>>,
        next: &mut Array<RunBits>,
        src_map: &ChannelsLast,
        #[comptime] conv: Window,
        #[comptime] tile: TensorTile,
    ) {
        let in_depth = self.tap < comptime!(conv.size_h * conv.size_w);
        let tap_h = self.tap / conv.size_w;
        let tap_w = self.tap % conv.size_w;
        let offset =
            ((tap_h * src_map.cols + tap_w) * src_map.channel_runs + self.channel_run) as usize;
        #[unroll]
        for l in 0..comptime!(row_loads(tile)) {
            let mut values = RunBits::new(0u32);
            if in_depth {
                values = RunBits::reinterpret(src[self.rows_at[l] + offset]);
            }
            next[l] = values;
        }
        if self.loads_filter(tile) {
            next[comptime!(row_loads(tile))] = RunBits::reinterpret(filters[self.filter_at]);
        }
        self.filter_at += SLICE_RUNS as usize;
        self.channel_run += SLICE_RUNS;
        while self.channel_run >= src_map.channel_runs {
            self.channel_run -= src_map.channel_runs;
            self.tap += 1;
        }
    }

    /// The loaded values into their places in `staged` (rows, then filters).
    fn stage<S: Float, V: Size>(
        &self,
        next: &Array<RunBits>,
        staged: &mut SharedMemory<Vector<S, V>>,
        #[comptime] tile: TensorTile,
    ) {
        #[unroll]
        for l in 0..comptime!(row_loads(tile)) {
            let row = self.first_row + l as u32 * comptime!(CUBE_UNITS / SLICE_RUNS);
            staged[swizzled(row, self.run) as usize] = Vector::<S, V>::reinterpret(next[l]);
        }
        if self.loads_filter(tile) {
            let at = comptime!(tile.rows() * SLICE_RUNS) + swizzled(self.first_row, self.run);
            staged[at as usize] = Vector::<S, V>::reinterpret(next[comptime!(row_loads(tile))]);
        }
    }
}

/// Where this lane's `ldmatrix` runs start in the staging, for each 16-deep step of a
/// slice: the A operand's at its first row block, the B operand's at its first column
/// block; the other blocks lie whole rows further, at the same swizzle. Worked out once
/// before the slices: inside them the compiler would recompute them in every slice.
///
/// In an A load, lane l names row l mod 8 of block (l / 8) mod 2 at the step's run l / 16
/// (the four 8 × 8 blocks in the order of the operand's registers); in a B load, lanes 0–15
/// name column l mod 8 at run (l / 8) mod 2, and lanes 16–31 valid addresses only. The
/// warp's rows and columns start at multiples of 16 and 32, and blocks lie 16 rows or 8
/// columns apart, so a run's swizzle depends on the lane alone.
#[derive(CubeType)]
struct SwizzledStarts {
    patches: Array<u32>,
    filters: Array<u32>,
}

#[cube]
impl SwizzledStarts {
    fn of_this_lane(warp_row: u32, warp_col: u32, #[comptime] tile: TensorTile) -> SwizzledStarts {
        let lane = lane_of_unit();
        let a_row = warp_row + lane % 8 + 8 * ((lane / 8) % 2);
        let b_column = warp_col + lane % 8;
        let steps = comptime!((SLICE_DEPTH / BF16_PRODUCT_DEPTH) as usize);
        let mut patches = Array::<u32>::new(steps);
        let mut filters = Array::<u32>::new(steps);
        #[unroll]
        for step in 0..steps {
            let first_run = step as u32 * STEP_RUNS;
            patches[step] = swizzled(a_row, first_run + lane / 16);
            filters[step] = comptime!(tile.rows() * SLICE_RUNS)
                + swizzled(b_column, first_run + (lane / 8) % 2);
        }
        SwizzledStarts { patches, filters }
    }
}

/// This warp's products of one staged slice through `ldmatrix` (no transpose) and
/// `mma.m16n8k16`, into `sums` (row block-major): for each 16-deep step, its
/// row blocks of 16 times its [`WARP_MMA_COLUMNS`] column blocks of 8, the lane's runs
/// from `starts`.
#[cube]
fn mma_slice<F: Float, S: Float, V: Size>(
    staged: &SharedMemory<Vector<S, V>>,
    sums: &mut Sequence<Array<Vector<F, Two>>>,
    starts: &SwizzledStarts,
    #[comptime] tile: TensorTile,
) {
    let mma = bf16_mma::<F, S>();
    #[unroll]
    for step in 0..comptime!((SLICE_DEPTH / BF16_PRODUCT_DEPTH) as usize) {
        let mut patches = Sequence::<Array<Vector<S, Two>>>::new();
        #[unroll]
        for i in 0..tile.warp_row_blocks {
            let at = (starts.patches[step] + comptime!(i * PRODUCT_SIDE * SLICE_RUNS)) as usize;
            patches.push(mma.load_matrix::<Vector<S, V>, Two>(
                &staged.slice(at, at + 1usize),
                cmma::MatrixIdent::A,
                4usize,
                false,
            ));
        }
        #[unroll]
        for j in 0..WARP_MMA_COLUMNS {
            let at = (starts.filters[step] + comptime!(j * MMA_COLUMNS * SLICE_RUNS)) as usize;
            let filters = mma.load_matrix::<Vector<S, V>, Two>(
                &staged.slice(at, at + 1usize),
                cmma::MatrixIdent::B,
                2usize,
                false,
            );
            #[unroll]
            for i in 0..tile.warp_row_blocks {
                mma.execute_inplace(
                    patches.index(comptime!(i as usize)),
                    &filters,
                    sums.index_mut(comptime!((i * WARP_MMA_COLUMNS + j) as usize)),
                );
            }
        }
    }
}
