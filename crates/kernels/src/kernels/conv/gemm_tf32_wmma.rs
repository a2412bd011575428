//! The TF32 products on the tensor cores through CUDA's `wmma` fragments (CubeCL's `cmma`,
//! 16 × 16 × 8, loaded from a generic pointer): a warp's products of the forward's staged
//! slice, and the fragments it and the weight gradient use. TF32 has a path apart from
//! bf16's ([`super::gemm_bf16_mma`]) because `ldmatrix` moves only 16-bit values.

use cubecl::prelude::*;

use super::gemm::Four;
use super::tensor_tile::{PRODUCT_SIDE, SLICE_DEPTH, TensorTile, WARP_PRODUCTS};

/// This warp's products of one staged slice through `wmma` fragments (TF32): 16 × 16 ×
/// `product_depth` products of its [`WARP_PRODUCTS`] × [`WARP_PRODUCTS`] blocks.
#[cube]
#[allow(clippy::too_many_arguments)]
pub(crate) fn wmma_slice<F: Float, S: Float, M: Float>(
    staged: &SharedMemory<Vector<S, Four>>,
    patch_parts: &Sequence<cmma::Matrix<M>>,
    filter_parts: &Sequence<cmma::Matrix<M>>,
    sums: &Sequence<cmma::Matrix<F>>,
    warp_row: u32,
    warp_col: u32,
    #[comptime] product_depth: u32,
    #[comptime] tile: TensorTile,
) {
    let rows_stride = comptime!(tile.rows_stride());
    let filter_row = comptime!(tile.filter_row());
    let filters_at = comptime!(tile.patch_vectors());
    let rows_floats = comptime!(4 * tile.rows_stride());
    let filter_stride = comptime!(4 * tile.filter_row());
    #[unroll]
    for step in 0..comptime!(SLICE_DEPTH / product_depth) {
        let k = step * product_depth;
        #[unroll]
        for i in 0..WARP_PRODUCTS {
            // Patches are column-major (rows contiguous at each depth), in vectors of 4.
            let at = (k * rows_stride + (warp_row + i * PRODUCT_SIDE) / 4) as usize;
            cmma::load(
                patch_parts.index(comptime!(i as usize)),
                &staged.slice(at, staged.len()),
                rows_floats.runtime(),
            );
            let at = (filters_at + k * filter_row + (warp_col + i * PRODUCT_SIDE) / 4) as usize;
            cmma::load(
                filter_parts.index(comptime!(i as usize)),
                &staged.slice(at, staged.len()),
                filter_stride.runtime(),
            );
        }
        #[unroll]
        for i in 0..WARP_PRODUCTS {
            #[unroll]
            for j in 0..WARP_PRODUCTS {
                let sum = sums.index(comptime!((i * WARP_PRODUCTS + j) as usize));
                cmma::execute::<M, M, F, F>(
                    patch_parts.index(comptime!(i as usize)),
                    filter_parts.index(comptime!(j as usize)),
                    sum,
                    sum,
                );
            }
        }
    }
}

/// A warp's `count` fp32 sums of 16 × 16 products, `product_depth` deep, at zero.
#[cube]
pub fn accumulators<F: Float>(
    #[comptime] count: u32,
    #[comptime] product_depth: u32,
) -> Sequence<cmma::Matrix<F>> {
    let mut sums = Sequence::new();
    #[unroll]
    for _ in 0..count {
        sums.push(cmma::Matrix::<F>::from_value(
            cmma::MatrixIdent::Accumulator,
            PRODUCT_SIDE as usize,
            PRODUCT_SIDE as usize,
            product_depth as usize,
            cmma::MatrixLayout::Undefined,
            F::new(0.0),
        ));
    }
    sums
}

/// A warp's `count` fragments of one operand of the products, loaded per step.
#[cube]
pub fn operand_parts<M: Float>(
    #[comptime] ident: cmma::MatrixIdent,
    layout: cmma::MatrixLayout,
    #[comptime] count: u32,
    #[comptime] product_depth: u32,
) -> Sequence<cmma::Matrix<M>> {
    let mut parts = Sequence::new();
    #[unroll]
    for _ in 0..count {
        parts.push(unsafe {
            cmma::Matrix::<M>::uninitialized(
                ident,
                PRODUCT_SIDE as usize,
                PRODUCT_SIDE as usize,
                product_depth as usize,
                layout,
            )
        });
    }
    parts
}
