//! The forward-shaped GEMM's launches (the convolution alone or fused with ReLU and a 2×2
//! pool, and the stride-1 input gradient, which is a forward convolution of the output
//! gradient), with the choice of tile and kernel (fp32, TF32 or bf16) each launch makes.

use burn::tensor::{DType, bf16};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::channels_last::{
    ChannelsLastGrad, channels_last_copy, channels_last_size, launch_channels_last, run_of,
};
use super::launch_shape::{GemmLaunch, tensor_tile};
use super::weight_grad::channels_last_backward;
use super::{ConvOperands, quads_over, tensor_core_operands};
use crate::Precision;
use crate::cube::alloc::empty_like;
use crate::cube::grid::sm_count;
use crate::cube::launch::launch;
use crate::cube::layout::{dims4, nchw};
use crate::cube::pool::argmax_storage;
use crate::kernels::conv::gemm::{CUBE_UNITS, Tile, conv_gemm};
use crate::kernels::conv::gemm_tensor_cores::conv_gemm_tensor_cores;
use crate::kernels::conv::tensor_tile::{BF16_PRODUCT_DEPTH, TF32_PRODUCT_DEPTH};
use crate::kernels::geometry::Window;

/// Cubes of [`Tile::WIDE_SHORT`] an SM runs at once: its registers leave room for three
/// cubes of 256 units, where [`Tile::WIDE`]'s leave room for two.
const SHORT_CUBES_PER_SM: usize = 3;

/// The tile of a GEMM of `quads` quads (of four rows) and `cols` columns on a GPU of `sms`
/// SMs: narrow up to 32 columns; else [`Tile::WIDE`], unless [`Tile::WIDE_SHORT`]'s grid
/// runs in one wave of [`SHORT_CUBES_PER_SM`] cubes an SM. Such a GEMM is too short for the
/// wide tile: its fewer, longer cubes leave SMs with one cube or none; past one short wave
/// the wide tile's greater reuse of each load wins
/// (`docs/perf-log/2026-11-25-v15-8x8-wide-tile.md`). Runtimes that do not report SMs get
/// the wide tile.
fn tile_for(quads: usize, cols: usize, sms: Option<usize>) -> Tile {
    if cols <= Tile::NARROW.columns() as usize {
        return Tile::NARROW;
    }
    let short = Tile::WIDE_SHORT;
    let cubes = quads.div_ceil(short.quads() as usize) * cols.div_ceil(short.columns() as usize);
    match sms {
        Some(sms) if cubes <= SHORT_CUBES_PER_SM * sms => short,
        _ => Tile::WIDE,
    }
}

