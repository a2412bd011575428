//! Launches of the direct convolution kernels (`crate::kernels::conv::direct`): the
//! forward, one unit per output element, and the input gradient, a gather over blocks of
//! input channels (and, at stride 1, of adjacent input columns). They run every layer the
//! implicit GEMM does not take: single-channel inputs, strides other than 1, small layers.

use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::ConvOperands;
use crate::cube::alloc::empty_like;
use crate::cube::grid::{blocks, elementwise, unit_block};
use crate::cube::launch::launch;
use crate::cube::layout::nchw;
use crate::kernels::conv::direct::{conv2d_forward, conv2d_input_grad, conv2d_input_grad_rows};

/// Units per cube of the conv input gradient (one input position each, or one run of
/// [`INPUT_GRAD_COLS`] at stride 1), and the most input channels each unit computes from
/// one read of the output gradient.
const INPUT_GRAD_CUBE_SIZE: u32 = 256;
const INPUT_GRAD_CHANNELS: u32 = 8;
/// Adjacent input columns each unit of the stride-1 conv input gradient computes: each
/// weight it loads serves all of them.
const INPUT_GRAD_COLS: u32 = 4;

/// The convolution of the operands, plus `bias`: one unit per output element.
pub(super) fn forward<R: CubeRuntime, F: FloatElement>(
    operands: ConvOperands<R>,
    bias: Option<CubeTensor<R>>,
) -> CubeTensor<R> {
    let output = empty_like(
        &operands.x,
        operands.output_shape(operands.out_size),
        F::dtype(),
    );
    let (count, dim) = elementwise(&output);
    launch!(conv2d_forward::<F, R>(
        &output,
        count,
        dim,
        operands.x.clone().into_array_arg(),
        operands.weight.into_array_arg(),
        bias.map(|b| into_contiguous(b).into_array_arg()).into(),
        output.clone().into_array_arg(),
        nchw(&operands.x),
        nchw(&output),
        operands.window,
    ));
    output
}

/// The input gradient from the conv output's gradient `conv_grad`.
pub(super) fn input_grad<R: CubeRuntime, F: FloatElement>(
    operands: &ConvOperands<R>,
    conv_grad: CubeTensor<R>,
) -> CubeTensor<R> {
    let x_grad = empty_like(&operands.x, operands.x_dims, F::dtype());
    let [batch, c_in, h, w] = operands.x_dims;
    let unit_stride = operands.window.stride_h == 1 && operands.window.stride_w == 1;
    let cols = if unit_stride { INPUT_GRAD_COLS } else { 1 };
    let positions = batch * h * w.div_ceil(cols as usize);
    let channels = unit_block(
        &x_grad.client,
        (c_in as u32).min(INPUT_GRAD_CHANNELS),
        c_in,
        positions.next_multiple_of(INPUT_GRAD_CUBE_SIZE as usize),
    );
    let count = blocks([positions, c_in], [INPUT_GRAD_CUBE_SIZE, channels]);
    let dim = CubeDim::new_1d(INPUT_GRAD_CUBE_SIZE);
    let (grad_map, x_grad_map) = (nchw(&conv_grad), nchw(&x_grad));
    let (grad, weight) = (
        conv_grad.into_array_arg(),
        operands.weight.clone().into_array_arg(),
    );
    if unit_stride {
        launch!(conv2d_input_grad_rows::<F, R>(
            &x_grad,
            count,
            dim,
            grad,
            weight,
            x_grad.clone().into_array_arg(),
            grad_map,
            x_grad_map,
            operands.window,
            channels,
            cols,
        ));
    } else {
        launch!(conv2d_input_grad::<F, R>(
            &x_grad,
            count,
            dim,
            grad,
            weight,
            x_grad.clone().into_array_arg(),
            grad_map,
            x_grad_map,
            operands.window,
            channels,
        ));
    }
    x_grad
}
