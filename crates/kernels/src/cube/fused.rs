//! The fused conv·bias·ReLU·max-pool on CubeCL: a forward that writes only the pooled map
//! and its argmax, and a backward made of the convolution's gradients with the argmax
//! routing the pooled gradient. Layers under a 2×2 stride-2 pool whose filters sum enough
//! (channel, tap) terms run as an implicit GEMM ([`super::conv::gemm`]); the rest on the
//! direct kernel here.

use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::alloc::empty_group;
use super::conv::{ConvOperands, gemm};
use super::grid::unit_block;
use super::launch::launch;
use super::layout::nchw;
use super::pool::{self, argmax_dtype};
use crate::kernels::fused::conv_relu_pool_forward;
use crate::{ConvOptions2d, GradsWanted, LayerGrads, PoolOptions2d};

/// Units per cube of the fused forward.
const CUBE_SIZE: u32 = 256;
/// Accumulators per unit of the fused forward (filters × window positions): bounds the
/// registers its filter block takes: more leave an SM room for one cube, fewer give up the
/// reuse of each loaded input; 16 is 4 filters under a 2×2 pool
/// (`docs/perf-log/2026-11-22-v06-dense-kernels-as-memory-streams.md`).
const ACCUMULATORS: usize = 16;
/// Most filters per unit of the fused forward.
const MAX_FILTERS: usize = 16;
/// Most filter blocks one unit of the fused forward computes in turn: enough to spread its
/// position's index arithmetic over many multiply-adds, few enough to leave a grid of
/// many cubes (an SM with one cube more than the others sets the time of a short grid).
const MAX_FILTER_BLOCKS: u32 = 8;

/// max-pool(ReLU(conv(x) + bias)), its argmax and the copy of `x` the backward reuses, if
/// the forward made one.
pub(crate) fn forward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    conv: ConvOptions2d,
    pool: PoolOptions2d,
) -> (CubeTensor<R>, CubeTensor<R>, Option<CubeTensor<R>>) {
    let operands = ConvOperands::new(x, weight, conv);
    let out_shape = operands.output_shape(pool.output_size(operands.out_size));
    let (argmax_dtype, argmax_type) = argmax_dtype(&operands.x.client);
    let [output, argmax] = empty_group(
        &operands.x,
        [
            (out_shape.into(), F::dtype()),
            (out_shape.into(), argmax_dtype),
        ],
    );
    if gemm::forward_applies(&operands) && gemm::pools_in_quads(pool::window(pool)) {
        let input_copy = gemm::forward_relu_pool::<R, F>(operands, bias, &output, &argmax);
        return (output, argmax, input_copy);
    }
    let [batch, c_out, out_h, out_w] = out_shape;
    let windows = pool.kernel[0] * pool.kernel[1];
    let positions = (batch * out_h * out_w).div_ceil(CUBE_SIZE as usize);
    let filters = unit_block(
        &output.client,
        (ACCUMULATORS / windows).clamp(1, MAX_FILTERS) as u32,
        c_out,
        positions * CUBE_SIZE as usize,
    ) as usize;
    let blocks = c_out.div_ceil(filters);
    let filter_blocks = unit_block(
        &output.client,
        MAX_FILTER_BLOCKS.min(blocks as u32),
        blocks,
        positions * CUBE_SIZE as usize,
    ) as usize;
    launch!(conv_relu_pool_forward::<F, R>(
        &output,
        CubeCount::Static(positions as u32, blocks.div_ceil(filter_blocks) as u32, 1),
        CubeDim::new_1d(CUBE_SIZE),
        operands.x.clone().into_array_arg(),
        operands.weight.into_array_arg(),
        bias.map(|b| into_contiguous(b).into_array_arg()).into(),
        output.clone().into_array_arg(),
        argmax.clone().into_array_arg(),
        nchw(&operands.x),
        nchw(&output),
        operands.out_size[0] as u32,
        operands.out_size[1] as u32,
        filter_blocks as u32,
        operands.window,
        pool::window(pool),
        filters as u32,
        argmax_type,
    ));
    (output, argmax, None)
}

/// The gradients of [`forward`] from the pooled gradient `grad`, the argmax and the
/// forward's `input_copy`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn backward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    input_copy: Option<CubeTensor<R>>,
    weight: CubeTensor<R>,
    grad: CubeTensor<R>,
    argmax: CubeTensor<R>,
    conv: ConvOptions2d,
    pool: PoolOptions2d,
    wants: GradsWanted,
) -> LayerGrads<CubeTensor<R>> {
    ConvOperands::new(x, weight, conv).grads::<F>(
        input_copy,
        grad,
        Some(argmax),
        pool::window(pool),
        wants,
    )
}
