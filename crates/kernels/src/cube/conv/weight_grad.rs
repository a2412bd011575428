//! The conv weight and bias gradients on CubeCL: partial sums per group of images (the
//! direct kernel of [`crate::kernels::conv::weight_grad`], or the implicit GEMM's of
//! [`super::gemm`]), then their sum.

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::calculate_cube_count_elemwise;
use cubecl::prelude::*;

use super::{ConvOperands, gemm};
use crate::cube::alloc::empty_group;
use crate::cube::launch::launch;
use crate::cube::layout::{dims4, nchw};
use crate::cube::pool::argmax_storage;
use crate::kernels::conv::weight_grad::{conv2d_weight_grad_partial, conv2d_weight_grad_sum};
use crate::kernels::geometry::Window;

/// Largest cube of the partial sums (a power of two); smaller for large filters, so that
/// its shared memory (one row per tap) stays within 32 KB.
const CUBE_SIZE: u32 = 256;
/// Floats of shared memory the partial sums may use.
const SHARED_FLOATS: u32 = 8192;
/// Most adjacent plane positions a cube of the partial sums covers side by side (a warp's
/// worth, so that its loads coalesce); its other units are image lanes.
const POSITION_LANES: usize = 32;
/// Gradient elements each unit of the partial sums visits, about: sets how many images a
/// cube takes. Larger groups of images shrink each unit's share of the cube's final sum in
/// shared memory (`docs/perf-log/2026-11-22-v11-conv-kernels-at-d256.md`).
const ELEMENTS_PER_UNIT: usize = 32;
/// Units a cube of the partials' sum: few, so that a first layer's 1,792 sums of hundreds
/// of splits each, each a chain of loads and adds, spread over 28 SMs rather than 7.
const SUM_CUBE_UNITS: u32 = 64;

impl<R: CubeRuntime> ConvOperands<R> {
    /// Weight (and bias) gradient by the two-stage reduction: partial sums per group of
    /// images (the implicit GEMM's splits where it applies), then their sum. `grad` is
    /// contiguous; with `argmax` it is the pooled gradient, routed through the argmax over
    /// `pool` windows.
    pub(crate) fn weight_grad<F: FloatElement>(
        &self,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
        with_bias: bool,
    ) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
        let buffers = if gemm::weight_grad_applies::<R, F>(self, argmax.is_some(), pool) {
            gemm::weight_grad_partials::<R, F>(self, grad, argmax, with_bias)
        } else {
            self.weight_grad_partials::<F>(grad, argmax, pool, with_bias)
        };
        self.weight_grad_of::<F>(buffers, with_bias)
    }

    /// The weight (and bias) gradient: the sum of the partial sums in `buffers` (from
    /// [`Self::gradient_buffers`], filled), written into its other two tensors.
    pub(crate) fn weight_grad_of<F: FloatElement>(
        &self,
        [partials, weight_grad, bias_grad]: [CubeTensor<R>; 3],
        with_bias: bool,
    ) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
        let [groups, c_out, c_in, terms] = dims4(&partials);
        let dim = CubeDim::new_1d(SUM_CUBE_UNITS);
        let count = calculate_cube_count_elemwise(&self.x.client, c_out * c_in * terms, dim);
        launch!(conv2d_weight_grad_sum::<F, R>(
            &weight_grad,
            count,
            dim,
            partials.into_array_arg(),
            weight_grad.clone().into_array_arg(),
            bias_grad.clone().into_array_arg(),
            groups,
            c_out,
            c_in,
            terms as u32,
            with_bias,
        ));
        (weight_grad, with_bias.then_some(bias_grad))
    }

    /// New tensors for the partial sums (`partials_shape`, in the sum kernel's [groups,
    /// C_out, C_in, terms] layout), the weight gradient and the bias gradient (one unwritten
    /// element without a bias), in one allocation.
    pub(crate) fn gradient_buffers<F: FloatElement>(
        &self,
        partials_shape: [usize; 4],
        with_bias: bool,
    ) -> [CubeTensor<R>; 3] {
        empty_group(
            &self.x,
            [
                (partials_shape.into(), F::dtype()),
                (self.weight_dims.into(), F::dtype()),
                (
                    [if with_bias { self.weight_dims[0] } else { 1 }].into(),
                    F::dtype(),
                ),
            ],
        )
    }

    /// The direct kernel's partial sums: per group of images, per (filter, input channel),
    /// every tap and the bias term.
    fn weight_grad_partials<F: FloatElement>(
        &self,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
        with_bias: bool,
    ) -> [CubeTensor<R>; 3] {
        let [c_out, c_in, kh, kw] = self.weight_dims;
        let [batch, _, grad_h, grad_w] = dims4(grad);
        let terms = kh * kw + 1;
        let fit = SHARED_FLOATS / terms as u32;
        let cube_size = (1 << fit.ilog2()).clamp(32, CUBE_SIZE);
        let plane = grad_h * grad_w;
        let position_lanes = plane.next_power_of_two().min(POSITION_LANES);
        let image_lanes = cube_size as usize / position_lanes;
        let images_per_lane = ELEMENTS_PER_UNIT.div_ceil(plane.div_ceil(position_lanes));
        let per_group = (images_per_lane * image_lanes).min(batch);
        let groups = batch.div_ceil(per_group);
        let buffers = self.gradient_buffers::<F>([groups, c_out, c_in, terms], with_bias);
        let partials = &buffers[0];
        launch!(conv2d_weight_grad_partial::<F, R>(
            partials,
            CubeCount::Static(c_out as u32, groups as u32, c_in as u32),
            CubeDim::new_2d(position_lanes as u32, image_lanes as u32),
            self.x.clone().into_array_arg(),
            grad.clone().into_array_arg(),
            argmax.map(|a| a.clone().into_array_arg()).into(),
            partials.clone().into_array_arg(),
            nchw(&self.x),
            nchw(grad),
            per_group as u32,
            self.window,
            pool,
            cube_size,
            argmax_storage(argmax),
        ));
        buffers
    }
}
