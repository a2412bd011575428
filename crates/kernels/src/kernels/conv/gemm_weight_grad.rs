//! Weight and bias gradients of a multi-channel convolution as an implicit GEMM, split over
//! the batch:
//!
//!   partials[s, co, k] = Σ_{m in split s} dy[m, co] · patch[m, k]      (k < C_in · taps)
//!   partials[s, co, C_in · taps] = Σ_{m in split s} dy[m, co]          (the bias term)
//!
//! then [`super::weight_grad::conv2d_weight_grad_sum`] adds the splits (this layout is
//! its [splits, C_out, 1, terms] with terms = C_in · taps + 1). A cube owns a 64-filter ×
//! 64-column tile and walks its split's conv positions in slices of 8 quads (see
//! [`super::gemm`]); each slice stages the quads' gradient values and patch values in
//! shared memory, four positions to a vector, and a unit adds up 4 filters × 4 columns.
//! Under the fused 2×2 stride-2 pool a quad is a pool window: its four gradient values are
//! the pooled gradient at the argmax's position and zeros, one read per window.

use cubecl::prelude::*;

use super::gemm::{Four, quad_values};
use crate::kernels::geometry::{NO_ARGMAX, Nchw, Window};

/// Filters and patch columns per tile.
pub const TILE_SIDE: u32 = 64;
/// Quads per shared-memory slice.
pub const SLICE_QUADS: u32 = 8;

/// Units side by side along each tile axis (16 × 16 = the cube's 256 units,
/// [`super::gemm::CUBE_UNITS`]); the unit at row ty and column tx owns filters
/// ty + 16i and columns tx + 16j, i, j < 4.
const UNITS_PER_SIDE: u32 = 16;
/// Tile rows (filters) or columns each loader unit fills per slice, 32 apart.
pub const LOADS_PER_UNIT: u32 = 2;
/// Vectors per quad slot of a slice in shared memory: the tile's 64 and one of padding,
/// so that the loaders' stores (adjacent units, adjacent slots) fall in different banks
/// (unpadded, eight slots a whole row apart hit the same banks, and each store is replayed
/// for every one: `docs/perf-log/2026-11-24-v14-shared-memory-bank-conflicts.md`).
const SLOT_VECTORS: u32 = TILE_SIDE + 1;

/// Partial weight (and bias) gradients of split CUBE_POS_Z over the tile (CUBE_POS_Y filters,
/// CUBE_POS_X columns). `grad` is the pooled gradient with `argmax` (quads = its positions),
/// or the conv output's own gradient (quads of ⌈out/2⌉ per axis).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv_gemm_weight_grad<F: Float, A: Int>(
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
    #[define(A)] _argmax_type: StorageType,
) {
    let loader = SliceLoader::new(&x_map, &grad_map, quads_h, quads_w, quads_per_split, conv);
    let mut grads = SharedMemory::<Vector<F, Four>>::new((SLICE_QUADS * SLOT_VECTORS) as usize);
    let mut patches = SharedMemory::<Vector<F, Four>>::new((SLICE_QUADS * SLOT_VECTORS) as usize);

    let tx = UNIT_POS % UNITS_PER_SIDE;
    let ty = UNIT_POS / UNITS_PER_SIDE;
    let bias_unit = with_bias && CUBE_POS_X == 0 && tx == 0;
    let mut sums = Array::<F>::new(16usize);
    let mut bias_sums = Array::<F>::new(4usize);
    #[unroll]
    for i in 0..16usize {
        sums[i] = F::new(0.0);
    }
    #[unroll]
    for i in 0..4usize {
        bias_sums[i] = F::new(0.0);
    }

    let mut quad = loader.first_quad();
    let mut first = loader.quad_begin;
    while first < loader.quad_end {
        #[unroll]
        for h in 0..LOADS_PER_UNIT {
            let index = loader.slot * SLOT_VECTORS + loader.lane + h * 32;
            grads[index as usize] = loader.grad_at::<F, A>(grad, argmax, &quad, h);
            patches[index as usize] = loader.patch_at::<F>(x, &quad, h, conv);
        }
        sync_cube();
        #[unroll]
        for s in 0..SLICE_QUADS {
            let base = (s * SLOT_VECTORS) as usize;
            #[unroll]
            for i in 0..4u32 {
                let dy = grads[base + (ty + i * UNITS_PER_SIDE) as usize];
                if bias_unit {
                    bias_sums[i as usize] += dy[0] + dy[1] + dy[2] + dy[3];
                }
                #[unroll]
                for j in 0..4u32 {
                    let patch = patches[base + (tx + j * UNITS_PER_SIDE) as usize];
                    let at = (i * 4 + j) as usize;
                    sums[at] += dy[0] * patch[0];
                    sums[at] += dy[1] * patch[1];
                    sums[at] += dy[2] * patch[2];
                    sums[at] += dy[3] * patch[3];
                }
            }
        }
        sync_cube();
        loader.next_quad(&mut quad);
        first += SLICE_QUADS as usize;
    }

    #[unroll]
    for i in 0..4u32 {
        let co = loader.first_co + (ty + i * UNITS_PER_SIDE) as usize;
        if co < loader.c_out {
            let row = loader.partials_row(co);
            #[unroll]
            for j in 0..4u32 {
                let k = loader.first_k + (tx + j * UNITS_PER_SIDE) as usize;
                if k < loader.depth {
                    partials[row + k] = sums[(i * 4 + j) as usize];
                }
            }
            if bias_unit {
                partials[row + loader.depth] = bias_sums[i as usize];
            }
        }
    }
}