/// Launches `gemm` as [`conv_gemm`], or at [`Precision::Tf32`] or [`Precision::Bf16`] where
/// the runtime has matrix units for it as [`conv_gemm_tensor_cores`] — as
/// [`super::channels_last`]'s GEMM where `src`'s channels come in whole runs, returning the
/// channels-last copy of `src` it made for it.
fn launch_gemm<R: CubeRuntime, F: FloatElement>(
    src: CubeTensor<R>,
    gemm: GemmLaunch<'_, R>,
    precision: Precision,
) -> Option<CubeTensor<R>> {
    let [batch, cols, _, _] = dims4(gemm.output);
    let operands = tensor_core_operands(precision, F::dtype(), &src.client);
    let channels = dims4(&src)[1];
    match operands {
        Some(Precision::Bf16) if channels.is_multiple_of(run_of(DType::BF16)) => {
            return Some(channels_last_gemm::<R, F, bf16, bf16>(&src, gemm));
        }
        Some(Precision::Tf32) if channels.is_multiple_of(run_of(F::dtype())) => {
            return Some(channels_last_gemm::<R, F, F, tf32>(&src, gemm));
        }
        _ => {}
    }
    let GemmLaunch {
        weight,
        bias,
        output,
        argmax,
        quads,
        window,
        transposed,
    } = gemm;
    let grid_quads = batch * quads[0] * quads[1];
    let (src_map, output_map) = (nchw(&src), nchw(output));
    // The kernels take the same arguments, each with its own tile type; the tensor-core
    // kernel also its operand types and the depth of a product.
    macro_rules! launch_tiled {
        ($kernel:ident::<$($generic:ty),+>, $tile:expr $(, $extra:expr)*) => {{
            let tile = $tile;
            let count = CubeCount::Static(
                grid_quads.div_ceil(tile.quads() as usize) as u32,
                cols.div_ceil(tile.columns() as usize) as u32,
                1,
            );
            launch!($kernel::<$($generic),+>(
                output,
                count,
                CubeDim::new_1d(CUBE_UNITS),
                src.into_array_arg(),
                weight.into_array_arg(),
                bias.map(|b| into_contiguous(b).into_array_arg()).into(),
                output.clone().into_array_arg(),
                argmax.map(|a| a.clone().into_array_arg()).into(),
                src_map,
                output_map,
                quads[0] as u32,
                quads[1] as u32,
                window,
                transposed,
                tile,
                $($extra,)*
                argmax_storage(argmax),
            ));
        }};
    }
    match operands {
        Some(Precision::Tf32) => launch_tiled!(
            conv_gemm_tensor_cores::<F, F, tf32, R>,
            tensor_tile(cols),
            TF32_PRODUCT_DEPTH
        ),
        Some(Precision::Bf16) => launch_tiled!(
            conv_gemm_tensor_cores::<F, bf16, bf16, R>,
            tensor_tile(cols),
            BF16_PRODUCT_DEPTH
        ),
        _ => launch_tiled!(
            conv_gemm::<F, R>,
            tile_for(grid_quads, cols, sm_count(&src.client))
        ),
    }
    None
}

/// `gemm` as [`launch_channels_last`] on a channels-last copy of `src` in `S`, with `M`
/// products; returns the copy.
fn channels_last_gemm<R: CubeRuntime, F: FloatElement, S: FloatElement, M: Float>(
    src: &CubeTensor<R>,
    gemm: GemmLaunch<'_, R>,
) -> CubeTensor<R> {
    let size = channels_last_size(gemm.quads, gemm.window);
    let padding = [gemm.window.pad_h, gemm.window.pad_w];
    let copy = channels_last_copy::<R, F, S>(src, size, padding);
    launch_channels_last::<R, F, S, M>(&copy, gemm);
    copy
}

/// max-pool₂ₓ₂(ReLU(conv(x) + bias)) into `output` and `argmax` (the pooled map's shape),
/// returning the input's copy where the weight gradient reads it too (see
/// [`super::channels_last::backward_input_copy`]).
pub(crate) fn forward_relu_pool<R: CubeRuntime, F: FloatElement>(
    operands: ConvOperands<R>,
    bias: Option<CubeTensor<R>>,
    output: &CubeTensor<R>,
    argmax: &CubeTensor<R>,
) -> Option<CubeTensor<R>> {
    let [_, _, pooled_h, pooled_w] = dims4(output);
    let precision = operands.precision;
    let keep_copy = channels_last_backward::<R, F>(&operands).is_some();
    let gemm = GemmLaunch {
        weight: operands.weight,
        bias,
        output,
        argmax: Some(argmax),
        quads: [pooled_h, pooled_w],
        window: operands.window,
        transposed: false,
    };
    launch_gemm::<R, F>(operands.x, gemm, precision).filter(|_| keep_copy)
}

