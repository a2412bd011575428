//! 2-D convolution on CubeCL: the forward, and the backward shared with the fused
//! conv·ReLU·pool (input gradient here, weight and bias gradients in
//! [`super::conv_weight_grad`]).

use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::alloc::empty_like;
use super::conv_gemm;
use super::grid::{blocks, elementwise, unit_block};
use super::launch::launch;
use super::layout::{dims4, unit_stride_rows};
use super::pool;
use crate::kernels::conv::{conv2d_forward, conv2d_input_grad, conv2d_input_grad_rows};
use crate::kernels::geometry::Window;
use crate::{ConvOptions2d, GradsWanted, LayerGrads, Precision};

/// Units per cube of the conv input gradient (one input position each, or one run of
/// [`INPUT_GRAD_COLS`] at stride 1), and the most input channels each unit computes from
/// one read of the output gradient.
const INPUT_GRAD_CUBE_SIZE: u32 = 256;
const INPUT_GRAD_CHANNELS: u32 = 8;
/// Adjacent input columns each unit of the stride-1 conv input gradient computes: each
/// weight it loads serves all of them.
const INPUT_GRAD_COLS: u32 = 4;

/// A convolution's input (rows of unit stride) and filters (contiguous), with their sizes.
pub(crate) struct ConvOperands<R: CubeRuntime> {
    pub x: CubeTensor<R>,
    pub weight: CubeTensor<R>,
    pub x_dims: [usize; 4],
    pub weight_dims: [usize; 4],
    /// The filter window with the convolution's stride and padding.
    pub window: Window,
    /// Height and width of the convolution's output.
    pub out_size: [usize; 2],
    /// How the multi-channel GEMMs multiply (see [`conv_gemm`]).
    pub precision: Precision,
}

impl<R: CubeRuntime> ConvOperands<R> {
    pub fn new(x: CubeTensor<R>, weight: CubeTensor<R>, options: ConvOptions2d) -> Self {
        let (x, weight) = (unit_stride_rows(x), into_contiguous(weight));
        let (x_dims, weight_dims) = (dims4(&x), dims4(&weight));
        let kernel = [weight_dims[2], weight_dims[3]];
        Self {
            window: Window::new(kernel, options.stride, options.padding),
            out_size: options.output_size([x_dims[2], x_dims[3]], kernel),
            precision: options.precision,
            x,
            weight,
            x_dims,
            weight_dims,
        }
    }

    /// `[N, C_out, h, w]`: the output shape for a map of `size` per filter.
    pub fn output_shape(&self, size: [usize; 2]) -> [usize; 4] {
        [self.x_dims[0], self.weight_dims[0], size[0], size[1]]
    }

    /// Input (if `wants.x`), weight and bias gradients from `grad`: the conv output's own
    /// gradient, or a pooled gradient routed through `argmax` over `pool` windows.
    pub fn grads<F: FloatElement>(
        &self,
        grad: CubeTensor<R>,
        argmax: Option<CubeTensor<R>>,
        pool: Window,
        wants: GradsWanted,
    ) -> LayerGrads<CubeTensor<R>> {
        let grad = into_contiguous(grad);
        let argmax = argmax.map(into_contiguous);
        let x = wants
            .x
            .then(|| self.input_grad::<F>(&grad, argmax.as_ref(), pool));
        let (weight, bias) = self.weight_grad::<F>(&grad, argmax.as_ref(), pool, wants.bias);
        LayerGrads { x, weight, bias }
    }

    /// Input gradient: a pooled `grad` is first routed through `argmax` back to the conv
    /// output's shape (the max-pool backward), then the implicit GEMM runs where it applies
    /// (stride 1, multi-channel), else the gather kernel over blocks of input channels
    /// (and, at stride 1, of input columns).
    fn input_grad<F: FloatElement>(
        &self,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
    ) -> CubeTensor<R> {
        let conv_grad = match argmax {
            Some(argmax) => {
                pool::input_grad::<R, F>(grad, argmax, pool, self.output_shape(self.out_size))
            }
            None => grad.clone(),
        };
        if let Some(window) = conv_gemm::input_grad_window(self) {
            return conv_gemm::input_grad::<R, F>(self, conv_grad, window);
        }
        let x_grad = empty_like(&self.x, self.x_dims, F::dtype());
        let [batch, c_in, h, w] = self.x_dims;
        let unit_stride = self.window.stride_h == 1 && self.window.stride_w == 1;
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
        let (grad, weight) = (
            conv_grad.into_tensor_arg(),
            self.weight.clone().into_tensor_arg(),
        );
        if unit_stride {
            launch!(conv2d_input_grad_rows::<F, R>(
                &x_grad,
                count,
                dim,
                grad,
                weight,
                x_grad.clone().into_tensor_arg(),
                self.window,
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
                x_grad.clone().into_tensor_arg(),
                self.window,
                channels,
            ));
        }
        x_grad
    }
}

/// The convolution of `x` with `weight`, plus `bias`.
pub(crate) fn forward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    options: ConvOptions2d,
) -> CubeTensor<R> {
    let operands = ConvOperands::new(x, weight, options);
    if conv_gemm::forward_applies(&operands) {
        return conv_gemm::forward::<R, F>(operands, bias);
    }
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
        operands.x.into_tensor_arg(),
        operands.weight.into_tensor_arg(),
        bias.map(|b| into_contiguous(b).into_tensor_arg()).into(),
        output.clone().into_tensor_arg(),
        operands.window,
    ));
    output
}

/// The gradients of [`forward`] from its output's gradient `grad`.
pub(crate) fn backward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    grad: CubeTensor<R>,
    options: ConvOptions2d,
    wants: GradsWanted,
) -> LayerGrads<CubeTensor<R>> {
    ConvOperands::new(x, weight, options).grads::<F>(grad, None, pool::no_pool(), wants)
}
