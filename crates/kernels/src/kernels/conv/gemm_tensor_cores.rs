//! The implicit-GEMM convolution of [`super::gemm`] on the tensor cores, in TF32 or bf16:
//! the same rows (quads of conv output positions), columns (filters) and depth (input
//! channel, kernel row, kernel column), the same patch and filter loaders, the same epilogue
//! ([`write_quad`]: bias, and ReLU + 2×2 pool under an argmax). This file holds the
//! kernel, its loaders and its epilogue; the tile is in [`super::tensor_tile`], a warp's
//! products of a staged slice in [`super::gemm_tf32_wmma`] (TF32) and
//! [`super::gemm_bf16_mma`] (bf16).
//!
//! Why: the fp32 kernels are bound by the FMA pipe, whose peak no tiling passes; the tensor
//! cores multiply TF32 several times faster, and bf16 twice as fast again. The cube stages
//! 32-deep slices of the patches and filters in shared memory as the fp32 kernel does, and
//! each of its eight warps multiplies a 32 × 32 block of the tile out of them with matrix
//! products k deep (below), accumulating in fp32. The sums then go through shared memory so
//! the epilogue sees whole quads.
//!
//! The operands' precision is the kernel's `M` (the products' operand type) and `S` (the
//! type they are staged in):
//! - TF32 (`M = tf32`, `S = F`, k = 8): the tensor cores read each staged fp32 value's top
//!   19 bits (a 10-bit mantissa).
//! - bf16 (`M = S = bf16`, k = 16): the loaders round each value to bf16 (an 8-bit
//!   significand) as they stage it, which also halves the staged slice's bytes. The next
//!   slice waits in registers in fp32 and is rounded only as it is staged: a conversion as
//!   its values arrive would wait for their global load, and the products in between would
//!   no longer hide that load's latency
//!   (`docs/perf-log/2026-11-28-tensor-core-loads-in-flight.md`).
//!
//! Either way a product is exact in the fp32 accumulator; only the operands are rounded.
//! In bf16, layers whose channels come in runs of eight run [`super::gemm_channels_last`]
//! instead, on channels-last copies; this kernel keeps the others (first layers).

use cubecl::prelude::*;

use super::gemm::{CUBE_UNITS, Four, QuadPatch, load_filters, write_quad};
use super::gemm_bf16_mma::{mma_accumulators, mma_slice, store_mma_sums};
use super::gemm_tf32_wmma::{accumulators, operand_parts, wmma_slice};
use super::tensor_tile::{
    BF16_PRODUCT_DEPTH, FRAGMENT_ALIGN, PRODUCT_SIDE, SLICE_DEPTH, TensorTile, WARP_MMA_COLUMNS,
    WARP_PRODUCTS,
};
use crate::kernels::geometry::{Nchw, Window};

