//! Direct 2-D convolution (cross-correlation, as Burn and PyTorch define it) and its input
//! gradient.
//!
//! Forward, for each output (n, co, oh, ow):
//!   y = b[co] + Σ_{ci,kh,kw} x[n, ci, oh·sh − ph + kh, ow·sw − pw + kw] · w[co, ci, kh, kw]
//! Input gradient, a gather over the outputs each input element feeds:
//!   dx[n, ci, ih, iw] = Σ_{co,kh,kw : ih = oh·sh − ph + kh, iw = ow·sw − pw + kw} dy[n, co, oh, ow] · w[co, ci, kh, kw]
//! For the fused conv·ReLU·pool, dy is first gathered from the pooled gradient through the
//! argmax (the max-pool backward): a conv-output-sized map, small next to the work here.
//! Stride 1 (every network here) has its own kernel, [`conv2d_input_grad_rows`]: there the
//! gather is a plain correlation of dy with the weights, so a unit can reuse each loaded
//! value across several input columns.

use cubecl::prelude::*;

use crate::kernels::geometry::{Nchw, Window, nchw_position};
use crate::kernels::optional::value_or_zero;

/// Output channels whose gradient rows a unit of the stride-1 input gradient loads together.
const OUTPUT_CHANNELS_IN_FLIGHT: u32 = 2;

