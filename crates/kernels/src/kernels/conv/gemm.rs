//! Multi-channel convolution as an implicit GEMM in shared-memory tiles: the output
//! positions are the rows, the filters the columns, and (input channel, kernel row, kernel
//! column) the depth summed over — the input patches are gathered straight from the image,
//! never written out as a matrix.
//!
//! Why: the direct kernels load an input or a weight from global memory every few
//! multiply-adds, so memory, not arithmetic, bounds them. Here a cube of 256 units
//! stages an 8-deep slice of the patches (256 rows) and of the filters (64 columns) in
//! shared memory; each unit then multiplies its 8 rows by its 8 columns out of it, 64
//! multiply-adds per four 16-byte shared loads, while the next slice's global loads are in
//! flight. A layer of at most 32 columns gets a [`Tile::NARROW`] tile of 256 rows × 32
//! columns instead (8 × 4 a unit), so half the tile's products are not spent on columns
//! past the layer, and a GEMM too short to fill the GPU a [`Tile::WIDE_SHORT`] one.
//!
//! Rows come in quads: quad (n, qh, qw) is the 2×2 block of conv output positions
//! (2qh + dh, 2qw + dw) of image n, and row 4·quad + 2·dh + dw. A unit holds two whole
//! quads, so under a 2×2 stride-2 unpadded max-pool — where a quad is a pool window — it
//! pools its own sums: given an argmax, [`conv_gemm`] writes only the pooled map and the
//! argmax; without, every position (quads past an odd edge are computed and dropped).
//!
//! The same kernels give the input gradient of a stride-1 convolution, a convolution of
//! the output gradient with the filters transposed (input ↔ output channels) and flipped,
//! padded by size − 1 − pad: `transposed` reads the filters that way.

use cubecl::prelude::*;

use crate::kernels::geometry::{NO_ARGMAX, Nchw, Window};
use crate::kernels::optional::value_or_zero;

/// Depth of one shared-memory slice.
pub const TILE_DEPTH: u32 = 8;
/// Units per cube.
pub const CUBE_UNITS: u32 = 256;

/// The four conv positions of a quad, or four adjacent columns.
pub type Four = Const<4>;

/// A tile's shape: its width in vectors of four columns and how many of those each unit
/// owns. A unit owns 2 quads (8 rows) × `unit_vectors` vectors; the cube's 256 units sit
/// `column_vectors / unit_vectors` across, and each owns the quads and vectors a row or a
/// column of units apart, so that a warp's shared-memory reads of either operand are
/// adjacent vectors.
#[derive(CubeType, Clone, Copy, Debug, Hash, PartialEq, Eq)]
pub struct Tile {
    pub column_vectors: u32,
    pub unit_vectors: u32,
}

impl Tile {
    /// 256 rows (64 quads) × 64 columns, 8 × 8 a unit: 64 multiply-adds per four 16-byte
    /// shared loads (8 × 4 a unit takes three for 32, and the loads bound the kernel).
    pub const WIDE: Tile = Tile {
        column_vectors: 16,
        unit_vectors: 2,
    };
    /// 128 rows × 64 columns, 8 × 4 a unit: twice the cubes of [`Tile::WIDE`] for a
    /// GEMM too short to fill the GPU with those.
    pub const WIDE_SHORT: Tile = Tile {
        column_vectors: 16,
        unit_vectors: 1,
    };
    /// 256 rows × 32 columns, 8 × 4 a unit.
    pub const NARROW: Tile = Tile {
        column_vectors: 8,
        unit_vectors: 1,
    };

    /// Units side by side along the columns.
    pub fn units_across(self) -> u32 {
        self.column_vectors / self.unit_vectors
    }

    /// Units one above the other along the rows.
    pub fn units_down(self) -> u32 {
        CUBE_UNITS / self.units_across()
    }

    /// Quads (of four rows) per tile.
    pub fn quads(self) -> u32 {
        2 * self.units_down()
    }

    /// Columns per tile.
    pub fn columns(self) -> u32 {
        4 * self.column_vectors
    }

    /// Patch values each unit stages per slice: the tile's quads × the slice's depth over
    /// the cube's units.
    pub fn patch_loads(self) -> u32 {
        self.quads() * TILE_DEPTH / CUBE_UNITS
    }
}