/// conv(x) + bias at every output position, and the input's copy where the weight
/// gradient reads it too (see [`super::channels_last::backward_input_copy`]).
pub(crate) fn forward<R: CubeRuntime, F: FloatElement>(
    operands: ConvOperands<R>,
    bias: Option<CubeTensor<R>>,
) -> (CubeTensor<R>, Option<CubeTensor<R>>) {
    let output = empty_like(
        &operands.x,
        operands.output_shape(operands.out_size),
        F::dtype(),
    );
    let quads = quads_over(operands.out_size);
    let precision = operands.precision;
    let keep_copy = channels_last_backward::<R, F>(&operands).is_some();
    let gemm = GemmLaunch {
        weight: operands.weight,
        bias,
        output: &output,
        argmax: None,
        quads,
        window: operands.window,
        transposed: false,
    };
    let copy = launch_gemm::<R, F>(operands.x, gemm, precision).filter(|_| keep_copy);
    (output, copy)
}

/// The input gradient's GEMM launch (see [`super::input_grad_window`]) into `x_grad`.
fn input_grad_launch<'a, R: CubeRuntime>(
    operands: &ConvOperands<R>,
    x_grad: &'a CubeTensor<R>,
    window: Window,
) -> GemmLaunch<'a, R> {
    let [_, _, h, w] = operands.x_dims;
    GemmLaunch {
        weight: operands.weight.clone(),
        bias: None,
        output: x_grad,
        argmax: None,
        quads: quads_over([h, w]),
        window,
        transposed: true,
    }
}

/// dx from the conv output's gradient `conv_grad` (contiguous), as the convolution of
/// `conv_grad` with the transposed, flipped filters over `window` (from
/// [`super::input_grad_window`]).
pub(crate) fn input_grad<R: CubeRuntime, F: FloatElement>(
    operands: &ConvOperands<R>,
    conv_grad: CubeTensor<R>,
    window: Window,
) -> CubeTensor<R> {
    let x_grad = empty_like(&operands.x, operands.x_dims, F::dtype());
    let gemm = input_grad_launch(operands, &x_grad, window);
    launch_gemm::<R, F>(conv_grad, gemm, operands.precision);
    x_grad
}

/// dx as [`input_grad`], from the conv output's gradient copied channels-last in `S` by
/// [`super::conv_grad_channels_last`] for the input gradient's `window`, with `M` products.
pub(crate) fn input_grad_channels_last<
    R: CubeRuntime,
    F: FloatElement,
    S: FloatElement,
    M: Float,
>(
    operands: &ConvOperands<R>,
    conv_grad: &ChannelsLastGrad<R>,
    window: Window,
) -> CubeTensor<R> {
    let x_grad = empty_like(&operands.x, operands.x_dims, F::dtype());
    let gemm = input_grad_launch(operands, &x_grad, window);
    launch_channels_last::<R, F, S, M>(&conv_grad.map, gemm);
    x_grad
}

#[cfg(test)]
mod tests {
    use super::{Tile, tile_for};

    #[test]
    fn short_tile_only_where_it_runs_in_one_wave() {
        // An H100's 132 SMs hold 396 short cubes. LeNet's conv2 at batch 100 and 500 (2,500
        // and 12,500 pool windows, 64 filters: 79 and 391 short cubes) runs short; at 1000
        // (25,000, 782 short cubes) wide, as do CIFAR's second layer at batch 512 (32,768
        // quads, 128 filters) and its third layer's input gradient (8,192 quads, 128
        // columns: 512 short cubes).
        assert_eq!(tile_for(2_500, 64, Some(132)), Tile::WIDE_SHORT);
        assert_eq!(tile_for(12_500, 64, Some(132)), Tile::WIDE_SHORT);
        assert_eq!(tile_for(25_000, 64, Some(132)), Tile::WIDE);
        assert_eq!(tile_for(32_768, 128, Some(132)), Tile::WIDE);
        assert_eq!(tile_for(8_192, 128, Some(132)), Tile::WIDE);
        // At most 32 columns: narrow, whatever the grid; no SM count: wide.
        assert_eq!(tile_for(4_900, 32, Some(132)), Tile::NARROW);
        assert_eq!(tile_for(4_900, 64, None), Tile::WIDE);
    }
}
