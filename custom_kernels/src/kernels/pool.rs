//! Max-pool with the argmax kept as the position inside the window.
//!
//! Forward, for each output (n, c, ph, pw):
//!   out = max_{kh,kw} x[n, c, ph·sh − ph₀ + kh, pw·sw − pw₀ + kw]   (positions outside x skipped)
//!   argmax = kh·KW + kw of the first maximum in row-major window order.
//! Backward, for each input (n, c, ih, iw):
//!   dx = Σ over windows covering (ih, iw) whose argmax is (ih, iw) of dout.
//! The backward is a gather (no atomics), so it is deterministic.

use cubecl::prelude::*;

use super::geometry::{Window, covering_windows};

#[cube(launch)]
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
    let out_w = output.shape(3);
    let out_h = output.shape(2);
    let pw = (pos % out_w) as u32;
    let ph = ((pos / out_w) % out_h) as u32;
    let plane = pos / (out_w * out_h);
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

#[cube(launch)]
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
    let in_w = x_grad.shape(3);
    let in_h = x_grad.shape(2);
    let iw = (pos % in_w) as u32;
    let ih = ((pos / in_w) % in_h) as u32;
    let plane = pos / (in_w * in_h);
    let out_h = grad.shape(2) as u32;
    let out_w = grad.shape(3) as u32;

    let (ph_first, ph_end) =
        covering_windows(ih, window.size_h, window.stride_h, window.pad_h, out_h);
    let (pw_first, pw_end) =
        covering_windows(iw, window.size_w, window.stride_w, window.pad_w, out_w);
    let mut sum = F::new(0.0);
    for ph in ph_first..ph_end {
        let kh = ih + window.pad_h - ph * window.stride_h;
        for pw in pw_first..pw_end {
            let kw = iw + window.pad_w - pw * window.stride_w;
            let o = plane * (out_h * out_w) as usize + (ph * out_w + pw) as usize;
            if u32::cast_from(argmax[o]) == kh * window.size_w + kw {
                sum += grad[o];
            }
        }
    }
    x_grad[pos] = sum;
}
