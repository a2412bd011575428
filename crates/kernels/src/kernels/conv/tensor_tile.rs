//! The tensor-core GEMMs' shared tile geometry (the matrix products' shapes, the slice
//! depth, the warps' layout and [`TensorTile`]), in a file below the kernels and the
//! products ([`super::gemm_tensor_cores`], [`super::gemm_bf16_mma`],
//! [`super::gemm_tf32_wmma`], …) because all of them size their work by it.

use cubecl::prelude::*;

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

/// Bytes the matrix loads and stores need their shared-memory addresses aligned to.
pub const FRAGMENT_ALIGN: usize = 32;
/// Vectors (of 4) padding each staged row: a matrix load reads 8 adjacent values at each
/// of 4 depths; rows 8 values longer than a multiple of 32 put those 32 in 32 banks, where
/// unpadded they share banks and the loads, not the tensor cores, set the kernel's pace
/// (`docs/perf-log/2026-11-25-v16-tf32-tile.md`).
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
    /// ([`super::gemm_channels_last`]; [`super::gemm_tensor_cores`]'s kernels take the
    /// tiles above): each column block's matrix load then serves four `mma`s instead of two.
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
    pub(super) fn column_vectors(self) -> u32 {
        self.columns() / 4
    }

    /// Vectors from one depth of the staged patches to the next, and from one column of the
    /// finished tile to the next: the tile's quads and [`ROW_PAD`]. A matrix load reads
    /// 4 depths (or columns) × 8 rows at once; unpadded, the 4 fall in the same banks.
    pub(crate) fn rows_stride(self) -> u32 {
        self.quads() + ROW_PAD
    }

    /// Vectors in a staged filter row (one depth): the tile's and [`ROW_PAD`].
    pub(crate) fn filter_row(self) -> u32 {
        self.column_vectors() + ROW_PAD
    }

    /// Vectors of the staged patches: [depth][quad], i.e. the patch matrix column-major.
    pub(crate) fn patch_vectors(self) -> u32 {
        SLICE_DEPTH * self.rows_stride()
    }

    /// Vectors of the staged slice in shared memory: patches, then filters.
    pub(super) fn staged_vectors(self) -> u32 {
        self.patch_vectors() + SLICE_DEPTH * self.filter_row()
    }

    /// Floats of the finished tile in shared memory ([column][row]). It is only used after
    /// the products, when the staged slice no longer is: CubeCL places the two in the same
    /// bytes where they fit.
    pub(crate) fn finished_floats(self) -> u32 {
        self.columns() * 4 * self.rows_stride()
    }
}
