//! The implicit-GEMM convolution of [`super::gemm`] on the tensor cores, in TF32 or bf16:
//! the same rows (quads of conv output positions), columns (filters) and depth (input
//! channel, kernel row, kernel column), the same patch and filter loaders, the same epilogue
//! ([`write_quad`]: bias, and ReLU + 2×2 pool under an argmax).
//!
//! Why: the fp32 kernels run the FMA pipe at ≈ 55–60% and cannot go faster than its peak
//! (67 TFLOP/s on an H100); the tensor cores multiply TF32 several times faster, and bf16
//! twice as fast again. The cube stages 32-deep slices of the patches and filters in shared
//! memory as the fp32 kernel does, and each of its eight warps multiplies a 32 × 32 block of
//! the tile out of them with matrix products k deep (below), accumulating in fp32. The sums
//! then go through shared memory so the epilogue sees whole quads.
//!
//! The operands' precision is the kernel's `M` (the products' operand type) and `S` (the
//! type they are staged in):
//! - TF32 (`M = tf32`, `S = F`, k = 8): the tensor cores read each staged fp32 value's top
//!   19 bits (a 10-bit mantissa).
//! - bf16 (`M = S = bf16`, k = 16): the loaders round each value to bf16 (an 8-bit
//!   significand) as they stage it, which also halves the staged slice's bytes. The next
//!   slice waits in registers in fp32 and is rounded only as it is staged: rounded as it
//!   arrived, each conversion waited for its global load, and the products in between no
//!   longer hid that load's latency (Nsight Compute, H200: 37% of the warps' stalls; the
//!   CIFAR-shaped network's bf16 products 19–30% faster without the wait).
//!
//! Either way a product is exact in the fp32 accumulator; only the operands are rounded.
//! In bf16, layers whose channels come in runs of eight run [`super::gemm_channels_last`]
//! instead, on channels-last copies; this kernel keeps the others (first layers).
//!
//! How the operands reach the tensor cores differs:
//! - TF32: CUDA's `wmma` fragments (CubeCL's `cmma`), 16 × 16 × 8, loaded from a generic
//!   pointer.
//! - bf16: `ldmatrix` and `mma.m16n8k16` (CubeCL's manual matrix API). `ldmatrix .trans`
//!   reads a staged 8 × 8 block in one instruction and transposes it into the operand's
//!   registers. Through `wmma`, each fragment load was a generic `LD` plus a `MOVM` transpose
//!   per register (Nsight Compute, H200: 16% of the forward's instructions, 21% of its
//!   stalls). `ldmatrix` moves only 16-bit values, so TF32 keeps `wmma`.

use cubecl::prelude::*;

use super::gemm::{CUBE_UNITS, Four, QuadPatch, load_filters, write_quad};
use crate::kernels::geometry::{Nchw, Window};

/// Depth of one shared-memory slice: four TF32 or two bf16 matrix products deep.
pub const SLICE_DEPTH: u32 = 32;
/// Rows and columns of one matrix product (its depth is the kernel's `product_depth`).
pub const PRODUCT_SIDE: u32 = 16;
/// Depths of one matrix product: of TF32 operands and of bf16 ones (the shapes CUDA's
/// matrix units take with fp32 sums).
pub const TF32_PRODUCT_DEPTH: u32 = 8;
pub const BF16_PRODUCT_DEPTH: u32 = 16;
/// Columns of one bf16 `mma` (16 rows × 8 columns × 16 deep).
pub const MMA_COLUMNS: u32 = 8;
/// Warps per cube, and the products side by side in a warp's 32 × 32 block.
pub(crate) const WARPS: u32 = 8;
pub(crate) const WARP_PRODUCTS: u32 = 2;
/// The bf16 `mma`s across a warp's block (its rows take [`WARP_PRODUCTS`]).
pub(crate) const WARP_MMA_COLUMNS: u32 = WARP_PRODUCTS * PRODUCT_SIDE / MMA_COLUMNS;

/// Two adjacent values: a register of two bf16 operands, or two of an `mma`'s fp32 sums.
pub(crate) type Two = Const<2>;
/// Lanes of a CUDA warp: the matrix instructions' unit of work, fixed on every GPU with
/// matrix units that these kernels run on.
pub(crate) const WARP_LANES: u32 = 32;
/// Bytes the matrix loads and stores need their shared-memory addresses aligned to.
pub const FRAGMENT_ALIGN: usize = 32;
/// Vectors (of 4) padding each staged row: a matrix load reads 8 adjacent values at each
/// of 4 depths; rows 8 values longer than a multiple of 32 put those 32 in 32 banks (Nsight
/// Compute, H100, unpadded: the L1/shared pipe at 85%, the tensor pipe mostly idle).
const ROW_PAD: u32 = 2;

