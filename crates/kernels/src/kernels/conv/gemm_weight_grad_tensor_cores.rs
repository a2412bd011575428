//! The weight and bias gradients of [`super::gemm_weight_grad`] on the tensor cores, in
//! TF32 or bf16: the same partial sums per split, tiles of 64 filters × 64 columns, slices
//! of 8 quads (32 conv positions) and loaders, so the same launch geometry.
//!
//! The product's depth is the conv positions. The fp32 kernel stages a quad's four
//! positions as one vector per filter and column, which no matrix load can read (the
//! positions are neither contiguous nor evenly strided there); this one stores each
//! vector's four values in four rows, position-major: the gradients as a [position][filter]
//! matrix (the products' A, column-major) and the patches as [position][column] (their B,
//! row-major). Rows are ordered value-major (row = r · 8 + quad slot): the loaders' adjacent
//! units hold adjacent slots, whose stores then fall in different banks; the sum over
//! positions does not depend on their order. Each of the eight warps multiplies a 16 × 32
//! block of the tile k positions at a time (see [`super::gemm_tensor_cores`] for `S`, `M`
//! and k), accumulating in fp32: TF32 through `wmma` fragments, bf16 through `ldmatrix` and
//! `mma.m16n8k16`, as the forward does and for the same reason. As in the forward, the next
//! slice's loads go out before this slice's products and wait in fp32 registers until they
//! are staged, so that the products hide their latency. The finished tile goes through
//! shared memory to be written within the partials' bounds. The bias sums stay fp32 adds, in
//! registers.

use cubecl::prelude::*;

use super::gemm::CUBE_UNITS;
use super::gemm_bf16_mma::{LdmatrixRuns, Two, bf16_mma, mma_accumulators, store_mma_sums};
use super::gemm_tf32_wmma::{accumulators, operand_parts};
use super::gemm_weight_grad::{LOADS_PER_UNIT, SLICE_QUADS, SliceLoader, SlotValues, TILE_SIDE};
use super::tensor_tile::{BF16_PRODUCT_DEPTH, FRAGMENT_ALIGN, MMA_COLUMNS, PRODUCT_SIDE};
use crate::kernels::geometry::{Nchw, Window};

/// Conv positions in a slice: the products' depth per slice.
pub(crate) const SLICE_POSITIONS: u32 = SLICE_QUADS * 4;
/// Values in a staged row: the tile's 64 and padding, so that the value-major rows of
/// adjacent quad slots start 4 banks apart (a multiple of 8 values, as the matrix loads
/// need for 16-bit operands).
pub(crate) const STAGED_ROW: u32 = TILE_SIDE + 8;
/// Values in a row of the finished tile.
pub(crate) const FINISHED_ROW: u32 = TILE_SIDE + 4;
/// Tile rows of products (filters / 16) and columns of a warp's products (2 × 16 columns).
pub(crate) const PRODUCT_ROWS: u32 = TILE_SIDE / PRODUCT_SIDE;
const WARP_PRODUCTS: u32 = 2;
/// The bf16 `mma`s across a warp's 32 columns.
pub(crate) const WARP_MMA_COLUMNS: u32 = WARP_PRODUCTS * PRODUCT_SIDE / MMA_COLUMNS;

