//! The TF32 weight and bias gradients on channels-last operands: the product of
//! [`super::gemm_weight_grad_channels_last`] (the same partials, tiles of 64 filters × 64
//! depths, slices of 32 positions, loads and copies) on fp32 runs of four values, with
//! `mma.m16n8k8` products.
//!
//! Why a kernel of its own: `ldmatrix .trans`, which reads the bf16 kernel's position-major
//! stagings as its operands, moves only 16-bit values. Here each lane loads its operands
//! itself, a whole 16-byte run at a time, and the products' rows and columns are mapped onto
//! filters and depths so that one run holds a lane's values: in a warp's row block i,
//! product row r is the warp's filter 4 · (r mod 8) + 2i + r / 8; in its column block j,
//! product column n is the warp's depth 4n + j. A lane of group g (lane / 4) and index t
//! (lane % 4) then finds, at each of its positions (t and t + 4 of an 8-deep step), its A
//! values of both row blocks in run g of the warp's filters and its B values of all four
//! column blocks in run g of the warp's depths; the sums go back through the same mapping.
//!
//! Each warp multiplies 32 filters × 32 depths, twice the bf16 kernel's warps' filters, so
//! that each loaded byte feeds twice the products: warps 4–7 take the same blocks as warps
//! 0–3 over the other half of each slice's positions, and their sums are added to the
//! finished tile after the first half's. Each unit loads two positions of a slice, 16
//! apart. Staged rows (positions) are 18 runs apart: the eight lanes of a load's phase then
//! read eight different groups of four banks.

use cubecl::prelude::*;

use super::channels_last::{ChannelsLast, TF32_RUN};
use super::gemm::CUBE_UNITS;
use super::gemm_bf16_mma::{Two, lane_of_unit, mma_accumulators, store_mma_sums, warp_of_unit};
use super::gemm_tf32_mma::{One, tf32_mma};
use super::gemm_weight_grad::TILE_SIDE;
use super::gemm_weight_grad_channels_last::{
    PositionGrid, PositionLoads, PositionRuns, new_finished, new_staging, write_tile, zero_sums,
};
use super::gemm_weight_grad_tensor_cores::{FINISHED_ROW, SLICE_POSITIONS, STAGED_ROW};
use super::tensor_tile::{MMA_COLUMNS, PRODUCT_SIDE, TF32_PRODUCT_DEPTH};
use crate::kernels::geometry::Window;

/// Runs across a tile's 64 filters or depths, and the positions one load of the cube's
/// units covers: a unit's two loads of a slice lie this many positions apart.
const TILE_RUNS: u32 = TILE_SIDE / TF32_RUN;
const LOAD_SLOTS: u32 = CUBE_UNITS / TILE_RUNS;
const _: () = assert!(2 * LOAD_SLOTS == SLICE_POSITIONS);
/// Runs in a staged row.
const STAGED_RUNS: u32 = STAGED_ROW / TF32_RUN;
/// A warp's filters and depths, its blocks of 16 rows and of 8 columns, and the warps that
/// cover the tile once (the others take the other half of each slice's positions).
const WARP_SIDE: u32 = 32;
const ROW_BLOCKS: u32 = WARP_SIDE / PRODUCT_SIDE;
const COLUMN_BLOCKS: u32 = WARP_SIDE / MMA_COLUMNS;
const TILE_WARPS: u32 = (TILE_SIDE / WARP_SIDE) * (TILE_SIDE / WARP_SIDE);
/// Positions of a slice each half of the warps multiplies: two 8-deep steps.
const HALF_POSITIONS: u32 = SLICE_POSITIONS / 2;