/// What the weight-gradient kernels (this one and the tensor-core one) load for split
/// CUBE_POS_Z and the tile at (CUBE_POS_Y, CUBE_POS_X): unit UNIT_POS fills quad slot
/// `slot` = UNIT_POS % 8 of each slice, for tile rows (filters) and columns `lane` =
/// UNIT_POS / 8 and 32 further ([`LOADS_PER_UNIT`]); its columns' (channel, tap) are fixed
/// for the whole walk, so they are worked out once.
#[derive(CubeType)]
pub struct SliceLoader {
    pub slot: u32,
    pub lane: u32,
    /// The split's quads, [quad_begin, quad_end) over the batch.
    pub quad_begin: usize,
    pub quad_end: usize,
    pub first_co: usize,
    pub first_k: usize,
    pub c_out: usize,
    /// The weight gradient's columns: C_in · taps.
    pub depth: usize,
    quads_h: u32,
    quads_w: u32,
    grad_h: u32,
    grad_w: u32,
    image_stride: usize,
    rows: u32,
    row_len: u32,
    row_stride: usize,
    /// Per load: the column's channel offset in an image, and its tap's row and column.
    column_base: Array<usize>,
    column_row: Array<u32>,
    column_col: Array<u32>,
}

/// A loader unit's quad of one slice: past the split's end (`valid` false) it loads zeros.
#[derive(CubeType)]
pub struct SlotQuad {
    /// Its index over the batch's quads.
    index: usize,
    valid: bool,
    /// Its image, and its place in the image's grid of quads.
    n: usize,
    in_plane: usize,
    qh: u32,
    qw: u32,
}

/// A loader unit's values of one slice in registers, for each of its [`LOADS_PER_UNIT`]
/// filters and columns: the tensor-core kernel holds the next slice's here during this
/// slice's products.
#[derive(CubeType)]
pub struct SlotValues<F: Float> {
    pub grads: Array<Vector<F, Four>>,
    pub patches: Array<Vector<F, Four>>,
}

#[cube]
impl<F: Float> SlotValues<F> {
    /// Registers for a slice's values, filled by [`SliceLoader::load`].
    pub fn empty() -> SlotValues<F> {
        SlotValues::<F> {
            grads: Array::<Vector<F, Four>>::new(LOADS_PER_UNIT as usize),
            patches: Array::<Vector<F, Four>>::new(LOADS_PER_UNIT as usize),
        }
    }
}

