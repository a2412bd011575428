//! 2-D convolution on CubeCL: [`ConvOperands`] (a layer's input and filters, checked and
//! sized once) and the choice, per layer, between the implicit GEMM ([`gemm`]: forward
//! and stride-1 input gradient of multi-channel layers) and the direct kernels ([`direct`]:
//! any geometry). Weight and bias gradients are in [`weight_grad`]; the fused
//! conv·ReLU·pool (`super::fused`) shares the backward.

mod direct;
pub(crate) mod gemm;
mod weight_grad;

use burn::tensor::bf16;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::{Float, tf32};

use super::layout::{dims4, unit_stride_rows};
use super::pool;
use crate::kernels::geometry::Window;
use crate::{ConvOptions2d, GradsWanted, LayerGrads, Precision};

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
    /// How the multi-channel GEMMs multiply (see [`gemm`]).
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
    /// gradient, or a pooled gradient routed through `argmax` over `pool` windows; with the
    /// forward's `input_copy` of `x`, if it made one.
    pub fn grads<F: FloatElement>(
        &self,
        input_copy: Option<CubeTensor<R>>,
        grad: CubeTensor<R>,
        argmax: Option<CubeTensor<R>>,
        pool: Window,
        wants: GradsWanted,
    ) -> LayerGrads<CubeTensor<R>> {
        let grad = into_contiguous(grad);
        let argmax = argmax.map(into_contiguous);
        match gemm::channels_last_backward::<R, F>(self) {
            Some(Precision::Bf16) => {
                return self.grads_channels_last::<F, bf16, bf16>(
                    input_copy,
                    &grad,
                    argmax.as_ref(),
                    pool,
                    wants,
                );
            }
            Some(Precision::Tf32) => {
                return self.grads_channels_last::<F, F, tf32>(
                    input_copy,
                    &grad,
                    argmax.as_ref(),
                    pool,
                    wants,
                );
            }
            _ => {}
        }
        let x = wants
            .x
            .then(|| self.input_grad::<F>(self.conv_grad::<F>(&grad, argmax.as_ref(), pool)));
        let (weight, bias) = self.weight_grad::<F>(&grad, argmax.as_ref(), pool, wants.bias);
        LayerGrads { x, weight, bias }
    }

    /// [`Self::grads`] in bf16 or TF32 where both channel counts come in whole runs, the
    /// copies in `S` and the products' operands `M`: the conv output's gradient copied
    /// channels-last once (routed through the argmax in the same
    /// pass), for the input gradient's GEMM and the weight gradient's; the input's copy
    /// from the forward where it covers the weight gradient's patches.
    fn grads_channels_last<F: FloatElement, S: FloatElement, M: Float>(
        &self,
        input_copy: Option<CubeTensor<R>>,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
        wants: GradsWanted,
    ) -> LayerGrads<CubeTensor<R>> {
        let input_window = gemm::input_grad_window(self).filter(|_| wants.x);
        let copy = gemm::conv_grad_channels_last::<R, F, S>(self, grad, argmax, pool, input_window);
        let x = match input_window {
            Some(window) => Some(gemm::input_grad_channels_last::<R, F, S, M>(
                self, &copy, window,
            )),
            None => wants
                .x
                .then(|| self.input_grad::<F>(self.conv_grad::<F>(grad, argmax, pool))),
        };
        let partials = gemm::weight_grad_partials_channels_last::<R, F, S, M>(
            self, input_copy, &copy, wants.bias,
        );
        let (weight, bias) = self.weight_grad_of::<F>(partials, wants.bias);
        LayerGrads { x, weight, bias }
    }

    /// The conv output's own gradient: `grad`, or a pooled gradient routed back through
    /// `argmax` over `pool` windows (the max-pool backward).
    pub(crate) fn conv_grad<F: FloatElement>(
        &self,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
    ) -> CubeTensor<R> {
        match argmax {
            Some(argmax) => {
                pool::input_grad::<R, F>(grad, argmax, pool, self.output_shape(self.out_size))
            }
            None => grad.clone(),
        }
    }

    /// Input gradient from the conv output's gradient `conv_grad`: the implicit GEMM where
    /// it applies (stride 1, multi-channel), else the direct gather kernel.
    fn input_grad<F: FloatElement>(&self, conv_grad: CubeTensor<R>) -> CubeTensor<R> {
        match gemm::input_grad_window(self) {
            Some(window) => gemm::input_grad::<R, F>(self, conv_grad, window),
            None => direct::input_grad::<R, F>(self, conv_grad),
        }
    }
}

/// The convolution of `x` with `weight`, plus `bias`, and the copy of `x` the backward
/// reuses, if the forward made one.
pub(crate) fn forward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    options: ConvOptions2d,
) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
    let operands = ConvOperands::new(x, weight, options);
    if gemm::forward_applies(&operands) {
        gemm::forward::<R, F>(operands, bias)
    } else {
        (direct::forward::<R, F>(operands, bias), None)
    }
}

/// The gradients of [`forward`] from its output's gradient `grad` and its `input_copy`.
pub(crate) fn backward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    input_copy: Option<CubeTensor<R>>,
    weight: CubeTensor<R>,
    grad: CubeTensor<R>,
    options: ConvOptions2d,
    wants: GradsWanted,
) -> LayerGrads<CubeTensor<R>> {
    ConvOperands::new(x, weight, options).grads::<F>(input_copy, grad, None, pool::no_pool(), wants)
}
