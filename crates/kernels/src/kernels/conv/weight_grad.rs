//! Weight and bias gradients of a convolution, reduced on the GPU in two stages.
//!
//!   dw[co, ci, kh, kw] = Σ_{n,oh,ow} dy[n, co, oh, ow] · x[n, ci, oh·sh − ph + kh, ow·sw − pw + kw]
//!   db[co]             = Σ_{n,oh,ow} dy[n, co, oh, ow]
//!
//! Stage 1 (`conv2d_weight_grad_partial`): cube (co, g, ci) takes a group of images and
//! computes every tap of filter co on input channel ci, plus the bias term, from one pass
//! over the group's gradient elements: each element is read once and its KH·KW input values
//! come from the cache (the group's images are small). Its units share out the elements and
//! combine their per-tap sums in shared memory, writing one partial per (g, co, ci, tap).
//! Stage 2 (`conv2d_weight_grad_sum`) adds the groups' partials in a fixed order, so the
//! result does not depend on scheduling. When `argmax` is given, `grad` is the pooled
//! gradient of the fused conv·ReLU·pool and each element flows to its window's argmax, so
//! only the pooled map is read.

use cubecl::prelude::*;

use crate::kernels::cube_sum::sum_rows_over_units;
use crate::kernels::geometry::{Nchw, Window, routed_position};

/// Partial sums of one image group: `partials[g, co, ci, t]` for tap t < KH·KW and, at
/// t = KH·KW, the bias term (the same in every ci). Filters vary fastest over the grid, so
/// that the cubes an SM runs at once mostly share their images in its cache. The cube's
/// units form a grid of position lanes (X, adjacent positions of one plane, so loads
/// coalesce) by image lanes (Y): a unit works out its position's row and column once, then
/// walks the group's images, two at a time so that the loads of both are in flight
/// together.
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_weight_grad_partial<F: Float, A: Int>(
    x: &Array<F>,
    grad: &Array<F>,
    argmax: &ComptimeOption<Array<A>>,
    partials: &mut Array<F>,
    x_map: Nchw,
    grad_map: Nchw,
    images_per_group: u32,
    #[comptime] conv: Window,
    #[comptime] pool: Window,
    #[comptime] cube_size: u32,
    #[define(A)] _argmax_type: StorageType,
) {
    let co = CUBE_POS_X as usize;
    let group = CUBE_POS_Y as usize;
    let ci = CUBE_POS_Z as usize;
    let c_in = x_map.channels;
    let c_out = grad_map.channels;
    let grad_w = grad_map.cols;
    let plane = (grad_map.rows * grad_w) as usize;
    let terms = comptime!(conv.size_h * conv.size_w + 1);

    let mut sums = Array::<F>::new(comptime!(terms as usize));
    #[unroll]
    for t in 0..terms {
        sums[t as usize] = F::new(0.0);
    }
    let first_image = group * images_per_group as usize;
    let mut end_image = first_image + images_per_group as usize;
    if end_image > grad_map.batch {
        end_image = grad_map.batch;
    }
    let lanes = CUBE_DIM_Y as usize;
    // Moving one image on in every lane's walk.
    let grad_step = lanes * c_out * plane;
    let x_step = lanes * x_map.image_stride;
    let mut within = UNIT_POS_X as usize;
    while within < plane {
        let row = within as u32 / grad_w;
        let col = within as u32 % grad_w;
        let mut n = first_image + UNIT_POS_Y as usize;
        let mut index = (n * c_out + co) * plane + within;
        let mut x_base = n * x_map.image_stride + ci * x_map.channel_stride;
        while n < end_image {
            #[unroll]
            for u in 0..2usize {
                if n + u * lanes < end_image {
                    add_element(
                        x,
                        grad,
                        argmax,
                        &mut sums,
                        index + u * grad_step,
                        x_base + u * x_step,
                        row,
                        col,
                        &x_map,
                        conv,
                        pool,
                    );
                }
            }
            n += 2 * lanes;
            index += 2 * grad_step;
            x_base += 2 * x_step;
        }
        within += CUBE_DIM_X as usize;
    }

    // One shared row per term; a tree over the units for all terms at once.
    let mut shared = SharedMemory::<F>::new(comptime!((terms * cube_size) as usize));
    #[unroll]
    for t in 0..terms {
        shared[(t * cube_size + UNIT_POS) as usize] = sums[t as usize];
    }
    sum_rows_over_units(&mut shared, terms, cube_size);
    if UNIT_POS < terms {
        let out = ((group * c_out + co) * c_in + ci) * terms as usize + UNIT_POS as usize;
        partials[out] = shared[(UNIT_POS * cube_size) as usize];
    }
}