/// Partial weight (and bias) gradients of split CUBE_POS_Z over the tile of filters from
/// CUBE_POS_Y · 64 and depths from CUBE_POS_X · 64, as
/// [`super::gemm_weight_grad_channels_last::conv_gemm_weight_grad_channels_last`], whose
/// arguments these are, on fp32 (`F`) runs with TF32 (`M`) products. Launched with
/// [`CUBE_UNITS`] units per cube and vectors of [`TF32_RUN`].
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv_gemm_weight_grad_tf32<F: Float, M: Float, V: Size>(
    x: &Array<Vector<F, V>>,
    grad: &Array<Vector<F, V>>,
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
    let slot = UNIT_POS / TILE_RUNS;
    let mut near = PositionLoads::new(
        &x_map, &grad_map, grad_pad_h, grad_pad_w, &grid, first_k, first_co, slot, TF32_RUN, conv,
    );
    let mut far = PositionLoads::new(
        &x_map,
        &grad_map,
        grad_pad_h,
        grad_pad_w,
        &grid,
        first_k,
        first_co,
        slot + LOAD_SLOTS,
        TF32_RUN,
        conv,
    );

    let mut grads = new_staging::<F, V>(STAGED_RUNS);
    let mut patches = new_staging::<F, V>(STAGED_RUNS);
    let mut finished = new_finished::<F>();

    // This warp's block (filters from `warp_co`, depths from `warp_k`), its half of the
    // positions, and the lane's runs at its first position.
    let warp = warp_of_unit();
    let half = warp / TILE_WARPS;
    let block = warp % TILE_WARPS;
    let warp_co = (block % 2) * WARP_SIDE;
    let warp_k = (block / 2) * WARP_SIDE;
    let lane = lane_of_unit();
    let lane_row = (half * HALF_POSITIONS + lane % 4) * STAGED_RUNS;
    let grad_at = lane_row + warp_co / TF32_RUN + lane / 4;
    let patch_at = lane_row + warp_k / TF32_RUN + lane / 4;
    let mut sums = mma_accumulators::<F>(ROW_BLOCKS * COLUMN_BLOCKS);

    let bias_loader = with_bias && CUBE_POS_X == 0;
    let mut bias_sums = zero_sums::<F>(TF32_RUN);

    // The next slice's values, loaded during this slice's products.
    let mut next_near = PositionRuns::zeros();
    let mut next_far = PositionRuns::zeros();
    near.load_next::<F, V>(x, grad, &mut next_near, &x_map, &grad_map, conv);
    far.load_next::<F, V>(x, grad, &mut next_far, &x_map, &grad_map, conv);
    let near_at = (slot * STAGED_RUNS + near.run) as usize;
    let far_at = near_at + comptime!((LOAD_SLOTS * STAGED_RUNS) as usize);
    let mut first = near.begin;
    while first < near.end {
        let dy_near = Vector::<F, V>::reinterpret(next_near.grad);
        let dy_far = Vector::<F, V>::reinterpret(next_far.grad);
        grads[near_at] = dy_near;
        grads[far_at] = dy_far;
        patches[near_at] = Vector::<F, V>::reinterpret(next_near.patch);
        patches[far_at] = Vector::<F, V>::reinterpret(next_far.patch);
        if bias_loader {
            #[unroll]
            for j in 0..TF32_RUN as usize {
                bias_sums[j] += dy_near[j] + dy_far[j];
            }
        }
        sync_cube();
        first += SLICE_POSITIONS as usize;
        if first < near.end {
            near.load_next::<F, V>(x, grad, &mut next_near, &x_map, &grad_map, conv);
            far.load_next::<F, V>(x, grad, &mut next_far, &x_map, &grad_map, conv);
        }
        weight_grad_slice::<F, M, V>(&grads, &patches, &mut sums, grad_at, patch_at);
        sync_cube();
    }

    // The finished tile, row-major: the first half's sums, then the second's added.
    let first_at = warp_co * FINISHED_ROW + warp_k;
    if half == 0 {
        store_sums::<F>(&sums, &mut finished, first_at, false);
    }
    sync_cube();
    if half == 1 {
        store_sums::<F>(&sums, &mut finished, first_at, true);
    }
    write_tile::<F>(
        &mut finished,
        partials,
        &grid,
        first_co,
        first_k,
        conv,
        near.bias_sums::<F>(bias_sums, bias_loader),
        LOAD_SLOTS,
        TF32_RUN,
    );
}

/// This warp's products of its half of a staged slice, two 8-deep steps, into `sums` (row
/// block-major): the lane's runs start at `grad_at` and `patch_at` (see the module's notes
/// for the mapping).
#[cube]
fn weight_grad_slice<F: Float, M: Float, V: Size>(
    grads: &SharedMemory<Vector<F, V>>,
    patches: &SharedMemory<Vector<F, V>>,
    sums: &mut Sequence<Array<Vector<F, Two>>>,
    grad_at: u32,
    patch_at: u32,
) {
    let mma = tf32_mma::<F, M>();
    #[unroll]
    for step in 0..comptime!(HALF_POSITIONS / TF32_PRODUCT_DEPTH) {
        // The lane's positions t and t + 4 of the step.
        let near = comptime!(step * TF32_PRODUCT_DEPTH * STAGED_RUNS);
        let far = comptime!(near + 4 * STAGED_RUNS);
        let (a_near, a_far) = (
            grads[(grad_at + near) as usize],
            grads[(grad_at + far) as usize],
        );
        let (b_near, b_far) = (
            patches[(patch_at + near) as usize],
            patches[(patch_at + far) as usize],
        );
        let mut rows = Sequence::<Array<Vector<M, One>>>::new();
        #[unroll]
        for i in 0..ROW_BLOCKS {
            let e = comptime!((2 * i) as usize);
            let mut a = Array::<Vector<M, One>>::new(4usize);
            a[0] = Vector::new(M::cast_from(a_near[e]));
            a[1] = Vector::new(M::cast_from(a_near[e + 1]));
            a[2] = Vector::new(M::cast_from(a_far[e]));
            a[3] = Vector::new(M::cast_from(a_far[e + 1]));
            rows.push(a);
        }
        #[unroll]
        for j in 0..COLUMN_BLOCKS {
            let e = comptime!(j as usize);
            let mut b = Array::<Vector<M, One>>::new(2usize);
            b[0] = Vector::new(M::cast_from(b_near[e]));
            b[1] = Vector::new(M::cast_from(b_far[e]));
            #[unroll]
            for i in 0..ROW_BLOCKS {
                mma.execute_inplace(
                    rows.index(comptime!(i as usize)),
                    &b,
                    sums.index_mut(comptime!((i * COLUMN_BLOCKS + j) as usize)),
                );
            }
        }
    }
}

/// The warp's sums into `finished` (row-major, its block from `first`), through the
/// mapping of the module's notes: written, or `add`ed to what is there.
#[cube]
fn store_sums<F: Float>(
    sums: &Sequence<Array<Vector<F, Two>>>,
    finished: &mut SharedMemory<F>,
    first: u32,
    #[comptime] add: bool,
) {
    // The accumulators' layout is the bf16 `mma`'s, whatever the operands.
    store_mma_sums::<F, F>(
        sums,
        finished,
        first,
        FINISHED_ROW,
        1u32,
        ROW_BLOCKS,
        COLUMN_BLOCKS,
        true,
        add,
    );
}