/// Partial weight (and bias) gradients of split CUBE_POS_Z over the tile (CUBE_POS_Y filters,
/// CUBE_POS_X columns), as [`super::gemm_weight_grad::conv_gemm_weight_grad`], whose
/// arguments these are, with products of `M` operands staged as `S`, `product_depth` deep.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv_gemm_weight_grad_tensor_cores<F: Float, S: Float, M: Float, A: Int>(
    x: &Array<F>,
    grad: &Array<F>,
    argmax: &ComptimeOption<Array<A>>,
    partials: &mut Array<F>,
    x_map: Nchw,
    grad_map: Nchw,
    quads_h: u32,
    quads_w: u32,
    quads_per_split: u32,
    #[comptime] conv: Window,
    #[comptime] with_bias: bool,
    #[comptime] product_depth: u32,
    #[define(A)] _argmax_type: StorageType,
) {
    let loader = SliceLoader::new(&x_map, &grad_map, quads_h, quads_w, quads_per_split, conv);

    let staged_len = comptime!((SLICE_POSITIONS * STAGED_ROW) as usize);
    let mut grads = SharedMemory::<S>::new_aligned(staged_len, FRAGMENT_ALIGN);
    let mut patches = SharedMemory::<S>::new_aligned(staged_len, FRAGMENT_ALIGN);
    let mut finished = SharedMemory::<F>::new_aligned(
        comptime!((TILE_SIDE * FINISHED_ROW) as usize),
        FRAGMENT_ALIGN,
    );

    let finished_row = comptime!(FINISHED_ROW);
    // This warp's block: filters from `warp_co`, columns from `warp_k`.
    let warp = UNIT_POS / PLANE_DIM;
    let warp_co = (warp % PRODUCT_ROWS) * PRODUCT_SIDE;
    let warp_k = (warp / PRODUCT_ROWS) * WARP_PRODUCTS * PRODUCT_SIDE;
    // The sums and operands of one path or the other (bf16 through `ldmatrix` and `mma`,
    // TF32 through `wmma`, as in the forward): the other's are empty, and so is their code.
    let ldmatrix = comptime!(product_depth == BF16_PRODUCT_DEPTH);
    let wmma_products = comptime!(if ldmatrix { 0 } else { WARP_PRODUCTS });
    let sums = accumulators::<F>(wmma_products, product_depth);
    let grad_parts = operand_parts::<M>(
        cmma::MatrixIdent::A,
        cmma::MatrixLayout::ColMajor,
        comptime!(if ldmatrix { 0u32 } else { 1u32 }),
        product_depth,
    );
    let patch_parts = operand_parts::<M>(
        cmma::MatrixIdent::B,
        cmma::MatrixLayout::RowMajor,
        wmma_products,
        product_depth,
    );
    let mut mma_sums =
        mma_accumulators::<F>(comptime!(if ldmatrix { WARP_MMA_COLUMNS } else { 0 }));
    let starts = StagedStarts::of_this_lane(warp_co, warp_k, 1u32);

    let bias_loader = with_bias && CUBE_POS_X == 0;
    let mut bias_sums = Array::<F>::new(LOADS_PER_UNIT as usize);
    #[unroll]
    for h in 0..LOADS_PER_UNIT as usize {
        bias_sums[h] = F::new(0.0);
    }

    // The next slice's values, in fp32 until they are staged, as in the forward.
    let mut held = SlotValues::<F>::empty();
    let mut quad = loader.first_quad();
    loader.load::<F, A>(x, grad, argmax, &quad, &mut held, conv);
    let mut first = loader.quad_begin;
    while first < loader.quad_end {
        #[unroll]
        for h in 0..LOADS_PER_UNIT {
            let dy = held.grads[h as usize];
            if bias_loader {
                bias_sums[h as usize] += dy[0] + dy[1] + dy[2] + dy[3];
            }
            let patch = held.patches[h as usize];
            let column = loader.lane + h * 32;
            #[unroll]
            for r in 0..4u32 {
                let at = ((r * SLICE_QUADS + loader.slot) * STAGED_ROW + column) as usize;
                grads[at] = S::cast_from(dy[r as usize]);
                patches[at] = S::cast_from(patch[r as usize]);
            }
        }
        sync_cube();
        // The next slice's loads go out before this slice's products.
        let next = first + SLICE_QUADS as usize;
        if next < loader.quad_end {
            loader.next_quad(&mut quad);
            loader.load::<F, A>(x, grad, argmax, &quad, &mut held, conv);
        }
        if ldmatrix {
            mma_slice::<F, S, S>(&grads, &patches, &mut mma_sums, &starts, 1u32);
        } else {
            wmma_slice::<F, S, M>(
                &grads,
                &patches,
                &grad_parts,
                &patch_parts,
                &sums,
                warp_co,
                warp_k,
                product_depth,
            );
        }
        sync_cube();
        first = next;
    }

    // The finished tile, row-major: filter co's column k is co · FINISHED_ROW + k.
    if ldmatrix {
        store_mma_sums::<F, S>(
            &mma_sums,
            &mut finished,
            warp_co * FINISHED_ROW + warp_k,
            finished_row,
            1u32,
            1u32,
            WARP_MMA_COLUMNS,
            false,
            false,
        );
    } else {
        #[unroll]
        for j in 0..wmma_products {
            let at = (warp_co * FINISHED_ROW + warp_k + j * PRODUCT_SIDE) as usize;
            cmma::store(
                &mut finished.slice_mut(at, finished.len()),
                sums.index(comptime!(j as usize)),
                finished_row.runtime(),
                cmma::MatrixLayout::RowMajor,
            );
        }
    }
    sync_cube();
    // Adjacent units write adjacent columns of a filter's row.
    for l in 0..comptime!(TILE_SIDE * TILE_SIDE / CUBE_UNITS) {
        let at = UNIT_POS + l * CUBE_UNITS;
        let co = loader.first_co + (at / TILE_SIDE) as usize;
        let k = loader.first_k + (at % TILE_SIDE) as usize;
        if co < loader.c_out && k < loader.depth {
            let value = finished[((at / TILE_SIDE) * FINISHED_ROW + at % TILE_SIDE) as usize];
            partials[loader.partials_row(co) + k] = value;
        }
    }

    // The bias: each loader's sums over its slot, added up over the eight slots in shared
    // memory.
    if with_bias && CUBE_POS_X == 0 {
        let mut bias_parts = SharedMemory::<F>::new((SLICE_QUADS * TILE_SIDE) as usize);
        #[unroll]
        for h in 0..LOADS_PER_UNIT {
            let at = loader.slot * TILE_SIDE + loader.lane + h * 32;
            bias_parts[at as usize] = bias_sums[h as usize];
        }
        sync_cube();
        if UNIT_POS < TILE_SIDE {
            let co = loader.first_co + UNIT_POS as usize;
            let mut bias = F::new(0.0);
            #[unroll]
            for s in 0..SLICE_QUADS {
                bias += bias_parts[(s * TILE_SIDE + UNIT_POS) as usize];
            }
            if co < loader.c_out {
                partials[loader.partials_row(co) + loader.depth] = bias;
            }
        }
    }
}

