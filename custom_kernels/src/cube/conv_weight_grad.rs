//! The conv weight and bias gradients on CubeCL: partial sums per group of images, then
//! their sum ([`crate::kernels::conv_weight_grad`]).

use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::alloc::empty_group;
use super::conv::ConvOperands;
use super::grid::elementwise_over;
use super::launch::launch;
use super::layout::dims4;
use super::pool::argmax_storage;
use crate::kernels::conv_weight_grad::{conv2d_weight_grad_partial, conv2d_weight_grad_sum};
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
/// cube takes. At d = 256, batch 1000 on an H200 (Nsight Compute, same launches) 4, 8, 16
/// and 32 took 286, 194, 174 and 151 µs (larger groups, likely because each unit's share of
/// the final sum in shared memory shrinks).
const ELEMENTS_PER_UNIT: usize = 32;

impl<R: CubeRuntime> ConvOperands<R> {
    /// Weight (and bias) gradient by the two-stage reduction: partial sums per group of
    /// images, then their sum. `grad` is contiguous; with `argmax` it is the pooled
    /// gradient, routed through the argmax over `pool` windows.
    pub(crate) fn weight_grad<F: FloatElement>(
        &self,
        grad: &CubeTensor<R>,
        argmax: Option<&CubeTensor<R>>,
        pool: Window,
        with_bias: bool,
    ) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
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
        // Without a bias its one-element buffer is not written.
        let [partials, weight_grad, bias_grad] = empty_group(
            &self.x,
            [
                ([groups, c_out, c_in, terms].into(), F::dtype()),
                (self.weight_dims.into(), F::dtype()),
                ([if with_bias { c_out } else { 1 }].into(), F::dtype()),
            ],
        );
        launch!(conv2d_weight_grad_partial::<F, R>(
            &partials,
            CubeCount::Static(c_out as u32, groups as u32, c_in as u32),
            CubeDim::new_2d(position_lanes as u32, image_lanes as u32),
            self.x.clone().into_tensor_arg(),
            grad.clone().into_tensor_arg(),
            argmax.map(|a| a.clone().into_tensor_arg()).into(),
            partials.clone().into_tensor_arg(),
            per_group as u32,
            self.window,
            pool,
            cube_size,
            argmax_storage(argmax),
        ));
        let (count, dim) = elementwise_over(&self.x.client, c_out * c_in * terms);
        launch!(conv2d_weight_grad_sum::<F, R>(
            &weight_grad,
            count,
            dim,
            partials.into_tensor_arg(),
            weight_grad.clone().into_tensor_arg(),
            bias_grad.clone().into_tensor_arg(),
            terms as u32,
            with_bias,
        ));
        (weight_grad, with_bias.then_some(bias_grad))
    }
}