/// Σ_{ci,kh,kw} x · w for conv output `(oh, ow)` of image `n`, filter `co` (no bias).
#[cube]
#[allow(clippy::too_many_arguments)]
pub fn conv_at<F: Float>(
    x: &Array<F>,
    weight: &Array<F>,
    x_map: &Nchw,
    n: usize,
    co: usize,
    oh: u32,
    ow: u32,
    #[comptime] conv: Window,
) -> F {
    let c_in = x_map.channels;
    let in_h = x_map.rows;
    let in_w = x_map.cols;
    let taps = (conv.size_h * conv.size_w) as usize;
    let mut sum = F::new(0.0);
    for ci in 0..c_in {
        let x_base = n * x_map.image_stride + ci * x_map.channel_stride;
        let w_base = (co * c_in + ci) * taps;
        #[unroll]
        for kh in 0..conv.size_h {
            let row = oh * conv.stride_h + kh;
            if row >= conv.pad_h && row < in_h + conv.pad_h {
                let x_row = x_base + (row - conv.pad_h) as usize * x_map.row_stride;
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
    x: &Array<F>,
    weight: &Array<F>,
    bias: &ComptimeOption<Array<F>>,
    output: &mut Array<F>,
    x_map: Nchw,
    output_map: Nchw,
    #[comptime] conv: Window,
) {
    let pos = ABSOLUTE_POS;
    if pos >= output.len() {
        terminate!();
    }
    let (n, co, oh, ow) = nchw_position(pos, &output_map);
    output[pos] = value_or_zero(bias, co) + conv_at(x, weight, &x_map, n, co, oh, ow, conv);
}

/// Input gradient from the conv output's gradient `grad` (dy). A unit owns one input
/// position (n, ih, iw) for a block of `channels` input channels (cube row Y picks the
/// block): each dy value it reads serves all of them, and the weights it multiplies by are
/// the same for every unit of the cube, so they broadcast.
#[cube(launch_unchecked)]
pub fn conv2d_input_grad<F: Float>(
    grad: &Array<F>,
    weight: &Array<F>,
    x_grad: &mut Array<F>,
    grad_map: Nchw,
    x_map: Nchw,
    #[comptime] conv: Window,
    #[comptime] channels: u32,
) {
    let c_in = x_map.channels;
    let in_h = x_map.rows;
    let in_w = x_map.cols;
    let plane = (in_h * in_w) as usize;
    let pos = ABSOLUTE_POS_X as usize;
    if pos >= x_map.batch * plane {
        terminate!();
    }
    let n = pos / plane;
    let ih = (pos % plane) as u32 / in_w;
    let iw = (pos % plane) as u32 % in_w;
    let first_ci = CUBE_POS_Y as usize * channels as usize;
    let c_out = grad_map.channels;
    let conv_h = grad_map.rows;
    let conv_w = grad_map.cols;
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

/// Input gradient of a stride-1 convolution. A unit owns `cols` adjacent input columns of
/// one input row for a block of `channels` input channels (cube row Y picks the block). For
/// each output channel and window row it loads the `cols + size_w − 1` values of dy its
/// columns see once; each weight it loads (the same for every unit of the cube, so it
/// broadcasts) serves all its columns, each dy value all its channels:
///   dx[n, ci, ih, iw] = Σ_{co,kh,kw} dy[n, co, ih + ph − kh, iw + pw − kw] · w[co, ci, kh, kw]
#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv2d_input_grad_rows<F: Float>(
    grad: &Array<F>,
    weight: &Array<F>,
    x_grad: &mut Array<F>,
    grad_map: Nchw,
    x_map: Nchw,
    #[comptime] conv: Window,
    #[comptime] channels: u32,
    #[comptime] cols: u32,
) {
    let c_in = x_map.channels;
    let in_h = x_map.rows;
    let in_w = x_map.cols;
    let col_blocks = in_w.div_ceil(cols);
    let pos = ABSOLUTE_POS_X as usize;
    if pos >= x_map.batch * (in_h * col_blocks) as usize {
        terminate!();
    }
    let n = pos / (in_h * col_blocks) as usize;
    let ih = (pos as u32 / col_blocks) % in_h;
    let first_col = (pos as u32 % col_blocks) * cols;
    let first_ci = CUBE_POS_Y as usize * channels as usize;
    let c_out = grad_map.channels;
    let conv_h = grad_map.rows;
    let conv_w = grad_map.cols;
    let taps = (conv.size_h * conv.size_w) as usize;
    // dy[j] holds conv column first_col + pw − (size_w − 1) + j: column iw + pw − kw of
    // input column iw = first_col + p is dy[p + size_w − 1 − kw].
    let span = comptime!(cols + conv.size_w - 1);
    let reach = conv.size_w - 1;

    let mut sums = Array::<F>::new((channels * cols) as usize);
    #[unroll]
    for i in 0..channels * cols {
        sums[i as usize] = F::new(0.0);
    }
    let mut dy = Array::<F>::new(span as usize);
    // Output channels in groups of OUTPUT_CHANNELS_IN_FLIGHT, so that their loads are in
    // flight together: with few units per SM the loop is bound by load latency.
    for group in 0..c_out.div_ceil(OUTPUT_CHANNELS_IN_FLIGHT as usize) {
        #[unroll]
        for u in 0..OUTPUT_CHANNELS_IN_FLIGHT {
            let co = group * OUTPUT_CHANNELS_IN_FLIGHT as usize + u as usize;
            if co < c_out {
                let grad_plane = (n * c_out + co) * (conv_h * conv_w) as usize;
                let w_base = (co * c_in + first_ci) * taps;
                #[unroll]
                for kh in 0..conv.size_h {
                    let shifted_h = ih + conv.pad_h;
                    if shifted_h >= kh && shifted_h - kh < conv_h {
                        let grad_row = grad_plane + ((shifted_h - kh) * conv_w) as usize;
                        #[unroll]
                        for j in 0..span {
                            let shifted_w = first_col + conv.pad_w + j;
                            let mut value = F::new(0.0);
                            if shifted_w >= reach && shifted_w - reach < conv_w {
                                value = grad[grad_row + (shifted_w - reach) as usize];
                            }
                            dy[j as usize] = value;
                        }
                        #[unroll]
                        for c in 0..channels {
                            if first_ci + (c as usize) < c_in {
                                #[unroll]
                                for kw in 0..conv.size_w {
                                    let tap = (kh * conv.size_w + kw) as usize;
                                    let w = weight[w_base + c as usize * taps + tap];
                                    #[unroll]
                                    for p in 0..cols {
                                        sums[(c * cols + p) as usize] +=
                                            dy[(p + reach - kw) as usize] * w;
                                    }
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    #[unroll]
    for c in 0..channels {
        let ci = first_ci + c as usize;
        #[unroll]
        for p in 0..cols {
            let iw = first_col + p;
            if ci < c_in && iw < in_w {
                x_grad[((n * c_in + ci) * in_h as usize + ih as usize) * in_w as usize
                    + iw as usize] = sums[(c * cols + p) as usize];
            }
        }
    }
}
