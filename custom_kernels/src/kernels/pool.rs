//! Max-pool with the argmax kept as the position inside the window.
//!
//! Forward, for each output (n, c, ph, pw):
//!   out = max_{kh,kw} x[n, c, ph·sh − ph₀ + kh, pw·sw − pw₀ + kw]   (positions outside x skipped)
//!   argmax = kh·KW + kw of the first maximum in row-major window order.
//! Backward, for each input (n, c, ih, iw):
//!   dx = Σ over windows covering (ih, iw) whose argmax is (ih, iw) of dout.
//! The backward is a gather (no atomics), so it is deterministic.

use cubecl::prelude::*;

use super::geometry::{Window, gather_from_windows, nchw_position};

#[cube(launch_unchecked)]
pub fn max_pool2d_forward<F: Float, A: Int>(
    x: &Tensor<F>,
    output: &mut Tensor<F>,
    argmax: &mut Tensor<A>,
    #[comptime] window: Window,
    #[define(A)] _argmax_type: StorageType,
) {
    let pos = ABSOLUTE_POS;
    if pos >= output.len() {
        terminate!();
    }
    let (n, c, ph, pw) = nchw_position(pos, output);
    let plane = n * output.shape(1) + c;
    let in_h = x.shape(2) as u32;
    let in_w = x.shape(3) as u32;
    let base = plane * (in_h * in_w) as usize;

    let mut best = F::new(0.0);
    let mut best_offset = 0u32;
    let mut found = false;
    #[unroll]
    for kh in 0..window.size_h {
        // Unsigned coordinates shifted by the padding: valid rows are pad ≤ r < in + pad.
        let row = ph * window.stride_h + kh;
        if row >= window.pad_h && row < in_h + window.pad_h {
            let ih = row - window.pad_h;
            #[unroll]
            for kw in 0..window.size_w {
                let col = pw * window.stride_w + kw;
                if col >= window.pad_w && col < in_w + window.pad_w {
                    let value = x[base + (ih * in_w + col - window.pad_w) as usize];
                    if !found || value > best {
                        best = value;
                        best_offset = kh * window.size_w + kw;
                        found = true;
                    }
                }
            }
        }
    }
    output[pos] = best;
    argmax[pos] = A::cast_from(best_offset);
}

#[cube(launch_unchecked)]
pub fn max_pool2d_backward<F: Float, A: Int>(
    grad: &Tensor<F>,
    argmax: &Tensor<A>,
    x_grad: &mut Tensor<F>,
    #[comptime] window: Window,
    #[define(A)] _argmax_type: StorageType,
) {
    let pos = ABSOLUTE_POS;
    if pos >= x_grad.len() {
        terminate!();
    }
    let (n, c, ih, iw) = nchw_position(pos, x_grad);
    let plane = n * x_grad.shape(1) + c;
    x_grad[pos] = gather_from_windows(grad, argmax, plane, ih, iw, window);
}