/// Σ over the depth for the rows and columns unit UNIT_POS owns in the tile at
/// (`first_quad`, `first_col`) — see [`UnitTile`]. `sums[8v + 4e + r]` is row r of the
/// unit's quad e, one lane per column of its vector v.
#[cube]
#[allow(clippy::too_many_arguments)]
fn tile_sums<F: Float>(
    src: &Array<F>,
    weight: &Array<F>,
    src_map: &Nchw,
    sums: &mut Array<Vector<F, Four>>,
    first_quad: usize,
    first_col: usize,
    quads_h: u32,
    quads_w: u32,
    cols: usize,
    #[comptime] conv: Window,
    #[comptime] transposed: bool,
    #[comptime] tile: Tile,
) {
    let channels = src_map.channels;
    let taps = comptime!(conv.size_h * conv.size_w);
    let depth = channels * taps as usize;
    let unit = UNIT_POS;
    let tile_quads = comptime!(tile.quads());
    let column_vectors = comptime!(tile.column_vectors);
    let patch_loads = comptime!(tile.patch_loads() as usize);
    let load_step = comptime!((TILE_DEPTH / tile.patch_loads()) as usize);

    // The patch loader: unit `unit` gathers quad `unit % tile_quads` of the tile at depth
    // `unit / tile_quads` of each slice and `load_step` deeper for each further load, each
    // a 2×2 block of patch values.
    let a_quad = (unit % tile_quads) as usize;
    let a_depth = (unit / tile_quads) as usize;
    let patch = QuadPatch::of(src_map, first_quad + a_quad, quads_h, quads_w, conv);

    // The filter loader: units below 8 · column_vectors load depth `unit % 8` of four
    // adjacent columns (adjacent units, adjacent depths: the loads coalesce). A filter row
    // of the slice is padded by one vector, so that those units' stores, a row apart, fall
    // in different banks (unpadded, eight of them hit the same banks, and each store is
    // replayed for every one).
    let b_depth = (unit % TILE_DEPTH) as usize;
    let b_cols = first_col + (unit / TILE_DEPTH) as usize * 4;
    let b_active = unit < TILE_DEPTH * column_vectors;
    let filter_row = comptime!(column_vectors + 1);

    let mut patches =
        SharedMemory::<Vector<F, Four>>::new(comptime!((TILE_DEPTH * tile_quads) as usize));
    let mut filters =
        SharedMemory::<Vector<F, Four>>::new(comptime!((TILE_DEPTH * filter_row) as usize));

    let own = UnitTile::of(tile);
    let down = comptime!(tile.units_down());
    let across = comptime!(tile.units_across());
    let unit_vectors = comptime!(tile.unit_vectors);
    #[unroll]
    for i in 0..comptime!(8 * tile.unit_vectors as usize) {
        sums[i] = Vector::new(F::new(0.0));
    }

    let mut next_patches = Array::<Vector<F, Four>>::new(patch_loads);
    #[unroll]
    for l in 0..patch_loads {
        next_patches[l] = patch.at::<F>(src, a_depth + l * load_step, depth, conv);
    }
    let mut next_filter = Vector::<F, Four>::new(F::new(0.0));
    if b_active {
        next_filter = load_filters::<F>(weight, b_depth, depth, b_cols, cols, transposed, conv);
    }
    let slices = depth.div_ceil(TILE_DEPTH as usize);
    for slice in 0..slices {
        #[unroll]
        for l in 0..patch_loads {
            patches[(a_depth + l * load_step) * tile_quads as usize + a_quad] = next_patches[l];
        }
        if b_active {
            filters[b_depth * filter_row as usize + (unit / TILE_DEPTH) as usize] = next_filter;
        }
        sync_cube();
        // The next slice's loads go out before this slice's multiply-adds.
        if slice + 1 < slices {
            let k0 = (slice + 1) * TILE_DEPTH as usize;
            #[unroll]
            for l in 0..patch_loads {
                next_patches[l] = patch.at::<F>(src, k0 + a_depth + l * load_step, depth, conv);
            }
            if b_active {
                next_filter =
                    load_filters::<F>(weight, k0 + b_depth, depth, b_cols, cols, transposed, conv);
            }
        }
        #[unroll]
        for k in 0..TILE_DEPTH {
            let base = (k * tile_quads + own.row) as usize;
            let a0 = patches[base];
            let a1 = patches[base + down as usize];
            #[unroll]
            for v in 0..unit_vectors {
                let b = filters[(k * filter_row + own.column + v * across) as usize];
                #[unroll]
                for r in 0..4u32 {
                    sums[(8 * v + r) as usize] += Vector::new(a0[r as usize]) * b;
                    sums[(8 * v + 4 + r) as usize] += Vector::new(a1[r as usize]) * b;
                }
            }
        }
        sync_cube();
    }
}

