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
use crate::kernels::geometry::{NO_ARGMAX, Window};

/// Filters and patch columns per tile.
pub const TILE_SIDE: u32 = 64;
/// Quads per shared-memory slice.
pub const SLICE_QUADS: u32 = 8;

/// Units side by side along each tile axis (16 × 16 = the cube's 256 units,
/// [`super::gemm::CUBE_UNITS`]); the unit at row ty and column tx owns filters
/// ty + 16i and columns tx + 16j, i, j < 4.
const UNITS_PER_SIDE: u32 = 16;
/// Tile rows (filters) or columns each loader unit fills per slice, 32 apart.
const LOADS_PER_UNIT: u32 = 2;
/// Vectors per quad slot of a slice in shared memory: the tile's 64 and one of padding,
/// so that the loaders' stores (adjacent units, adjacent slots) fall in different banks
/// (unpadded, eight slots a whole row apart hit the same banks: 32 wavefronts a store in
/// v13, 40% of the kernel's shared-memory traffic).
const SLOT_VECTORS: u32 = TILE_SIDE + 1;

/// Partial weight (and bias) gradients of split CUBE_POS_Z over the tile (CUBE_POS_Y filters,
/// CUBE_POS_X columns). `grad` is the pooled gradient with `argmax` (quads = its positions),
/// or the conv output's own gradient (quads of ⌈out/2⌉ per axis).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv_gemm_weight_grad<F: Float, A: Int>(
    x: &Tensor<F>,
    grad: &Tensor<F>,
    argmax: &ComptimeOption<Tensor<A>>,
    partials: &mut Tensor<F>,
    quads_h: u32,
    quads_w: u32,
    quads_per_split: u32,
    #[comptime] conv: Window,
    #[comptime] with_bias: bool,
    #[define(A)] _argmax_type: StorageType,
) {
    let c_in = x.shape(1);
    let c_out = grad.shape(1);
    let taps = comptime!(conv.size_h * conv.size_w) as usize;
    let depth = c_in * taps;
    let rows = x.shape(2) as u32;
    let row_len = x.shape(3) as u32;
    let (image_stride, channel_stride, row_stride) = (x.stride(0), x.stride(1), x.stride(2));
    let grad_h = grad.shape(2) as u32;
    let grad_w = grad.shape(3) as u32;
    let plane_quads = (quads_h * quads_w) as usize;
    let total_quads = x.shape(0) * plane_quads;
    let first_k = CUBE_POS_X as usize * TILE_SIDE as usize;
    let first_co = CUBE_POS_Y as usize * TILE_SIDE as usize;
    let split = CUBE_POS_Z as usize;
    let quad_begin = split * quads_per_split as usize;
    let mut quad_end = quad_begin + quads_per_split as usize;
    if quad_end > total_quads {
        quad_end = total_quads;
    }

    // Loaders: unit `unit` fills slot `unit % 8` of the slice for tile rows and columns
    // `unit / 8` and 32 further. Its columns' (channel, tap) are fixed for the whole walk.
    let slot = (UNIT_POS % SLICE_QUADS) as usize;
    let lane = (UNIT_POS / SLICE_QUADS) as usize;
    let mut column_base = Array::<usize>::new(LOADS_PER_UNIT as usize);
    let mut column_row = Array::<u32>::new(LOADS_PER_UNIT as usize);
    let mut column_col = Array::<u32>::new(LOADS_PER_UNIT as usize);
    #[unroll]
    for h in 0..LOADS_PER_UNIT as usize {
        let k = first_k + lane + h * 32;
        let tap = (k % taps) as u32;
        column_base[h] = (k / taps) * channel_stride;
        column_row[h] = tap / conv.size_w;
        column_col[h] = tap % conv.size_w;
    }

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

    let mut first = quad_begin;
    while first < quad_end {
        let quad = first + slot;
        let valid = quad < quad_end;
        let n = quad / plane_quads;
        let in_plane = quad % plane_quads;
        let qh = in_plane as u32 / quads_w;
        let qw = in_plane as u32 % quads_w;
        #[unroll]
        for h in 0..LOADS_PER_UNIT as usize {
            let index = slot * SLOT_VECTORS as usize + lane + h * 32;
            let co = first_co + lane + h * 32;
            let mut dy = Vector::<F, Four>::new(F::new(0.0));
            if valid && co < c_out {
                dy = quad_grad::<F, A>(
                    grad,
                    argmax,
                    n * c_out + co,
                    in_plane,
                    qh,
                    qw,
                    grad_h,
                    grad_w,
                );
            }
            grads[index] = dy;
            let k = first_k + lane + h * 32;
            let mut patch = Vector::<F, Four>::new(F::new(0.0));
            if valid && k < depth {
                patch = quad_values::<F>(
                    x,
                    n * image_stride + column_base[h],
                    qh * 2 * conv.stride_h + column_row[h],
                    qw * 2 * conv.stride_w + column_col[h],
                    rows,
                    row_len,
                    row_stride,
                    conv,
                );
            }
            patches[index] = patch;
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
        first += SLICE_QUADS as usize;
    }

    let terms = depth + 1;
    #[unroll]
    for i in 0..4u32 {
        let co = first_co + (ty + i * UNITS_PER_SIDE) as usize;
        if co < c_out {
            let row = (split * c_out + co) * terms;
            #[unroll]
            for j in 0..4u32 {
                let k = first_k + (tx + j * UNITS_PER_SIDE) as usize;
                if k < depth {
                    partials[row + k] = sums[(i * 4 + j) as usize];
                }
            }
            if bias_unit {
                partials[row + depth] = bias_sums[i as usize];
            }
        }
    }
}

/// The gradient at the four conv positions of quad (`qh`, `qw`) of plane `plane` (= n · C_out
/// + co): with `argmax`, the pooled gradient at the window's argmax and zeros (all zeros
/// where ReLU cut the window); without, `grad`'s own values (zeros past its edge).
#[cube]
#[allow(clippy::too_many_arguments, clippy::let_and_return)] // `#[comptime]` needs the match bound by a `let`
pub fn quad_grad<F: Float, A: Int>(
    grad: &Tensor<F>,
    argmax: &ComptimeOption<Tensor<A>>,
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
