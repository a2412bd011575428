//! Weight and bias gradients of a convolution, reduced on the GPU in two stages.
//!
//!   dw[co, ci, kh, kw] = Σ_{n,oh,ow} dy[n, co, oh, ow] · x[n, ci, oh·sh − ph + kh, ow·sw − pw + kw]
//!   db[co]             = Σ_{n,oh,ow} dy[n, co, oh, ow]
//!
//! Stage 1 (`conv2d_weight_grad_partial`): cube (g, co, ci) takes a group of images and
//! computes every tap of filter co on input channel ci, plus the bias term, from one pass
//! over the group's gradient elements: each element is read once and its KH·KW input values
//! come from the cache (the group's images are small). Its units stride over the elements
//! and combine their per-tap sums in shared memory, writing one partial per (g, co, ci, tap).
//! Stage 2 (`conv2d_weight_grad_sum`) adds the groups' partials in a fixed order, so the
//! result does not depend on scheduling. When `argmax` is given, `grad` is the pooled
//! gradient of the fused conv·ReLU·pool and each element flows to its window's argmax, so
//! only the pooled map is read.

use cubecl::prelude::*;

use super::cube_sum::sum_rows_over_units;
use super::geometry::{Window, routed_position};

/// Partial sums of one image group: `partials[g, co, ci, t]` for tap t < KH·KW and, at
/// t = KH·KW, the bias term (the same in every ci).
#[cube(launch_unchecked)]
pub fn conv2d_weight_grad_partial<F: Float, A: Int>(
    x: &Tensor<F>,
    grad: &Tensor<F>,
    argmax: &ComptimeOption<Tensor<A>>,
    partials: &mut Tensor<F>,
    images_per_group: u32,
    #[comptime] conv: Window,
    #[comptime] pool: Window,
    #[comptime] cube_size: u32,
    #[define(A)] _argmax_type: StorageType,
) {
    let group = CUBE_POS_X as usize;
    let co = CUBE_POS_Y as usize;
    let ci = CUBE_POS_Z as usize;
    let c_in = x.shape(1);
    let in_h = x.shape(2) as u32;
    let in_w = x.shape(3) as u32;
    let c_out = grad.shape(1);
    let grad_h = grad.shape(2) as u32;
    let grad_w = grad.shape(3) as u32;
    let plane_size = (grad_h * grad_w) as usize;
    let terms = comptime!(conv.size_h * conv.size_w + 1);
    let bias_term = comptime!(conv.size_h * conv.size_w);

    let mut sums = Array::<F>::new(comptime!(terms as usize));
    #[unroll]
    for t in 0..terms {
        sums[t as usize] = F::new(0.0);
    }
    let first = group * images_per_group as usize * plane_size;
    let mut end = first + images_per_group as usize * plane_size;
    let all = grad.shape(0) * plane_size;
    if end > all {
        end = all;
    }
    let mut m = first + UNIT_POS as usize;
    while m < end {
        let n = m / plane_size;
        let within = m % plane_size;
        let row = (within as u32) / grad_w;
        let col = (within as u32) % grad_w;
        let index = (n * c_out + co) * plane_size + within;
        let (valid, oh, ow) = routed_position(argmax, index, row, col, pool);
        if valid {
            let g = grad[index];
            sums[bias_term as usize] += g;
            let x_base = n * x.stride(0) + ci * x.stride(1);
            #[unroll]
            for kh in 0..conv.size_h {
                let r = oh * conv.stride_h + kh;
                if r >= conv.pad_h && r < in_h + conv.pad_h {
                    let x_row = x_base + (r - conv.pad_h) as usize * x.stride(2);
                    #[unroll]
                    for kw in 0..conv.size_w {
                        let c = ow * conv.stride_w + kw;
                        if c >= conv.pad_w && c < in_w + conv.pad_w {
                            let x_index = x_row + (c - conv.pad_w) as usize;
                            sums[(kh * conv.size_w + kw) as usize] += g * x[x_index];
                        }
                    }
                }
            }
        }
        m += cube_size as usize;
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

/// Sums the groups' partials: one unit per (co, ci, term) in `partials`' layout.
#[cube(launch_unchecked)]
pub fn conv2d_weight_grad_sum<F: Float>(
    partials: &Tensor<F>,
    weight_grad: &mut Tensor<F>,
    bias_grad: &mut Tensor<F>,
    #[comptime] terms: u32,
    #[comptime] with_bias: bool,
) {
    let groups = partials.shape(0);
    let c_out = partials.shape(1);
    let c_in = partials.shape(2);
    let per_group = c_out * c_in * terms as usize;
    let pos = ABSOLUTE_POS;
    if pos >= per_group {
        terminate!();
    }
    let mut sum = F::new(0.0);
    for g in 0..groups {
        sum += partials[g * per_group + pos];
    }
    let t = (pos % terms as usize) as u32;
    let filter_input = pos / terms as usize; // co · C_in + ci
    if t + 1 < terms {
        weight_grad[filter_input * (terms - 1) as usize + t as usize] = sum;
    } else if with_bias && filter_input.is_multiple_of(c_in) {
        bias_grad[filter_input / c_in] = sum;
    }
}