/// The convolution (+ bias) over the cube's `tile` on the tensor cores: X picks its quads
/// of the `quads_h` × `quads_w` quad grid per image, Y its columns; [`write_quad`] writes
/// them, pooled under an `argmax` — as [`super::gemm::conv_gemm`], whose arguments
/// these are. The products take `M` operands, `product_depth` deep, staged as `S` (see the
/// module's documentation). Launched with [`CUBE_UNITS`] units per cube, for f32 only.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv_gemm_tensor_cores<F: Float, S: Float, M: Float, A: Int>(
    src: &Array<F>,
    weight: &Array<F>,
    bias: &ComptimeOption<Array<F>>,
    output: &mut Array<F>,
    argmax: &mut ComptimeOption<Array<A>>,
    src_map: Nchw,
    output_map: Nchw,
    quads_h: u32,
    quads_w: u32,
    #[comptime] conv: Window,
    #[comptime] transposed: bool,
    #[comptime] tile: TensorTile,
    #[comptime] product_depth: u32,
    #[define(A)] _argmax_type: StorageType,
) {
    let cols = output_map.channels;
    let tile_quads = comptime!(tile.quads());
    let first_quad = CUBE_POS_X as usize * tile_quads as usize;
    let first_col = CUBE_POS_Y as usize * comptime!(tile.columns() as usize);
    let depth = src_map.channels * comptime!((conv.size_h * conv.size_w) as usize);
    let unit = UNIT_POS;

    // The patch loader: unit `unit` gathers quad `unit % tile_quads` at depth
    // `unit / tile_quads` of each slice and `patch_step` deeper for each further load.
    let patch_step = comptime!(CUBE_UNITS / tile.quads());
    let patch_loads = comptime!((SLICE_DEPTH / patch_step) as usize);
    let a_quad = unit % tile_quads;
    let a_depth = unit / tile_quads;
    let patch = QuadPatch::of(
        &src_map,
        first_quad + a_quad as usize,
        quads_h,
        quads_w,
        conv,
    );

    // The filter loader: adjacent units load adjacent depths of four adjacent columns (the
    // forward's filters are contiguous along the depth), `filter_step` vectors further
    // along for each further load.
    let filter_step = comptime!(CUBE_UNITS / SLICE_DEPTH);
    let filter_loads = comptime!((tile.column_vectors() / filter_step) as usize);
    let b_depth = unit % SLICE_DEPTH;
    let b_vector = unit / SLICE_DEPTH;
    let filter_row = comptime!(tile.filter_row());
    let rows_stride = comptime!(tile.rows_stride());
    let filters_at = comptime!(tile.patch_vectors());

    let mut staged = SharedMemory::<Vector<S, Four>>::new_aligned(
        comptime!(tile.staged_vectors() as usize),
        FRAGMENT_ALIGN,
    );
    let mut finished =
        SharedMemory::<F>::new_aligned(comptime!(tile.finished_floats() as usize), FRAGMENT_ALIGN);

    // This warp's 32 × 32 block of the tile: rows from `warp_row`, columns from `warp_col`
    // (the tall tile's warps of 64 × 32 are the channels-last kernel's alone).
    comptime!(assert_eq!(
        tile.warp_row_blocks, WARP_PRODUCTS,
        "the gathering kernel's warps are 32 × 32"
    ));
    let warp = unit / PLANE_DIM;
    let warp_row = (warp / comptime!(tile.warps_across)) * WARP_PRODUCTS * PRODUCT_SIDE;
    let warp_col = (warp % comptime!(tile.warps_across)) * WARP_PRODUCTS * PRODUCT_SIDE;
    let rows_floats = comptime!(4 * tile.rows_stride());
    // The sums and operands of one path or the other: the other's are empty, and so is
    // their code.
    let ldmatrix = comptime!(product_depth == BF16_PRODUCT_DEPTH);
    let wmma_products = comptime!(if ldmatrix { 0 } else { WARP_PRODUCTS });
    let sums = accumulators::<F>(wmma_products * wmma_products, product_depth);
    let patch_parts = operand_parts::<M>(
        cmma::MatrixIdent::A,
        cmma::MatrixLayout::ColMajor,
        wmma_products,
        product_depth,
    );
    let filter_parts = operand_parts::<M>(
        cmma::MatrixIdent::B,
        cmma::MatrixLayout::RowMajor,
        wmma_products,
        product_depth,
    );
    let mut mma_sums = mma_accumulators::<F>(comptime!(if ldmatrix {
        WARP_PRODUCTS * WARP_MMA_COLUMNS
    } else {
        0
    }));

    // The next slice's values, in fp32 until they are staged (see the module's notes).
    let mut next_patches = Array::<Vector<F, Four>>::new(patch_loads);
    let mut next_filters = Array::<Vector<F, Four>>::new(filter_loads);
    load_slice::<F>(
        src,
        weight,
        &patch,
        &mut next_patches,
        &mut next_filters,
        0,
        depth,
        first_col,
        cols,
        conv,
        transposed,
        tile,
    );
    let slices = depth.div_ceil(SLICE_DEPTH as usize);
    for slice in 0..slices {
        #[unroll]
        for l in 0..patch_loads {
            let k = a_depth + l as u32 * patch_step;
            staged[(k * rows_stride + a_quad) as usize] = Vector::cast_from(next_patches[l]);
        }
        #[unroll]
        for l in 0..filter_loads {
            let vector = b_vector + l as u32 * filter_step;
            staged[(filters_at + b_depth * filter_row + vector) as usize] =
                Vector::cast_from(next_filters[l]);
        }
        sync_cube();
        // The next slice's loads go out before this slice's products.
        if slice + 1 < slices {
            load_slice::<F>(
                src,
                weight,
                &patch,
                &mut next_patches,
                &mut next_filters,
                (slice + 1) * SLICE_DEPTH as usize,
                depth,
                first_col,
                cols,
                conv,
                transposed,
                tile,
            );
        }
        if ldmatrix {
            mma_slice::<F, S>(&staged, &mut mma_sums, warp_row, warp_col, tile);
        } else {
            wmma_slice::<F, S, M>(
                &staged,
                &patch_parts,
                &filter_parts,
                &sums,
                warp_row,
                warp_col,
                product_depth,
                tile,
            );
        }
        sync_cube();
    }

    // The finished tile, column-major: column c's row r is float c · rows_floats + r.
    if ldmatrix {
        store_mma_sums::<F, S>(
            &mma_sums,
            &mut finished,
            warp_col * rows_floats + warp_row,
            1u32,
            rows_floats,
            WARP_PRODUCTS,
            WARP_MMA_COLUMNS,
            false,
            false,
        );
    } else {
        #[unroll]
        for i in 0..wmma_products {
            #[unroll]
            for j in 0..wmma_products {
                let column = warp_col + j * PRODUCT_SIDE;
                let at = (column * rows_floats + warp_row + i * PRODUCT_SIDE) as usize;
                cmma::store(
                    &mut finished.slice_mut(at, finished.len()),
                    sums.index(comptime!((i * wmma_products + j) as usize)),
                    rows_floats.runtime(),
                    cmma::MatrixLayout::ColMajor,
                );
            }
        }
    }
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

/// The finished tile (column-major in `finished`: column c's row r at float c ·
/// 4 · rows_stride + r) through [`write_quad`], quad by quad, from the cube's first quad and
/// column.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn write_finished<F: Float, A: Int>(
    finished: &SharedMemory<F>,
    output: &mut Array<F>,
    argmax: &mut ComptimeOption<Array<A>>,
    bias: &ComptimeOption<Array<F>>,
    output_map: &Nchw,
    first_quad: usize,
    first_col: usize,
    quads_h: u32,
    quads_w: u32,
    #[comptime] tile: TensorTile,
) {
    let tile_quads = comptime!(tile.quads());
    let rows_floats = comptime!(4 * tile.rows_stride());
    let unit = UNIT_POS;
    // Each unit writes quads of one column at a time, adjacent units adjacent quads; a
    // loop, not unrolled: unrolled, the pooling epilogue holds so many registers that an SM
    // fits only one cube.
    for l in 0..comptime!(tile.columns() * tile.quads() / CUBE_UNITS) {
        let at = unit + l * CUBE_UNITS;
        let column = at / tile_quads;
        let quad = at % tile_quads;
        let first = (column * rows_floats + 4 * quad) as usize;
        let mut quad_sums = Vector::<F, Four>::empty();
        #[unroll]
        for r in 0..4usize {
            quad_sums[r] = finished[first + r];
        }
        write_quad::<F, A>(
            output,
            argmax,
            bias,
            output_map,
            quad_sums,
            first_quad + quad as usize,
            first_col + column as usize,
            quads_h,
            quads_w,
        );
    }
}

