//! Fused convolution · bias · ReLU · max-pool: writes only the pooled map and the argmax,
//! never the full-resolution conv output.
//!
//! For each pooled output (n, co, ph, pw), over the pool window's conv positions (oh, ow):
//!   z(oh, ow) = b[co] + conv(x, w)[n, co, oh, ow]
//!   out = max(0, max z)          (= max-pool of ReLU(z))
//!   argmax = offset of the first maximal z if that maximum is positive, else NO_ARGMAX
//!            (ReLU cut the value: its gradient is zero everywhere in the window).
//! The backward reuses `conv::conv2d_input_grad` and `reduce::conv2d_weight_grad` with the
//! argmax routing the pooled gradient.

use cubecl::prelude::*;

use super::conv::conv_at;
use super::geometry::{NO_ARGMAX, Window, nchw_position};

#[cube(launch)]
pub fn conv_relu_pool_forward<F: Float, A: Int>(
    x: &Tensor<F>,
    weight: &Tensor<F>,
    bias: &ComptimeOption<Tensor<F>>,
    output: &mut Tensor<F>,
    argmax: &mut Tensor<A>,
    conv_h: u32,
    conv_w: u32,
    #[comptime] conv: Window,
    #[comptime] pool: Window,
    #[define(A)] _argmax_type: StorageType,
) {
    let pos = ABSOLUTE_POS;
    if pos >= output.len() {
        terminate!();
    }
    let (n, co, ph, pw) = nchw_position(pos, output);
    let bias: ComptimeOption<F> = bias.map(|bias| bias[co]);
    let b = bias.unwrap_or_default();

    let mut best = F::new(0.0);
    let mut best_offset = NO_ARGMAX.runtime();
    #[unroll]
    for kh in 0..pool.size_h {
        let row = ph * pool.stride_h + kh;
        if row >= pool.pad_h && row < conv_h + pool.pad_h {
            #[unroll]
            for kw in 0..pool.size_w {
                let col = pw * pool.stride_w + kw;
                if col >= pool.pad_w && col < conv_w + pool.pad_w {
                    let z = b + conv_at(x, weight, n, co, row - pool.pad_h, col - pool.pad_w, conv);
                    if z > best {
                        best = z;
                        best_offset = kh * pool.size_w + kw;
                    }
                }
            }
        }
    }
    output[pos] = best;
    argmax[pos] = A::cast_from(best_offset);
}
