//! Fused convolution · bias · ReLU · max-pool: writes only the pooled map and the argmax,
//! never the full-resolution conv output.
//!
//! For each pooled output (n, co, ph, pw), over the pool window's conv positions (oh, ow):
//!   z(oh, ow) = b[co] + conv(x, w)[n, co, oh, ow]
//!   out = max(0, max z)          (= max-pool of ReLU(z))
//!   argmax = offset of the first maximal z if that maximum is positive, else NO_ARGMAX
//!            (ReLU cut the value: its gradient is zero everywhere in the window).
//!
//! A unit owns one pooled position (n, ph, pw) for `filter_blocks` consecutive blocks of
//! `filters` filters (cube row Y picks the blocks), one block after the other: the
//! position's indices are worked out once for all of them. It loads the input patch its
//! window's conv positions read (4×4 for a 2×2 pool over a 3×3 conv) into registers once
//! per input channel and block and reuses it for every filter of the block, so each input
//! load serves `filters` × (window positions) multiply-adds instead of one.
//! Neighbouring units are neighbouring `pw`, so the pooled map is written coalesced.
//! The backward reuses the kernels of `conv::direct` (input gradient) and `conv::weight_grad`, with
//! the argmax routing the pooled gradient.

use cubecl::prelude::*;

use super::geometry::{NO_ARGMAX, Nchw, Window};
use super::optional::value_or_zero;

#[cube(launch_unchecked)]
#[allow(clippy::too_many_arguments)]
pub fn conv_relu_pool_forward<F: Float, A: Int>(
    x: &Array<F>,
    weight: &Array<F>,
    bias: &ComptimeOption<Array<F>>,
    output: &mut Array<F>,
    argmax: &mut Array<A>,
    x_map: Nchw,
    output_map: Nchw,
    conv_h: u32,
    conv_w: u32,
    filter_blocks: u32,
    #[comptime] conv: Window,
    #[comptime] pool: Window,
    #[comptime] filters: u32,
    #[define(A)] _argmax_type: StorageType,
) {
    let c_out = output_map.channels;
    let out_w = output_map.cols as usize;
    let plane = output_map.rows as usize * out_w;
    let pos = ABSOLUTE_POS_X as usize;
    if pos >= output_map.batch * plane {
        terminate!();
    }
    let n = pos / plane;
    let within = pos % plane;
    let ph = (within / out_w) as u32;
    let pw = (within % out_w) as u32;

    let c_in = x_map.channels;
    let image_base = n * x_map.image_stride;
    let channel_stride = x_map.channel_stride;
    let taps = conv.size_h * conv.size_w;
    let windows = comptime!(pool.size_h * pool.size_w);
    let patch_h = comptime!((pool.size_h - 1) * conv.stride_h + conv.size_h);
    let patch_w = comptime!((pool.size_w - 1) * conv.stride_w + conv.size_w);
    let padded = comptime!(conv.pad_h + conv.pad_w + pool.pad_h + pool.pad_w > 0);
    // Patch element (r, c) is input (top + r − offset_h, left + c − offset_w): the shift by
    // both paddings keeps the arithmetic unsigned.
    let offset_h = pool.pad_h * conv.stride_h + conv.pad_h;
    let offset_w = pool.pad_w * conv.stride_w + conv.pad_w;
    let top = ph * pool.stride_h * conv.stride_h;
    let left = pw * pool.stride_w * conv.stride_w;

    let mut sums = Array::<F>::new(comptime!((filters * windows) as usize));
    let mut patch = Array::<F>::new(comptime!((patch_h * patch_w) as usize));
    for block in 0..filter_blocks as usize {
        let first_co = (CUBE_POS_Y as usize * filter_blocks as usize + block) * filters as usize;
        #[unroll]
        for i in 0..filters * windows {
            sums[i as usize] = F::new(0.0);
        }
        for ci in 0..c_in {
            let x_base = image_base + ci * channel_stride;
            #[unroll]
            for r in 0..patch_h {
                #[unroll]
                for c in 0..patch_w {
                    patch[(r * patch_w + c) as usize] = input_at(
                        x,
                        x_base,
                        &x_map,
                        top + r,
                        left + c,
                        offset_h,
                        offset_w,
                        padded,
                    );
                }
            }
            #[unroll]
            for f in 0..filters {
                let co = first_co + f as usize;
                if co < c_out {
                    let w_base = (co * c_in + ci) * taps as usize;
                    #[unroll]
                    for kh in 0..conv.size_h {
                        #[unroll]
                        for kw in 0..conv.size_w {
                            let w = weight[w_base + (kh * conv.size_w + kw) as usize];
                            #[unroll]
                            for wh in 0..pool.size_h {
                                #[unroll]
                                for ww in 0..pool.size_w {
                                    let r = wh * conv.stride_h + kh;
                                    let c = ww * conv.stride_w + kw;
                                    let s = (f * windows + wh * pool.size_w + ww) as usize;
                                    sums[s] += patch[(r * patch_w + c) as usize] * w;
                                }
                            }
                        }
                    }
                }
            }
        }

        #[unroll]
        for f in 0..filters {
            let co = first_co + f as usize;
            if co < c_out {
                let b = value_or_zero(bias, co);
                let mut best = F::new(0.0);
                let mut best_offset = NO_ARGMAX.runtime();
                #[unroll]
                for wh in 0..pool.size_h {
                    #[unroll]
                    for ww in 0..pool.size_w {
                        // Unpadded windows lie inside the conv output (the pool rounds down).
                        let mut inside = true;
                        if padded {
                            let row = ph * pool.stride_h + wh;
                            let col = pw * pool.stride_w + ww;
                            inside = row >= pool.pad_h
                                && row < conv_h + pool.pad_h
                                && col >= pool.pad_w
                                && col < conv_w + pool.pad_w;
                        }
                        let z = b + sums[(f * windows + wh * pool.size_w + ww) as usize];
                        if inside && z > best {
                            best = z;
                            best_offset = wh * pool.size_w + ww;
                        }
                    }
                }
                let o = (n * c_out + co) * plane + within;
                output[o] = best;
                argmax[o] = A::cast_from(best_offset);
            }
        }
    }
}

/// Input value at patch coordinates (`row`, `col`), which are shifted by (`offset_h`,
/// `offset_w`) from the map's own; zero in the padding. Without padding every patch lies
/// inside the map (conv and pool both round down), so nothing is checked.
#[cube]
#[allow(clippy::too_many_arguments)]
fn input_at<F: Float>(
    x: &Array<F>,
    base: usize,
    input: &Nchw,
    row: u32,
    col: u32,
    offset_h: u32,
    offset_w: u32,
    #[comptime] padded: bool,
) -> F {
    let mut value = F::new(0.0);
    if padded {
        if row >= offset_h
            && row < input.rows + offset_h
            && col >= offset_w
            && col < input.cols + offset_w
        {
            value =
                x[base + (row - offset_h) as usize * input.row_stride + (col - offset_w) as usize];
        }
    } else {
        value = x[base + row as usize * input.row_stride + col as usize];
    }
    value
}
