//! The bf16 weight and bias gradients of [`super::gemm_weight_grad_tensor_cores`] on
//! channels-last operands ([`super::channels_last`]): the conv output's gradient (the copy
//! the input gradient's GEMM reads, padded for it) and the padded input, both as
//! [image][row][column][channel] runs.
//!
//! Why: the tensor-core kernel gathers each staged value on its own from the NCHW maps,
//! decoding the pool's argmax for the gradient, so it issues tens of instructions for each
//! matrix product and is the bf16 step's largest kernel
//! (`docs/perf-log/2026-11-29-bf16-channels-last.md`). Here each unit stages a slice with two
//! 16-byte loads — eight filters' gradients at one conv position, and eight depths (one tap,
//! eight channels) of that position's patch — at addresses it steps from slice to slice.
//!
//! The product is the same: partials[split, co, k] = Σ over the split's conv positions of
//! gradient[position, co] · patch[position, k], a cube per tile of 64 filters × 64 depths,
//! the positions in slices of 32. Its depth here runs (tap, channel), the order the copies
//! store; the partials keep the other kernels' (channel, tap), so the sum that follows is
//! the same. Both slices are staged as the tensor-core kernel stages them, position-major
//! rows of 64 values and a 16-byte pad (a matrix load's eight rows, 144 bytes apart, fall in
//! 32 different banks), and multiplied by its `mma_slice`. The bias sums are fp32 adds of
//! the staged gradients.

use cubecl::prelude::*;

use super::channels_last::{BF16_RUN, ChannelsLast};
use super::gemm::CUBE_UNITS;
use super::gemm_bf16_mma::{mma_accumulators, store_mma_sums, warp_of_unit};
use super::gemm_channels_last::RunBits;
use super::gemm_weight_grad::TILE_SIDE;
use super::gemm_weight_grad_tensor_cores::{
    FINISHED_ROW, PRODUCT_ROWS, SLICE_POSITIONS, STAGED_ROW, StagedStarts, WARP_MMA_COLUMNS,
    mma_slice,
};
use super::tensor_tile::{FRAGMENT_ALIGN, MMA_COLUMNS, PRODUCT_SIDE};
use crate::kernels::geometry::Window;

/// Runs across a tile's 64 filters or depths: the units loading one position of a slice
/// (of [`SLICE_POSITIONS`], one a group of units).
const TILE_RUNS: u32 = TILE_SIDE / BF16_RUN;
const _: () = assert!(CUBE_UNITS / TILE_RUNS == SLICE_POSITIONS);
/// Runs in a staged row (see the module's notes).
const STAGED_RUNS: u32 = STAGED_ROW / BF16_RUN;
/// Depths of a warp's block (its filters are [`PRODUCT_SIDE`]).
const WARP_DEPTHS: u32 = WARP_MMA_COLUMNS * MMA_COLUMNS;

/// The sizes the weight gradient walks: its conv positions (images × rows × columns of
/// the output), filters, depth (taps × input channels) and positions per split.
#[derive(CubeType, CubeLaunch, Clone, Copy)]
pub struct PositionGrid {
    pub positions: usize,
    pub rows: u32,
    pub cols: u32,
    pub c_out: usize,
    pub depth: usize,
    pub per_split: usize,
}