/// The first quad and column vector unit UNIT_POS owns in its tile (row and column of
/// units): it owns quads `row` and `row` + units down, and vectors `column` + v · units
/// across for v < the tile's `unit_vectors`.
#[derive(CubeType)]
struct UnitTile {
    row: u32,
    column: u32,
}

#[cube]
impl UnitTile {
    fn of(#[comptime] tile: Tile) -> UnitTile {
        let across = comptime!(tile.units_across());
        UnitTile {
            row: UNIT_POS / across,
            column: UNIT_POS % across,
        }
    }
}

/// Where one quad's patch values lie in `src`: its image, and the top-left corner of its
/// patch in padding-shifted coordinates (so they stay unsigned).
#[derive(CubeType)]
pub struct QuadPatch {
    image: usize,
    channel_stride: usize,
    row_stride: usize,
    top: u32,
    left: u32,
    rows: u32,
    row_len: u32,
    /// False past the batch's last quad: such a quad reads nothing.
    valid: bool,
}

#[cube]
impl QuadPatch {
    /// Quad `quad` (counted over the batch) of a `quads_h` × `quads_w` grid per image of
    /// `src`, a map of sizes and strides `src_map`.
    pub fn of(
        src_map: &Nchw,
        quad: usize,
        quads_h: u32,
        quads_w: u32,
        #[comptime] conv: Window,
    ) -> QuadPatch {
        let plane_quads = (quads_h * quads_w) as usize;
        let n = quad / plane_quads;
        let in_plane = (quad % plane_quads) as u32;
        QuadPatch {
            image: n * src_map.image_stride,
            channel_stride: src_map.channel_stride,
            row_stride: src_map.row_stride,
            top: (in_plane / quads_w) * 2 * conv.stride_h,
            left: (in_plane % quads_w) * 2 * conv.stride_w,
            rows: src_map.rows,
            row_len: src_map.cols,
            valid: n < src_map.batch,
        }
    }

    /// The quad's 2×2 block of patch values at depth `k` (= channel · taps + tap); zeros in
    /// the padding and past the depth or the batch.
    pub fn at<F: Float>(
        &self,
        src: &Array<F>,
        k: usize,
        depth: usize,
        #[comptime] conv: Window,
    ) -> Vector<F, Four> {
        let mut values = Vector::<F, Four>::new(F::new(0.0));
        if self.valid && k < depth {
            let taps = comptime!(conv.size_h * conv.size_w) as usize;
            let tap = (k % taps) as u32;
            values = quad_values::<F>(
                src,
                self.image + (k / taps) * self.channel_stride,
                self.top + tap / conv.size_w,
                self.left + tap % conv.size_w,
                self.rows,
                self.row_len,
                self.row_stride,
                conv,
            );
        }
        values
    }
}

/// The values of `src`'s plane at `base` under the four conv positions of a quad for one
/// tap, whose padding-shifted coordinates are (`row`, `col`) for the quad's first position
/// and a conv stride further for the others; zeros in the padding.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn quad_values<F: Float>(
    src: &Array<F>,
    base: usize,
    row: u32,
    col: u32,
    rows: u32,
    row_len: u32,
    row_stride: usize,
    #[comptime] conv: Window,
) -> Vector<F, Four> {
    let mut values = Vector::<F, Four>::new(F::new(0.0));
    #[unroll]
    for dh in 0..2u32 {
        let r = row + dh * conv.stride_h;
        #[unroll]
        for dw in 0..2u32 {
            let c = col + dw * conv.stride_w;
            if r >= conv.pad_h
                && r < rows + conv.pad_h
                && c >= conv.pad_w
                && c < row_len + conv.pad_w
            {
                values[(dh * 2 + dw) as usize] =
                    src[base + (r - conv.pad_h) as usize * row_stride + (c - conv.pad_w) as usize];
            }
        }
    }
    values
}

/// Filter values at depth `k` for columns `first_col` to +3 (zeros past either end).
/// Forward: filter `col`, channel k / taps, tap k % taps of `weight` [cols, channels, kh,
/// kw]. Transposed: `weight` is [channels, cols, kh, kw] and the tap is flipped.
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn load_filters<F: Float>(
    weight: &Array<F>,
    k: usize,
    depth: usize,
    first_col: usize,
    cols: usize,
    #[comptime] transposed: bool,
    #[comptime] conv: Window,
) -> Vector<F, Four> {
    let mut values = Vector::<F, Four>::new(F::new(0.0));
    if k < depth {
        let taps = comptime!(conv.size_h * conv.size_w) as usize;
        #[unroll]
        for j in 0..4usize {
            let col = first_col + j;
            if col < cols {
                if transposed {
                    let channel = k / taps;
                    let flipped = taps - 1 - k % taps;
                    values[j] = weight[(channel * cols + col) * taps + flipped];
                } else {
                    values[j] = weight[col * depth + k];
                }
            }
        }
    }
    values
}

