//! Direct 2-D convolution (cross-correlation, as Burn and PyTorch define it) and its input
//! gradient.
//!
//! Forward, for each output (n, co, oh, ow):
//!   y = b[co] + Σ_{ci,kh,kw} x[n, ci, oh·sh − ph + kh, ow·sw − pw + kw] · w[co, ci, kh, kw]
//! Input gradient, a gather over the outputs each input element feeds:
//!   dx[n, ci, ih, iw] = Σ_{co,kh,kw : ih = oh·sh − ph + kh, iw = ow·sw − pw + kw} dy[n, co, oh, ow] · w[co, ci, kh, kw]
//! where dy is either the conv output's gradient or, for the fused conv·ReLU·pool, the
//! pooled gradient routed through the argmax (see `geometry::routed_grad`), so the
//! full-resolution gradient is never stored.

use cubecl::prelude::*;

use super::geometry::{Window, nchw_position, routed_grad};

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
        let x_base = (n * c_in + ci) * (in_h * in_w) as usize;
        let w_base = (co * c_in + ci) * taps;
        #[unroll]
        for kh in 0..conv.size_h {
            let row = oh * conv.stride_h + kh;
            if row >= conv.pad_h && row < in_h + conv.pad_h {
                let x_row = x_base + ((row - conv.pad_h) * in_w) as usize;
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

#[cube(launch)]
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

/// Input gradient; `grad` is dy, or the pooled gradient when `argmax` is given. `conv_h`
/// and `conv_w` are the conv output's size (dy's size when there is no pooling).
#[cube(launch)]
pub fn conv2d_input_grad<F: Float, A: Int>(
    grad: &Tensor<F>,
    argmax: &ComptimeOption<Tensor<A>>,
    weight: &Tensor<F>,
    x_grad: &mut Tensor<F>,
    conv_h: u32,
    conv_w: u32,
    #[comptime] conv: Window,
    #[comptime] pool: Window,
    #[define(A)] _argmax_type: StorageType,
) {
    let pos = ABSOLUTE_POS;
    if pos >= x_grad.len() {
        terminate!();
    }
    let (n, ci, ih, iw) = nchw_position(pos, x_grad);
    let c_in = x_grad.shape(1);
    let c_out = weight.shape(0);
    let taps = (conv.size_h * conv.size_w) as usize;

    let mut sum = F::new(0.0);
    for co in 0..c_out {
        let w_base = (co * c_in + ci) * taps;
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
                                let dy = routed_grad(grad, argmax, n * c_out + co, oh, ow, pool);
                                sum += dy * weight[w_base + (kh * conv.size_w + kw) as usize];
                            }
                        }
                    }
                }
            }
        }
    }
    x_grad[pos] = sum;
}