/// Partial weight (and bias) gradients of split CUBE_POS_Z over the tile of filters from
/// CUBE_POS_Y · 64 and depths from CUBE_POS_X · 64 (see the module's notes). `grad` is the
/// conv output's gradient channels-last, of sizes `grad_map`, conv position (r, c) at (r +
/// `grad_pad_h`, c + `grad_pad_w`); `x` the input as a padded map of sizes `x_map` covering
/// every patch; `partials` the [splits, C_out, depth + 1] sums with the bias last. Launched
/// with [`CUBE_UNITS`] units per cube and vectors of [`BF16_RUN`].
#[cube(launch_unchecked)]
pub fn conv_gemm_weight_grad_channels_last<F: Float, S: Float, V: Size>(
    x: &Array<Vector<S, V>>,
    grad: &Array<Vector<S, V>>,
    partials: &mut Array<F>,
    x_map: ChannelsLast,
    grad_map: ChannelsLast,
    grad_pad_h: u32,
    grad_pad_w: u32,
    grid: PositionGrid,
    #[comptime] conv: Window,
    #[comptime] with_bias: bool,
) {
    let first_k = CUBE_POS_X as usize * TILE_SIDE as usize;
    let first_co = CUBE_POS_Y as usize * TILE_SIDE as usize;
    let mut loads = PositionLoads::new(
        &x_map,
        &grad_map,
        grad_pad_h,
        grad_pad_w,
        &grid,
        first_k,
        first_co,
        UNIT_POS / TILE_RUNS,
        BF16_RUN,
        conv,
    );

    let mut grads = new_staging::<S, V>(STAGED_RUNS);
    let mut patches = new_staging::<S, V>(STAGED_RUNS);
    let mut finished = new_finished::<F>();

    // This warp's block: filters from `warp_co`, depths from `warp_k`.
    let warp = warp_of_unit();
    let warp_co = (warp % PRODUCT_ROWS) * PRODUCT_SIDE;
    let warp_k = (warp / PRODUCT_ROWS) * WARP_DEPTHS;
    let mut sums = mma_accumulators::<F>(WARP_MMA_COLUMNS);
    let starts = StagedStarts::of_this_lane(warp_co, warp_k, BF16_RUN);

    let bias_loader = with_bias && CUBE_POS_X == 0;
    let mut bias_sums = zero_sums::<F>(BF16_RUN);

    // The next slice's values, loaded during this slice's products.
    let mut next = PositionRuns::zeros();
    loads.load_next::<S, V>(x, grad, &mut next, &x_map, &grad_map, conv);
    let staged_at = (loads.slot * STAGED_RUNS + loads.run) as usize;
    let mut first = loads.begin;
    while first < loads.end {
        let dy = Vector::<S, V>::reinterpret(next.grad);
        grads[staged_at] = dy;
        patches[staged_at] = Vector::<S, V>::reinterpret(next.patch);
        if bias_loader {
            #[unroll]
            for j in 0..BF16_RUN as usize {
                bias_sums[j] += F::cast_from(dy[j]);
            }
        }
        sync_cube();
        first += SLICE_POSITIONS as usize;
        if first < loads.end {
            loads.load_next::<S, V>(x, grad, &mut next, &x_map, &grad_map, conv);
        }
        mma_slice::<F, S, Vector<S, V>>(&grads, &patches, &mut sums, &starts, BF16_RUN);
        sync_cube();
    }

    // The finished tile, row-major: filter co's depth k is co · FINISHED_ROW + k.
    store_mma_sums::<F, S>(
        &sums,
        &mut finished,
        warp_co * FINISHED_ROW + warp_k,
        FINISHED_ROW,
        1u32,
        1u32,
        WARP_MMA_COLUMNS,
        false,
        false,
    );
    write_tile::<F>(
        &mut finished,
        partials,
        &grid,
        first_co,
        first_k,
        conv,
        loads.bias_sums::<F>(bias_sums, bias_loader),
        SLICE_POSITIONS,
        BF16_RUN,
    );
}

/// A staging of a slice: [`SLICE_POSITIONS`] rows of `staged_runs` runs.
#[cube]
pub(crate) fn new_staging<S: Float, V: Size>(
    #[comptime] staged_runs: u32,
) -> SharedMemory<Vector<S, V>> {
    SharedMemory::<Vector<S, V>>::new_aligned(
        comptime!((SLICE_POSITIONS * staged_runs) as usize),
        FRAGMENT_ALIGN,
    )
}

/// The finished tile's fp32 sums, row-major: filter co's depth k at co · [`FINISHED_ROW`] + k.
#[cube]
pub(crate) fn new_finished<F: Float>() -> SharedMemory<F> {
    SharedMemory::<F>::new_aligned(
        comptime!((TILE_SIDE * FINISHED_ROW) as usize),
        FRAGMENT_ALIGN,
    )
}

/// `values` bias sums, zero.
#[cube]
pub(crate) fn zero_sums<F: Float>(#[comptime] values: u32) -> Array<F> {
    let mut sums = Array::<F>::new(values as usize);
    #[unroll]
    for j in 0..values as usize {
        sums[j] = F::new(0.0);
    }
    sums
}

/// A unit's bias sums over its loads, and where they lie: position `slot` of a slice, run
/// `run` of the tile's filters; `loader` says whether this unit's are the tile's.
#[derive(CubeType)]
pub(crate) struct BiasSums<F: Float> {
    pub sums: Array<F>,
    pub loader: bool,
    pub slot: u32,
    pub run: u32,
}