/// A tile's shape: how many warps sit side by side along the columns (the others sit
/// below them along the rows), and how many blocks of 16 rows each warp's block has (its
/// columns are [`WARP_PRODUCTS`] blocks of 16).
#[derive(CubeType, Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct TensorTile {
    pub warps_across: u32,
    pub warp_row_blocks: u32,
}

impl TensorTile {
    /// 128 rows × 64 columns, warps of 32 × 32.
    pub const WIDE: TensorTile = TensorTile {
        warps_across: 2,
        warp_row_blocks: WARP_PRODUCTS,
    };
    /// 256 rows × 32 columns, for GEMMs of at most 32 columns.
    pub const NARROW: TensorTile = TensorTile {
        warps_across: 1,
        warp_row_blocks: WARP_PRODUCTS,
    };
    /// 256 rows × 64 columns, warps of 64 × 32, for the channels-last kernel
    /// ([`super::gemm_channels_last`]; this module's kernels take the tiles above): each
    /// column block's matrix load then serves four `mma`s instead of two.
    pub const TALL: TensorTile = TensorTile {
        warps_across: 2,
        warp_row_blocks: 2 * WARP_PRODUCTS,
    };

    pub(crate) fn warps_down(self) -> u32 {
        WARPS / self.warps_across
    }

    /// Rows per warp's block.
    pub(crate) fn warp_rows(self) -> u32 {
        self.warp_row_blocks * PRODUCT_SIDE
    }

    /// Rows per tile.
    pub(crate) fn rows(self) -> u32 {
        self.warps_down() * self.warp_rows()
    }

    /// Quads (of four rows) per tile.
    pub fn quads(self) -> u32 {
        self.rows() / 4
    }

    /// Columns per tile.
    pub fn columns(self) -> u32 {
        self.warps_across * WARP_PRODUCTS * PRODUCT_SIDE
    }

    /// Vectors of four columns per tile.
    fn column_vectors(self) -> u32 {
        self.columns() / 4
    }

    /// Vectors from one depth of the staged patches to the next, and from one column of the
    /// finished tile to the next: the tile's quads and [`ROW_PAD`]. A matrix load reads
    /// 4 depths (or columns) × 8 rows at once; unpadded, the 4 fall in the same banks.
    pub(crate) fn rows_stride(self) -> u32 {
        self.quads() + ROW_PAD
    }

    /// Vectors in a staged filter row (one depth): the tile's and [`ROW_PAD`].
    fn filter_row(self) -> u32 {
        self.column_vectors() + ROW_PAD
    }

    /// Vectors of the staged patches: [depth][quad], i.e. the patch matrix column-major.
    fn patch_vectors(self) -> u32 {
        SLICE_DEPTH * self.rows_stride()
    }

    /// Vectors of the staged slice in shared memory: patches, then filters.
    fn staged_vectors(self) -> u32 {
        self.patch_vectors() + SLICE_DEPTH * self.filter_row()
    }

    /// Floats of the finished tile in shared memory ([column][row]). It is only used after
    /// the products, when the staged slice no longer is: CubeCL places the two in the same
    /// bytes where they fit.
    pub(crate) fn finished_floats(self) -> u32 {
        self.columns() * 4 * self.rows_stride()
    }
}

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
    // loop, not unrolled (unrolled, the pooling epilogue took LeNet's launch to 180
    // registers and one cube an SM).
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

/// This warp's products of one staged slice through `wmma` fragments (TF32): 16 × 16 ×
/// `product_depth` products of its [`WARP_PRODUCTS`] × [`WARP_PRODUCTS`] blocks.
#[cube]
#[allow(clippy::too_many_arguments)]
fn wmma_slice<F: Float, S: Float, M: Float>(
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

/// The one `mma` shape the bf16 products run (here and in the weight gradient): 16 rows × 8
/// columns × 16 deep, bf16 (`S`) operands and fp32 (`F`) sums. Their loads, products and
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
/// compiler redid in every slice of the products (Nsight Compute, H200).
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
fn mma_slice<F: Float, S: Float>(
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
/// row · row_step + column · column_step`, each where the `mma` layout puts it.
#[cube]
pub(crate) fn store_mma_sums<F: Float, S: Float>(
    sums: &Sequence<Array<Vector<F, Two>>>,
    finished: &mut SharedMemory<F>,
    first: u32,
    #[comptime] row_step: u32,
    #[comptime] column_step: u32,
    #[comptime] row_blocks: u32,
    #[comptime] column_blocks: u32,
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
                    let (row, column) =
                        mma.position_of_nth(lane, pair * 2 + e, cmma::MatrixIdent::Accumulator);
                    let row = i * PRODUCT_SIDE + row;
                    let column = j * MMA_COLUMNS + column;
                    finished[(first + row * row_step + column * column_step) as usize] =
                        values[e as usize];
                }
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