/// The convolution (+ bias) over the cube's `tile`: X picks its quads of the `quads_h` ×
/// `quads_w` quad grid per image, Y its columns; [`write_quad`] writes them, pooled under
/// an `argmax`.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv_gemm<F: Float, A: Int>(
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
    #[comptime] tile: Tile,
    #[define(A)] _argmax_type: StorageType,
) {
    let cols = output_map.channels;
    let first_quad = CUBE_POS_X as usize * comptime!(tile.quads() as usize);
    let first_col = CUBE_POS_Y as usize * comptime!(tile.columns() as usize);
    let mut sums = Array::<Vector<F, Four>>::new(comptime!(8 * tile.unit_vectors as usize));
    tile_sums::<F>(
        src, weight, &src_map, &mut sums, first_quad, first_col, quads_h, quads_w, cols, conv,
        transposed, tile,
    );

    let own = UnitTile::of(tile);
    #[unroll]
    for e in 0..2u32 {
        let quad = first_quad + (own.row + e * comptime!(tile.units_down())) as usize;
        #[unroll]
        for v in 0..comptime!(tile.unit_vectors) {
            #[unroll]
            for j in 0..4u32 {
                let col = first_col
                    + ((own.column + v * comptime!(tile.units_across())) * 4 + j) as usize;
                let mut quad_sums = Vector::<F, Four>::new(F::new(0.0));
                #[unroll]
                for r in 0..4usize {
                    quad_sums[r] = sums[(8 * v + 4 * e) as usize + r][j as usize];
                }
                write_quad::<F, A>(
                    output,
                    argmax,
                    bias,
                    &output_map,
                    quad_sums,
                    quad,
                    col,
                    quads_h,
                    quads_w,
                );
            }
        }
    }
}

/// Writes the sums of quad `quad` (counted over the batch) for column `col`, plus its
/// bias, if both are in range; `output_map` holds `output`'s sizes. Without `argmax`,
/// `output` is [N, cols, out_h, out_w] and
/// gets the quad's positions inside the map. With it, `output` and `argmax` are the pooled
/// [N, cols, quads_h, quads_w] of a 2×2 stride-2 unpadded pool after ReLU: max(0, max over
/// the quad) and the first maximal position if positive, else [`NO_ARGMAX`].
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn write_quad<F: Float, A: Int>(
    output: &mut Array<F>,
    argmax: &mut ComptimeOption<Array<A>>,
    bias: &ComptimeOption<Array<F>>,
    output_map: &Nchw,
    sums: Vector<F, Four>,
    quad: usize,
    col: usize,
    quads_h: u32,
    quads_w: u32,
) {
    let cols = output_map.channels;
    let plane_quads = (quads_h * quads_w) as usize;
    let n = quad / plane_quads;
    let in_plane = quad % plane_quads;
    if n < output_map.batch && col < cols {
        let quad_sums = sums + Vector::new(value_or_zero(bias, col));
        #[comptime]
        match argmax {
            ComptimeOption::Some(argmax) => {
                let o = (n * cols + col) * plane_quads + in_plane;
                let mut best = F::new(0.0);
                let mut best_offset = NO_ARGMAX.runtime();
                #[unroll]
                for r in 0..4u32 {
                    if quad_sums[r as usize] > best {
                        best = quad_sums[r as usize];
                        best_offset = r;
                    }
                }
                output[o] = best;
                argmax[o] = A::cast_from(best_offset);
            }
            ComptimeOption::None => {
                let out_h = output_map.rows;
                let out_w = output_map.cols;
                let plane = (n * cols + col) * (out_h * out_w) as usize;
                let qh = in_plane as u32 / quads_w;
                let qw = in_plane as u32 % quads_w;
                #[unroll]
                for r in 0..4u32 {
                    let oh = qh * 2 + r / 2;
                    let ow = qw * 2 + r % 2;
                    if oh < out_h && ow < out_w {
                        output[plane + (oh * out_w + ow) as usize] = quad_sums[r as usize];
                    }
                }
            }
        }
    }
}