/// Global loads of the slice at depth `k0` into registers: the unit's patch quads and
/// filter vectors (see [`conv_gemm_tensor_cores`]'s loaders).
#[cube]
#[allow(clippy::too_many_arguments)]
fn load_slice<F: Float>(
    src: &Array<F>,
    weight: &Array<F>,
    patch: &QuadPatch,
    patches: &mut Array<Vector<F, Four>>,
    filters: &mut Array<Vector<F, Four>>,
    k0: usize,
    depth: usize,
    first_col: usize,
    cols: usize,
    #[comptime] conv: Window,
    #[comptime] transposed: bool,
    #[comptime] tile: TensorTile,
) {
    let unit = UNIT_POS;
    let patch_step = comptime!(CUBE_UNITS / tile.quads());
    let a_depth = (unit / comptime!(tile.quads())) as usize;
    #[unroll]
    for l in 0..comptime!((SLICE_DEPTH / patch_step) as usize) {
        patches[l] = patch.at::<F>(src, k0 + a_depth + l * patch_step as usize, depth, conv);
    }
    let filter_step = comptime!(CUBE_UNITS / SLICE_DEPTH);
    let b_depth = k0 + (unit % SLICE_DEPTH) as usize;
    let b_vector = unit / SLICE_DEPTH;
    #[unroll]
    for l in 0..comptime!((tile.column_vectors() / filter_step) as usize) {
        let b_cols = first_col + ((b_vector + l as u32 * filter_step) * 4) as usize;
        filters[l] = load_filters::<F>(weight, b_depth, depth, b_cols, cols, transposed, conv);
    }
}