/// The finished tile (once every warp's sums are in `finished`) into this split's partials,
/// then the bias loaders' sums over `slots` positions of runs of `values` filters.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_tile<F: Float>(
    finished: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    grid: &PositionGrid,
    first_co: usize,
    first_k: usize,
    #[comptime] conv: Window,
    bias: BiasSums<F>,
    #[comptime] slots: u32,
    #[comptime] values: u32,
) {
    sync_cube();
    write_partials::<F>(finished, partials, grid, first_co, first_k, conv);
    if bias.loader {
        write_bias::<F>(finished, partials, &bias, grid, first_co, slots, values);
    }
}

/// The finished tile (row-major: filter co's depth k at co · [`FINISHED_ROW`] + k) into
/// this split's partials: adjacent units write a filter's adjacent depths, each at its
/// (channel, tap) place.
#[cube]
fn write_partials<F: Float>(
    finished: &SharedMemory<F>,
    partials: &mut Array<F>,
    grid: &PositionGrid,
    first_co: usize,
    first_k: usize,
    #[comptime] conv: Window,
) {
    let taps = comptime!((conv.size_h * conv.size_w) as usize);
    let channels = grid.depth / taps;
    for l in 0..comptime!(TILE_SIDE * TILE_SIDE / CUBE_UNITS) {
        let at = UNIT_POS + l * CUBE_UNITS;
        let co = first_co + (at / TILE_SIDE) as usize;
        let k = first_k + (at % TILE_SIDE) as usize;
        if co < grid.c_out && k < grid.depth {
            let value = finished[((at / TILE_SIDE) * FINISHED_ROW + at % TILE_SIDE) as usize];
            partials[partials_row(grid, co) + (k % channels) * taps + k / channels] = value;
        }
    }
}

/// The bias partials of the tile's filters: each loader's sums (see [`BiasSums`]) added up
/// over the `slots` positions of a slice in shared memory (the products are done with
/// `finished`). Called by the bias loaders only.
#[cube]
fn write_bias<F: Float>(
    finished: &mut SharedMemory<F>,
    partials: &mut Array<F>,
    bias: &BiasSums<F>,
    grid: &PositionGrid,
    first_co: usize,
    #[comptime] slots: u32,
    #[comptime] values: u32,
) {
    sync_cube();
    #[unroll]
    for j in 0..values {
        finished[(bias.slot * TILE_SIDE + bias.run * values + j) as usize] = bias.sums[j as usize];
    }
    sync_cube();
    if UNIT_POS < TILE_SIDE {
        let co = first_co + UNIT_POS as usize;
        let mut total = F::new(0.0);
        for s in 0..slots {
            total += finished[(s * TILE_SIDE + UNIT_POS) as usize];
        }
        if co < grid.c_out {
            partials[partials_row(grid, co) + grid.depth] = total;
        }
    }
}

/// Where filter `co`'s partial sums of this split start in `partials`.
#[cube]
pub(crate) fn partials_row(grid: &PositionGrid, co: usize) -> usize {
    (CUBE_POS_Z as usize * grid.c_out + co) * (grid.depth + 1)
}

/// What a unit loads of each slice: position `slot` of the slice, and run `run` of the
/// tile's filters (the gradient) and of its depths (the patch), in runs of `values`. The depth run's tap and
/// channel run are fixed for the whole walk; the position is stepped from slice to slice,
/// by a slice's rows and columns with one carry, instead of divided.
#[derive(CubeType)]
pub(crate) struct PositionLoads {
    pub slot: u32,
    pub run: u32,
    /// The split's positions, [begin, end).
    pub begin: usize,
    pub end: usize,
    /// The unit's position: its index, image, row and column.
    position: usize,
    image: usize,
    row: u32,
    col: u32,
    /// The conv output's rows and columns, and a slice's positions as whole rows and
    /// columns more.
    rows: u32,
    cols: u32,
    step_rows: u32,
    step_cols: u32,
    /// The gradient's run (from its position's first), if inside the filters, and the
    /// gradient map's padding before its first position.
    grad_run: usize,
    grad_pad_h: u32,
    grad_pad_w: u32,
    grad_active: bool,
    /// The patch run's offset from the patch's first value, if inside the depth.
    patch_offset: usize,
    patch_active: bool,
}

/// One position's gradient and patch runs, as [`RunBits`].
#[derive(CubeType)]
pub(crate) struct PositionRuns {
    pub grad: RunBits,
    pub patch: RunBits,
}

