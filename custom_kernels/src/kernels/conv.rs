//! Direct 2-D convolution (cross-correlation, as Burn and PyTorch define it) and its input
//! gradient.
//!
//! Forward, for each output (n, co, oh, ow):
//!   y = b[co] + Σ_{ci,kh,kw} x[n, ci, oh·sh − ph + kh, ow·sw − pw + kw] · w[co, ci, kh, kw]
//! Input gradient, a gather over the outputs each input element feeds:
//!   dx[n, ci, ih, iw] = Σ_{co,kh,kw : ih = oh·sh − ph + kh, iw = ow·sw − pw + kw} dy[n, co, oh, ow] · w[co, ci, kh, kw]
//! For the fused conv·ReLU·pool, dy is first gathered from the pooled gradient through the
//! argmax (the max-pool backward): a conv-output-sized map, small next to the work here.

use cubecl::prelude::*;

use super::geometry::{Window, nchw_position};

/// Σ_{ci,kh,kw} x · w for conv output `(oh, ow)` of image `n`, filter `co` (no bias).
#[cube]
pub fn conv_at<F: Float>(
    x: &Tensor<F>,
    weight: &Tensor<F>,
    n: usize,
    co: usize,
    oh: u32,
    ow: u32,
    #[comptime] conv: Window,
) -> F {
    let c_in = x.shape(1);
    let in_h = x.shape(2) as u32;
    let in_w = x.shape(3) as u32;
    let taps = (conv.size_h * conv.size_w) as usize;
    let mut sum = F::new(0.0);
    for ci in 0..c_in {
        let x_base = n * x.stride(0) + ci * x.stride(1);
        let w_base = (co * c_in + ci) * taps;
        #[unroll]
        for kh in 0..conv.size_h {
            let row = oh * conv.stride_h + kh;
            if row >= conv.pad_h && row < in_h + conv.pad_h {
                let x_row = x_base + (row - conv.pad_h) as usize * x.stride(2);
                #[unroll]
                for kw in 0..conv.size_w {
                    let col = ow * conv.stride_w + kw;
                    if col >= conv.pad_w && col < in_w + conv.pad_w {
                        let w_index = w_base + (kh * conv.size_w + kw) as usize;
                        sum += x[x_row + (col - conv.pad_w) as usize] * weight[w_index];
                    }
                }
            }
        }
    }
    sum
}

#[cube(launch_unchecked)]
pub fn conv2d_forward<F: Float>(
    x: &Tensor<F>,
    weight: &Tensor<F>,
    bias: &ComptimeOption<Tensor<F>>,
    output: &mut Tensor<F>,
    #[comptime] conv: Window,
) {
    let pos = ABSOLUTE_POS;
    if pos >= output.len() {
        terminate!();
    }
    let (n, co, oh, ow) = nchw_position(pos, output);
    let bias: ComptimeOption<F> = bias.map(|bias| bias[co]);
    output[pos] = bias.unwrap_or_default() + conv_at(x, weight, n, co, oh, ow, conv);
}

/// Input gradient from the conv output's gradient `grad` (dy). A unit owns one input
/// position (n, ih, iw) for a block of `channels` input channels (cube row Y picks the
/// block): each dy value it reads serves all of them, and the weights it multiplies by are
/// the same for every unit of the cube, so they broadcast.
#[cube(launch_unchecked)]
pub fn conv2d_input_grad<F: Float>(
    grad: &Tensor<F>,
    weight: &Tensor<F>,
    x_grad: &mut Tensor<F>,
    #[comptime] conv: Window,
    #[comptime] channels: u32,
) {
    let c_in = x_grad.shape(1);
    let in_h = x_grad.shape(2) as u32;
    let in_w = x_grad.shape(3) as u32;
    let plane = (in_h * in_w) as usize;
    let pos = ABSOLUTE_POS_X as usize;
    if pos >= x_grad.shape(0) * plane {
        terminate!();
    }
    let n = pos / plane;
    let ih = (pos % plane) as u32 / in_w;
    let iw = (pos % plane) as u32 % in_w;
    let first_ci = CUBE_POS_Y as usize * channels as usize;
    let c_out = grad.shape(1);
    let conv_h = grad.shape(2) as u32;
    let conv_w = grad.shape(3) as u32;
    let taps = (conv.size_h * conv.size_w) as usize;

    let mut sums = Array::<F>::new(channels as usize);
    #[unroll]
    for c in 0..channels {
        sums[c as usize] = F::new(0.0);
    }
    for co in 0..c_out {
        let grad_base = (n * c_out + co) * (conv_h * conv_w) as usize;
        let w_base = (co * c_in + first_ci) * taps;
        #[unroll]
        for kh in 0..conv.size_h {
            // Output row oh reads input row ih through tap kh when oh·sh = ih + ph − kh.
            let shifted_h = ih + conv.pad_h;
            if shifted_h >= kh && (shifted_h - kh).is_multiple_of(conv.stride_h) {
                let oh = (shifted_h - kh) / conv.stride_h;
                if oh < conv_h {
                    #[unroll]
                    for kw in 0..conv.size_w {
                        let shifted_w = iw + conv.pad_w;
                        if shifted_w >= kw && (shifted_w - kw).is_multiple_of(conv.stride_w) {
                            let ow = (shifted_w - kw) / conv.stride_w;
                            if ow < conv_w {
                                let dy = grad[grad_base + (oh * conv_w + ow) as usize];
                                let tap = (kh * conv.size_w + kw) as usize;
                                #[unroll]
                                for c in 0..channels {
                                    if first_ci + (c as usize) < c_in {
                                        let w = weight[w_base + c as usize * taps + tap];
                                        sums[c as usize] += dy * w;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    let spatial = (ih * in_w + iw) as usize;
    #[unroll]
    for c in 0..channels {
        let ci = first_ci + c as usize;
        if ci < c_in {
            x_grad[(n * c_in + ci) * plane + spatial] = sums[c as usize];
        }
    }
}
