//! Weight and bias gradients of a convolution, reduced on the GPU.
//!
//!   dw[co, ci, kh, kw] = Σ_{n,oh,ow} dy[n, co, oh, ow] · x[n, ci, oh·sh − ph + kh, ow·sw − pw + kw]
//!   db[co]             = Σ_{n,oh,ow} dy[n, co, oh, ow]
//!
//! One cube computes one output element: cube (t, co) with t < C_in·KH·KW handles weight tap
//! t, and t = C_in·KH·KW (launched only when the bias gradient is wanted) handles db[co]. Its units stride over
//! the gradient elements of filter co, then combine their partial sums in shared memory, so
//! the result does not depend on scheduling. When `argmax` is given, `grad` is the pooled
//! gradient of the fused conv·ReLU·pool and each element flows to its window's argmax, so
//! only the pooled map is read.

use cubecl::prelude::*;

use super::geometry::{Window, routed_position};

#[cube(launch)]
pub fn conv2d_weight_grad<F: Float, A: Int>(
    x: &Tensor<F>,
    grad: &Tensor<F>,
    argmax: &ComptimeOption<Tensor<A>>,
    weight_grad: &mut Tensor<F>,
    bias_grad: &mut Tensor<F>,
    #[comptime] conv: Window,
    #[comptime] pool: Window,
    #[comptime] cube_size: u32,
    #[define(A)] _argmax_type: StorageType,
) {
    let tap = CUBE_POS_X as usize;
    let co = CUBE_POS_Y as usize;
    let c_in = x.shape(1);
    let in_h = x.shape(2) as u32;
    let in_w = x.shape(3) as u32;
    let c_out = grad.shape(1);
    let grad_h = grad.shape(2) as u32;
    let grad_w = grad.shape(3) as u32;
    let plane_size = (grad_h * grad_w) as usize;
    let taps = (conv.size_h * conv.size_w) as usize;
    let weight_taps = c_in * taps;
    let is_bias = tap == weight_taps;
    let ci = tap / taps;
    let kh = ((tap % taps) as u32) / conv.size_w;
    let kw = ((tap % taps) as u32) % conv.size_w;

    let mut partial = F::new(0.0);
    let count = grad.shape(0) * plane_size;
    let mut m = UNIT_POS as usize;
    while m < count {
        let n = m / plane_size;
        let within = m % plane_size;
        let row = (within as u32) / grad_w;
        let col = (within as u32) % grad_w;
        let index = (n * c_out + co) * plane_size + within;
        let (valid, oh, ow) = routed_position(argmax, index, row, col, pool);
        if valid {
            let g = grad[index];
            if is_bias {
                partial += g;
            } else {
                let r = oh * conv.stride_h + kh;
                let c = ow * conv.stride_w + kw;
                if r >= conv.pad_h
                    && r < in_h + conv.pad_h
                    && c >= conv.pad_w
                    && c < in_w + conv.pad_w
                {
                    let x_index = (n * c_in + ci) * (in_h * in_w) as usize
                        + ((r - conv.pad_h) * in_w + c - conv.pad_w) as usize;
                    partial += g * x[x_index];
                }
            }
        }
        m += cube_size as usize;
    }

    let mut shared = SharedMemory::<F>::new(cube_size as usize);
    shared[UNIT_POS as usize] = partial;
    sync_cube();
    let mut half = CUBE_DIM / 2;
    while half > 0 {
        if UNIT_POS < half {
            let other = shared[(UNIT_POS + half) as usize];
            shared[UNIT_POS as usize] += other;
        }
        sync_cube();
        half /= 2;
    }
    if UNIT_POS == 0 {
        if is_bias {
            bias_grad[co] = shared[0];
        } else {
            weight_grad[co * weight_taps + tap] = shared[0];
        }
    }
}