#[cube]
impl SliceLoader {
    /// The loader of input `x` (sizes and strides `x_map`) and gradient `grad_map`.
    pub fn new(
        x_map: &Nchw,
        grad_map: &Nchw,
        quads_h: u32,
        quads_w: u32,
        quads_per_split: u32,
        #[comptime] conv: Window,
    ) -> SliceLoader {
        let taps = comptime!(conv.size_h * conv.size_w) as usize;
        let plane_quads = (quads_h * quads_w) as usize;
        let total_quads = x_map.batch * plane_quads;
        let quad_begin = CUBE_POS_Z as usize * quads_per_split as usize;
        let mut quad_end = quad_begin + quads_per_split as usize;
        if quad_end > total_quads {
            quad_end = total_quads;
        }
        let lane = UNIT_POS / SLICE_QUADS;
        let first_k = CUBE_POS_X as usize * TILE_SIDE as usize;
        let mut column_base = Array::<usize>::new(LOADS_PER_UNIT as usize);
        let mut column_row = Array::<u32>::new(LOADS_PER_UNIT as usize);
        let mut column_col = Array::<u32>::new(LOADS_PER_UNIT as usize);
        #[unroll]
        for h in 0..LOADS_PER_UNIT as usize {
            let k = first_k + lane as usize + h * 32;
            let tap = (k % taps) as u32;
            column_base[h] = (k / taps) * x_map.channel_stride;
            column_row[h] = tap / conv.size_w;
            column_col[h] = tap % conv.size_w;
        }
        SliceLoader {
            slot: UNIT_POS % SLICE_QUADS,
            lane,
            quad_begin,
            quad_end,
            first_co: CUBE_POS_Y as usize * TILE_SIDE as usize,
            first_k,
            c_out: grad_map.channels,
            depth: x_map.channels * taps,
            quads_h,
            quads_w,
            grad_h: grad_map.rows,
            grad_w: grad_map.cols,
            image_stride: x_map.image_stride,
            rows: x_map.rows,
            row_len: x_map.cols,
            row_stride: x_map.row_stride,
            column_base,
            column_row,
            column_col,
        }
    }

    /// This unit's quad of the walk's first slice.
    pub fn first_quad(&self) -> SlotQuad {
        let index = self.quad_begin + self.slot as usize;
        let plane_quads = (self.quads_h * self.quads_w) as usize;
        let in_plane = index % plane_quads;
        SlotQuad {
            index,
            valid: index < self.quad_end,
            n: index / plane_quads,
            in_plane,
            qh: in_plane as u32 / self.quads_w,
            qw: in_plane as u32 % self.quads_w,
        }
    }

    /// Moves `quad` on to this unit's quad of the next slice, [`SLICE_QUADS`] further, by
    /// carrying along the row and down the image instead of dividing its index by the
    /// quads of an image and of a row each slice: a carry costs less than two divisions, and
    /// keeps fewer registers live across the tensor-core kernel's walk
    /// (`docs/perf-log/2026-11-29-weight-gradient-loads-in-flight.md`).
    pub fn next_quad(&self, quad: &mut SlotQuad) {
        quad.index += SLICE_QUADS as usize;
        quad.valid = quad.index < self.quad_end;
        quad.qw += SLICE_QUADS;
        while quad.qw >= self.quads_w {
            quad.qw -= self.quads_w;
            quad.qh += 1;
        }
        while quad.qh >= self.quads_h {
            quad.qh -= self.quads_h;
            quad.n += 1;
        }
        quad.in_plane = (quad.qh * self.quads_w + quad.qw) as usize;
    }

    /// Global loads of this unit's `quad` of a slice into `values`.
    pub fn load<F: Float, A: Int>(
        &self,
        x: &Array<F>,
        grad: &Array<F>,
        argmax: &ComptimeOption<Array<A>>,
        quad: &SlotQuad,
        values: &mut SlotValues<F>,
        #[comptime] conv: Window,
    ) {
        #[unroll]
        for h in 0..LOADS_PER_UNIT {
            values.grads[h as usize] = self.grad_at::<F, A>(grad, argmax, quad, h);
            values.patches[h as usize] = self.patch_at::<F>(x, quad, h, conv);
        }
    }

