//! Max-pool with the argmax kept as the position inside the window.
//!
//! Forward, for each output (n, c, ph, pw):
//!   out = max_{kh,kw} x[n, c, ph·sh − ph₀ + kh, pw·sw − pw₀ + kw]   (positions outside x skipped)
//!   argmax = kh·KW + kw of the first maximum in row-major window order.
//! Backward, for each input (n, c, ih, iw):
//!   dx = Σ over windows covering (ih, iw) whose argmax is (ih, iw) of dout.
//! The backward is a gather (no atomics), so it is deterministic. Under the networks' 2×2
//! stride-2 unpadded pool each input position lies in at most one window, so
//! [`max_pool2x2_backward`] writes a window's four positions from one read of its argmax
//! and gradient instead.

use cubecl::prelude::*;

use super::geometry::{NO_ARGMAX, Nchw, Window, gather_from_windows, nchw_position};

#[cube(launch_unchecked)]
pub fn max_pool2d_forward<F: Float, A: Int>(
    x: &Array<F>,
    output: &mut Array<F>,
    argmax: &mut Array<A>,
    x_map: Nchw,
    output_map: Nchw,
    #[comptime] window: Window,
    #[define(A)] _argmax_type: StorageType,
) {
    let pos = ABSOLUTE_POS;
    if pos >= output.len() {
        terminate!();
    }
    let (n, c, ph, pw) = nchw_position(pos, &output_map);
    let plane = n * output_map.channels + c;
    let in_h = x_map.rows;
    let in_w = x_map.cols;
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
    grad: &Array<F>,
    argmax: &Array<A>,
    x_grad: &mut Array<F>,
    grad_map: Nchw,
    x_map: Nchw,
    #[comptime] window: Window,
    #[define(A)] _argmax_type: StorageType,
) {
    let pos = ABSOLUTE_POS;
    if pos >= x_grad.len() {
        terminate!();
    }
    let (n, c, ih, iw) = nchw_position(pos, &x_map);
    let plane = n * x_map.channels + c;
    x_grad[pos] = gather_from_windows(
        grad,
        argmax,
        grad_map.rows,
        grad_map.cols,
        plane,
        ih,
        iw,
        window,
    );
}

/// The backward of a 2×2 stride-2 unpadded max-pool: one unit per 2×2 block of the input
/// (⌈h/2⌉ × ⌈w/2⌉ a plane), each block the window of one pooled position — or of none, past
/// an odd edge, where it gets zeros. The unit writes the window's gradient at its argmax and
/// zeros at the other three positions.
#[cube(launch_unchecked)]
pub fn max_pool2x2_backward<F: Float, A: Int>(
    grad: &Array<F>,
    argmax: &Array<A>,
    x_grad: &mut Array<F>,
    grad_map: Nchw,
    x_map: Nchw,
    #[define(A)] _argmax_type: StorageType,
) {
    let rows = x_map.rows;
    let cols = x_map.cols;
    let blocks_w = cols.div_ceil(2);
    let plane_blocks = (rows.div_ceil(2) * blocks_w) as usize;
    let pos = ABSOLUTE_POS;
    if pos >= x_map.batch * x_map.channels * plane_blocks {
        terminate!();
    }
    let plane = pos / plane_blocks;
    let in_plane = (pos % plane_blocks) as u32;
    let bh = in_plane / blocks_w;
    let bw = in_plane % blocks_w;
    let grad_h = grad_map.rows;
    let grad_w = grad_map.cols;
    let mut g = F::new(0.0);
    let mut offset = NO_ARGMAX.runtime();
    if bh < grad_h && bw < grad_w {
        let window = plane * (grad_h * grad_w) as usize + (bh * grad_w + bw) as usize;
        offset = u32::cast_from(argmax[window]);
        g = grad[window];
    }
    let base = plane * (rows * cols) as usize;
    #[unroll]
    for r in 0..4u32 {
        let ih = bh * 2 + r / 2;
        let iw = bw * 2 + r % 2;
        if ih < rows && iw < cols {
            let mut value = F::new(0.0);
            if offset == r {
                value = g;
            }
            x_grad[base + (ih * cols + iw) as usize] = value;
        }
    }
}
