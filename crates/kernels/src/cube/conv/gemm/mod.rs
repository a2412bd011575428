//! The implicit-GEMM convolution's launches ([`crate::kernels::conv::gemm`] and
//! [`crate::kernels::conv::gemm_weight_grad`]): the forward of a multi-channel convolution,
//! fused with ReLU and a 2×2 stride-2 max-pool or alone, the input gradient of a stride-1
//! one, and the partial sums of the weight and bias gradients. At [`Precision::Tf32`] and
//! [`Precision::Bf16`] all three run on the tensor cores
//! ([`crate::kernels::conv::gemm_tensor_cores`],
//! [`crate::kernels::conv::gemm_weight_grad_tensor_cores`]); where the summed channels
//! come in whole 16-byte runs (eight bf16, four fp32), on channels-last copies of their
//! operands ([`crate::kernels::conv::gemm_channels_last`],
//! [`crate::kernels::conv::gemm_weight_grad_channels_last`],
//! [`crate::kernels::conv::gemm_weight_grad_tf32`]).
//!
//! This file decides where the GEMMs apply and in which precision they multiply, so that
//! one place answers both; the launches are in [`forward`](mod@forward) (forward and input
//! gradient), [`channels_last`] (the channels-last copies and their launches) and [`weight_grad`].

mod channels_last;
mod forward;
mod launch_shape;
mod weight_grad;

use burn::tensor::DType;
use burn_cubecl::CubeRuntime;
use cubecl::ir::features::MmaConfig;
use cubecl::ir::{ElemType, FloatKind};
use cubecl::prelude::*;

pub(crate) use channels_last::conv_grad_channels_last;
pub(crate) use forward::{forward, forward_relu_pool, input_grad, input_grad_channels_last};
pub(crate) use weight_grad::{
    channels_last_backward, weight_grad_applies, weight_grad_partials,
    weight_grad_partials_channels_last,
};

use super::ConvOperands;
use crate::Precision;
use crate::kernels::conv::tensor_tile::{
    BF16_PRODUCT_DEPTH, MMA_COLUMNS, PRODUCT_SIDE, TF32_PRODUCT_DEPTH,
};
use crate::kernels::geometry::Window;

/// Fewest summed channels (input channels in the forward and the weight gradient, output
/// channels in the input gradient) for which the GEMMs run; the direct kernels keep the
/// rest, but for the forward of layers with many taps (below).
const MIN_CHANNELS: usize = 8;
/// Fewest (channel, tap) terms for which the forward of a layer of fewer channels runs as a
/// GEMM: its slices are 8 deep, so a single-channel 3×3 layer (the single-conv CNN's, 9
/// terms in two slices) would leave most of its second slice zero, while first layers of
/// 3 × 3×3 or 1 × 5×5 terms (the CIFAR-shaped network's, LeNet's) fill 27 and 25 of four
/// slices' 32 depths, enough for the GEMM's reuse of each load to beat the direct kernel
/// (`docs/perf-log/2026-11-25-v19-first-layers-on-gemm.md`).
const MIN_FORWARD_DEPTH: usize = 24;
/// SMs assumed on runtimes that do not report their count.
const SMS_UNKNOWN: usize = 64;

/// Whether the forward of `operands` runs as a GEMM.
pub(crate) fn forward_applies<R: CubeRuntime>(operands: &ConvOperands<R>) -> bool {
    let [_, c_in, kh, kw] = operands.weight_dims;
    c_in >= MIN_CHANNELS || c_in * kh * kw >= MIN_FORWARD_DEPTH
}

/// Whether the pool after `operands` is one the fused GEMM pools in its epilogue.
pub(crate) fn pools_in_quads(pool: Window) -> bool {
    pool.is_2x2_tiling()
}

/// The input gradient's window as a forward convolution of the output gradient, if the
/// GEMM computes it: stride 1 and padding at most size − 1 (else the transposed
/// convolution is not a plain one).
pub(crate) fn input_grad_window<R: CubeRuntime>(operands: &ConvOperands<R>) -> Option<Window> {
    let w = operands.window;
    let fits = w.stride_h == 1
        && w.stride_w == 1
        && w.pad_h < w.size_h
        && w.pad_w < w.size_w
        && operands.weight_dims[0] >= MIN_CHANNELS;
    fits.then(|| {
        Window::new(
            [w.size_h as usize, w.size_w as usize],
            [1, 1],
            [
                (w.size_h - 1 - w.pad_h) as usize,
                (w.size_w - 1 - w.pad_w) as usize,
            ],
        )
    })
}

/// The precision the GEMMs of `dtype` tensors multiply in on `client` at `precision`:
/// [`Precision::Tf32`] or [`Precision::Bf16`] where the runtime has matrix units for it and
/// the tensors are f32; else `None` (the fp32 kernel). TF32 takes `wmma`'s 16 × 16 × 8
/// products (the gathering kernels) and `mma`'s 16 × 8 × 8 (the channels-last ones); bf16
/// takes `wmma`'s 16 × 16 × 16 and `mma`'s 16 × 8 × 16: CUDA from compute capability 8.0 on.
pub(crate) fn tensor_core_operands<R: CubeRuntime>(
    precision: Precision,
    dtype: DType,
    client: &ComputeClient<R>,
) -> Option<Precision> {
    let operand = |kind| ElemType::Float(kind).into();
    let units = |kind, n, k| MmaConfig {
        a_type: operand(kind),
        b_type: operand(kind),
        cd_type: operand(FloatKind::F32),
        m: PRODUCT_SIDE,
        n,
        k,
    };
    let matrix = &client.features().matmul;
    let available = match precision {
        Precision::Fp32 => false,
        Precision::Tf32 => {
            matrix
                .cmma
                .contains(&units(FloatKind::TF32, PRODUCT_SIDE, TF32_PRODUCT_DEPTH))
                && matrix
                    .mma
                    .contains(&units(FloatKind::TF32, MMA_COLUMNS, TF32_PRODUCT_DEPTH))
        }
        Precision::Bf16 => {
            matrix
                .cmma
                .contains(&units(FloatKind::BF16, PRODUCT_SIDE, BF16_PRODUCT_DEPTH))
                && matrix
                    .mma
                    .contains(&units(FloatKind::BF16, MMA_COLUMNS, BF16_PRODUCT_DEPTH))
        }
    };
    (dtype == DType::F32 && available).then_some(precision)
}

/// Quads covering a map of `size`: ⌈size / 2⌉ per axis.
fn quads_over(size: [usize; 2]) -> [usize; 2] {
    size.map(|side| side.div_ceil(2))
}