    /// The gradient at `quad` for filter `lane` + 32 · `h` of the tile: zeros past the split
    /// or the filters.
    pub fn grad_at<F: Float, A: Int>(
        &self,
        grad: &Array<F>,
        argmax: &ComptimeOption<Array<A>>,
        quad: &SlotQuad,
        #[comptime] h: u32,
    ) -> Vector<F, Four> {
        let co = self.first_co + (self.lane + h * 32) as usize;
        let mut dy = Vector::<F, Four>::new(F::new(0.0));
        if quad.valid && co < self.c_out {
            dy = quad_grad::<F, A>(
                grad,
                argmax,
                quad.n * self.c_out + co,
                quad.in_plane,
                quad.qh,
                quad.qw,
                self.grad_h,
                self.grad_w,
            );
        }
        dy
    }

    /// The patch values under `quad` for column `lane` + 32 · `h` of the tile: zeros past
    /// the split or the depth.
    pub fn patch_at<F: Float>(
        &self,
        x: &Array<F>,
        quad: &SlotQuad,
        #[comptime] h: u32,
        #[comptime] conv: Window,
    ) -> Vector<F, Four> {
        let k = self.first_k + (self.lane + h * 32) as usize;
        let mut patch = Vector::<F, Four>::new(F::new(0.0));
        if quad.valid && k < self.depth {
            patch = quad_values::<F>(
                x,
                quad.n * self.image_stride + self.column_base[h as usize],
                quad.qh * 2 * conv.stride_h + self.column_row[h as usize],
                quad.qw * 2 * conv.stride_w + self.column_col[h as usize],
                self.rows,
                self.row_len,
                self.row_stride,
                conv,
            );
        }
        patch
    }

    /// Where filter `co`'s partial sums of this split start in `partials`
    /// ([splits, C_out, terms], terms = depth + 1 with the bias last).
    pub fn partials_row(&self, co: usize) -> usize {
        (CUBE_POS_Z as usize * self.c_out + co) * (self.depth + 1)
    }
}

/// The gradient at the four conv positions of quad (`qh`, `qw`) of plane `plane` (= n · C_out
/// + co): with `argmax`, the pooled gradient at the window's argmax and zeros (all zeros
/// where ReLU cut the window); without, `grad`'s own values (zeros past its edge).
#[cube]
#[allow(clippy::too_many_arguments, clippy::let_and_return)] // `#[comptime]` needs the match bound by a `let`
fn quad_grad<F: Float, A: Int>(
    grad: &Array<F>,
    argmax: &ComptimeOption<Array<A>>,
    plane: usize,
    in_plane: usize,
    qh: u32,
    qw: u32,
    grad_h: u32,
    grad_w: u32,
) -> Vector<F, Four> {
    #[comptime]
    let values = match argmax {
        ComptimeOption::Some(argmax) => {
            let mut values = Vector::<F, Four>::new(F::new(0.0));
            let index = plane * (grad_h * grad_w) as usize + in_plane;
            let offset = u32::cast_from(argmax[index]);
            if offset != NO_ARGMAX {
                let g = grad[index];
                #[unroll]
                for r in 0..4u32 {
                    if offset == r {
                        values[r as usize] = g;
                    }
                }
            }
            values
        }
        ComptimeOption::None => {
            let mut values = Vector::<F, Four>::new(F::new(0.0));
            let base = plane * (grad_h * grad_w) as usize;
            #[unroll]
            for r in 0..4u32 {
                let oh = qh * 2 + r / 2;
                let ow = qw * 2 + r % 2;
                if oh < grad_h && ow < grad_w {
                    values[r as usize] = grad[base + (oh * grad_w + ow) as usize];
                }
            }
            values
        }
    };
    values
}