/// This warp's products of one staged slice through `wmma` fragments (TF32): its 16
/// filters times its [`WARP_PRODUCTS`] blocks of 16 columns, `product_depth` positions at a
/// time.
#[cube]
#[allow(clippy::too_many_arguments)]
fn wmma_slice<F: Float, S: Float, M: Float>(
    grads: &SharedMemory<S>,
    patches: &SharedMemory<S>,
    grad_parts: &Sequence<cmma::Matrix<M>>,
    patch_parts: &Sequence<cmma::Matrix<M>>,
    sums: &Sequence<cmma::Matrix<F>>,
    warp_co: u32,
    warp_k: u32,
    #[comptime] product_depth: u32,
) {
    let staged_row = comptime!(STAGED_ROW);
    let grad_part = grad_parts.index(0usize);
    #[unroll]
    for step in 0..comptime!(SLICE_POSITIONS / product_depth) {
        let row = step * product_depth * STAGED_ROW;
        cmma::load(
            grad_part,
            &grads.slice((row + warp_co) as usize, grads.len()),
            staged_row.runtime(),
        );
        #[unroll]
        for j in 0..WARP_PRODUCTS {
            let at = (row + warp_k + j * PRODUCT_SIDE) as usize;
            cmma::load(
                patch_parts.index(comptime!(j as usize)),
                &patches.slice(at, patches.len()),
                staged_row.runtime(),
            );
        }
        #[unroll]
        for j in 0..WARP_PRODUCTS {
            let sum = sums.index(comptime!(j as usize));
            cmma::execute::<M, M, F, F>(
                grad_part,
                patch_parts.index(comptime!(j as usize)),
                sum,
                sum,
            );
        }
    }
}

/// Where this lane's `ldmatrix` runs start in the weight gradient's stagings (in their
/// elements of `values` bf16), for the first 16 positions of a slice; later ones lie a
/// fixed distance further. Worked out once before the slices: inside them the compiler
/// would recompute them from the unit's position in every slice.
#[derive(CubeType)]
pub(crate) struct StagedStarts {
    grads: u32,
    patches: u32,
}

#[cube]
impl StagedStarts {
    /// The starts for the warp's block of filters from `warp_co` and depths from `warp_k`.
    pub(crate) fn of_this_lane(warp_co: u32, warp_k: u32, #[comptime] values: u32) -> StagedStarts {
        let runs = LdmatrixRuns::of_this_lane();
        StagedStarts {
            grads: (runs.a_depth * STAGED_ROW + warp_co + runs.a_row) / values,
            patches: (runs.b_depth * STAGED_ROW + warp_k) / values,
        }
    }
}

/// This warp's products of one staged slice (bf16, `S`) through `ldmatrix` and
/// `mma.m16n8k16`: for each 16 positions, its 16 filters times its [`WARP_MMA_COLUMNS`]
/// blocks of 8 columns, into `sums`. The stagings hold `E`s of `values` bf16 each (single
/// values here, runs of eight in [`super::gemm_weight_grad_channels_last`]), rows of
/// [`STAGED_ROW`] values; the lane's runs start at `starts`.
///
/// Both stagings are position-major, the transposes of the operand layouts, as the
/// forward's are ([`super::gemm_tensor_cores`]); `ldmatrix .trans` reads each 8 × 8 block
/// transposed, each lane naming one run ([`LdmatrixRuns`], whose depth is here the
/// position): the gradients are the A operand (rows: filters), the patches the B operand.
#[cube]
pub(crate) fn mma_slice<F: Float, S: Float, E: CubePrimitive<Scalar = S>>(
    grads: &SharedMemory<E>,
    patches: &SharedMemory<E>,
    sums: &mut Sequence<Array<Vector<F, Two>>>,
    starts: &StagedStarts,
    #[comptime] values: u32,
) {
    let mma = bf16_mma::<F, S>();
    let run = comptime!((MMA_COLUMNS / values) as usize);
    #[unroll]
    for step in 0..comptime!(SLICE_POSITIONS / BF16_PRODUCT_DEPTH) {
        let step_at = comptime!(step * BF16_PRODUCT_DEPTH * STAGED_ROW / values);
        let at = (starts.grads + step_at) as usize;
        let grad_part = mma.load_matrix::<E, Two>(
            &grads.slice(at, at + run),
            cmma::MatrixIdent::A,
            4usize,
            true,
        );
        #[unroll]
        for j in 0..WARP_MMA_COLUMNS {
            let at = (starts.patches + comptime!(step_at + j * MMA_COLUMNS / values)) as usize;
            let patch_part = mma.load_matrix::<E, Two>(
                &patches.slice(at, at + run),
                cmma::MatrixIdent::B,
                2usize,
                true,
            );
            mma.execute_inplace(
                &grad_part,
                &patch_part,
                sums.index_mut(comptime!(j as usize)),
            );
        }
    }
}