/// Adds gradient element `index` (at `row`, `col` of its plane) to the sums: g times the
/// input under each tap of the conv position it flows to, and g alone to the bias term.
/// `x_base` is the start of the element's input plane. Without padding every tap of a conv
/// position lies inside the input, so nothing is checked.
#[cube]
#[allow(clippy::too_many_arguments)]
fn add_element<F: Float, A: Int>(
    x: &Array<F>,
    grad: &Array<F>,
    argmax: &ComptimeOption<Array<A>>,
    sums: &mut Array<F>,
    index: usize,
    x_base: usize,
    row: u32,
    col: u32,
    input: &Nchw,
    #[comptime] conv: Window,
    #[comptime] pool: Window,
) {
    let bias_term = comptime!(conv.size_h * conv.size_w);
    let padded = comptime!(conv.pad_h + conv.pad_w > 0);
    let (valid, oh, ow) = routed_position(argmax, index, row, col, pool);
    if valid {
        let g = grad[index];
        sums[bias_term as usize] += g;
        #[unroll]
        for kh in 0..conv.size_h {
            let r = oh * conv.stride_h + kh;
            #[unroll]
            for kw in 0..conv.size_w {
                let c = ow * conv.stride_w + kw;
                let mut inside = true;
                if padded {
                    inside = r >= conv.pad_h
                        && r < input.rows + conv.pad_h
                        && c >= conv.pad_w
                        && c < input.cols + conv.pad_w;
                }
                if inside {
                    let x_index = x_base
                        + (r - conv.pad_h) as usize * input.row_stride
                        + (c - conv.pad_w) as usize;
                    sums[(kh * conv.size_w + kw) as usize] += g * x[x_index];
                }
            }
        }
    }
}

/// Partials a unit of [`conv2d_weight_grad_sum`] loads before adding them: loads issued
/// one at a time between dependent adds wait out their latency in turn, while 64 in flight
/// keep a first layer's sum of hundreds of splits from being latency-bound
/// (`docs/perf-log/2026-11-29-bf16-input-copied-once.md`).
const SUM_LOADS: u32 = 64;

/// Sums the groups' partials: one unit per (co, ci, term) in `partials`' layout, [groups,
/// c_out, c_in, terms], in the groups' order, [`SUM_LOADS`] loads in flight at a time (the
/// last round's past `groups` neither loaded nor added).
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_weight_grad_sum<F: Float>(
    partials: &Array<F>,
    weight_grad: &mut Array<F>,
    bias_grad: &mut Array<F>,
    groups: usize,
    c_out: usize,
    c_in: usize,
    #[comptime] terms: u32,
    #[comptime] with_bias: bool,
) {
    let per_group = c_out * c_in * terms as usize;
    let pos = ABSOLUTE_POS;
    if pos >= per_group {
        terminate!();
    }
    let mut sum = F::new(0.0);
    let mut loaded = Array::<F>::new(SUM_LOADS as usize);
    let mut g = 0;
    while g < groups {
        #[unroll]
        for l in 0..SUM_LOADS as usize {
            if g + l < groups {
                loaded[l] = partials[(g + l) * per_group + pos];
            }
        }
        #[unroll]
        for l in 0..SUM_LOADS as usize {
            if g + l < groups {
                sum += loaded[l];
            }
        }
        g += SUM_LOADS as usize;
    }
    let t = (pos % terms as usize) as u32;
    let filter_input = pos / terms as usize; // co · C_in + ci
    if t + 1 < terms {
        weight_grad[filter_input * (terms - 1) as usize + t as usize] = sum;
    } else if with_bias && filter_input.is_multiple_of(c_in) {
        bias_grad[filter_input / c_in] = sum;
    }
}