#[cube]
impl PositionRuns {
    pub(crate) fn zeros() -> PositionRuns {
        PositionRuns {
            grad: RunBits::new(0u32),
            patch: RunBits::new(0u32),
        }
    }
}

#[cube]
impl PositionLoads {
    /// The loads of this unit at `slot` of each slice, for the tile from depth `first_k` and
    /// filter `first_co`: adjacent units load adjacent runs (of `values`) of one position.
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn new(
        x_map: &ChannelsLast,
        grad_map: &ChannelsLast,
        grad_pad_h: u32,
        grad_pad_w: u32,
        grid: &PositionGrid,
        first_k: usize,
        first_co: usize,
        slot: u32,
        #[comptime] values: u32,
        #[comptime] conv: Window,
    ) -> PositionLoads {
        let run = UNIT_POS % comptime!(TILE_SIDE / values);
        let begin = CUBE_POS_Z as usize * grid.per_split;
        let mut end = begin + grid.per_split;
        if end > grid.positions {
            end = grid.positions;
        }
        let position = begin + slot as usize;
        let plane = (grid.rows * grid.cols) as usize;
        let in_plane = (position % plane) as u32;
        let grad_run = first_co / values as usize + run as usize;
        let grad_active = grad_run < grad_map.channel_runs as usize;
        let depth_run = (first_k / values as usize) as u32 + run;
        let tap = depth_run / x_map.channel_runs;
        let tap_h = tap / conv.size_w;
        let tap_w = tap % conv.size_w;
        let patch_offset = ((tap_h * x_map.cols + tap_w) * x_map.channel_runs
            + depth_run % x_map.channel_runs) as usize;
        PositionLoads {
            slot,
            run,
            begin,
            end,
            position,
            image: position / plane,
            row: in_plane / grid.cols,
            col: in_plane % grid.cols,
            rows: grid.rows,
            cols: grid.cols,
            step_rows: SLICE_POSITIONS / grid.cols,
            step_cols: SLICE_POSITIONS % grid.cols,
            grad_run,
            grad_pad_h,
            grad_pad_w,
            grad_active,
            patch_offset,
            patch_active: tap < comptime!(conv.size_h * conv.size_w),
        }
    }

    /// This unit's bias `sums` over its loads, the tile's if `loader`.
    pub(crate) fn bias_sums<F: Float>(&self, sums: Array<F>, loader: bool) -> BiasSums<F> {
        BiasSums::<F> {
            sums,
            loader,
            slot: self.slot,
            run: self.run,
        }
    }

    /// The unit's gradient and patch runs of its position into `next` (zeros past the
    /// split, the filters or the depth), then on by a slice.
    pub(crate) fn load_next<S: Float, V: Size>(
        &mut self,
        x: &Array<Vector<S, V>>,
        grad: &Array<Vector<S, V>>,
        next: &mut PositionRuns,
        x_map: &ChannelsLast,
        grad_map: &ChannelsLast,
        #[comptime] conv: Window,
    ) {
        let inside = self.position < self.end;
        let mut dy = RunBits::new(0u32);
        if inside && self.grad_active {
            dy = RunBits::reinterpret(
                grad[position_at(
                    grad_map,
                    self.image,
                    self.row + self.grad_pad_h,
                    self.col + self.grad_pad_w,
                ) + self.grad_run],
            );
        }
        let mut patch = RunBits::new(0u32);
        if inside && self.patch_active {
            let top = self.row * conv.stride_h;
            let left = self.col * conv.stride_w;
            patch = RunBits::reinterpret(
                x[position_at(x_map, self.image, top, left) + self.patch_offset],
            );
        }
        next.grad = dy;
        next.patch = patch;
        self.position += SLICE_POSITIONS as usize;
        self.col += self.step_cols;
        self.row += self.step_rows;
        if self.col >= self.cols {
            self.col -= self.cols;
            self.row += 1;
        }
        while self.row >= self.rows {
            self.row -= self.rows;
            self.image += 1;
        }
    }
}

/// Where position (`row`, `col`) of image `n` starts in the channels-last `map`, in runs.
#[cube]
pub(crate) fn position_at(map: &ChannelsLast, n: usize, row: u32, col: u32) -> usize {
    ((n * map.rows as usize + row as usize) * map.cols as usize + col as usize)
        * map.channel_runs as usize
}
