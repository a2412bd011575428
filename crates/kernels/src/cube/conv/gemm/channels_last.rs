//! The tensor-core GEMMs' channels-last operands (the input or the conv output's gradient
//! copied and padded, the filters reordered; bf16, or fp32 for TF32 products) and the
//! channels-last forward-shaped launch that reads them, apart from the gathering kernels'
//! launches because only layers whose channels come in whole runs take this path.
//!
//! The launches are generic over `S`, the type the copies store (bf16, or `F` itself for
//! TF32), and `M`, the products' operand type (bf16 or TF32): [`super::forward`] and the
//! backward pick them once from the precision.

use burn::tensor::DType;
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::launch_shape::{GemmLaunch, tensor_tile};
use super::{ConvOperands, SMS_UNKNOWN, pools_in_quads, quads_over};
use crate::cube::alloc::empty_like;
use crate::cube::grid::{elementwise_over, sm_count};
use crate::cube::launch::launch;
use crate::cube::layout::{dims4, nchw};
use crate::cube::pool::argmax_storage;
use crate::kernels::conv::channels_last::{
    ChannelsLastLaunch, RUN_BYTES, filters_channels_last, padded_channels_last,
    routed_channels_last,
};
use crate::kernels::conv::gemm::CUBE_UNITS;
use crate::kernels::conv::gemm_channels_last::conv_gemm_channels_last;
use crate::kernels::conv::staged_runs::SLICE_RUNS;
use crate::kernels::conv::tensor_tile::{BF16_PRODUCT_DEPTH, TF32_PRODUCT_DEPTH, TensorTile};
use crate::kernels::geometry::Window;

/// Values in one run of a channels-last map of `dtype` (16 bytes): eight bf16, four fp32.
pub(super) fn run_of(dtype: DType) -> usize {
    RUN_BYTES / dtype.size()
}

/// Fewest cubes an SM of the tall channels-last tiles' grid (see [`channels_last_tile`]).
const TALL_CUBES_PER_SM: usize = 3;

/// The tile of the channels-last GEMM of `rows` rows and `cols` columns on `client`:
/// [`TensorTile::TALL`] (warps of 64 × 32) for more than 32 columns where its grid still
/// holds [`TALL_CUBES_PER_SM`] cubes an SM, else [`tensor_tile`]'s. Warps of 32 × 32 leave
/// the GEMMs bound by the L1 pipe, their matrix loads taking 256 bytes a product against
/// the tall warps' 192; but a tall cube's registers leave room for one cube an SM, so a grid
/// of fewer tall cubes than that leaves SMs idle
/// (`docs/perf-log/2026-11-29-bf16-products-issue-and-l1.md`).
fn channels_last_tile<R: CubeRuntime>(
    rows: usize,
    cols: usize,
    client: &ComputeClient<R>,
) -> TensorTile {
    let tall = TensorTile::TALL;
    let sms = sm_count(client).unwrap_or(SMS_UNKNOWN);
    let tall_cubes = rows.div_ceil(tall.rows() as usize) * cols.div_ceil(tall.columns() as usize);
    if cols > TensorTile::NARROW.columns() as usize && tall_cubes >= TALL_CUBES_PER_SM * sms {
        tall
    } else {
        tensor_tile(cols)
    }
}

/// The rows and columns a channels-last copy of a GEMM's map needs so that every patch
/// of its grid of `quads` over `window` lies inside: the padding is in the copy.
pub(super) fn channels_last_size(quads: [usize; 2], window: Window) -> [usize; 2] {
    let covered = |quads: usize, stride: u32, size: u32| {
        (2 * quads).saturating_sub(1) * stride as usize + size as usize
    };
    [
        covered(quads[0], window.stride_h, window.size_h),
        covered(quads[1], window.stride_w, window.size_w),
    ]
}

/// [`conv_gemm_channels_last`] of `gemm` over [`channels_last_tile`]s, on `copy` (the map
/// channels-last in `S`, from [`channels_last_copy`] with the sizes of
/// [`channels_last_size`]), after copying the filters into the layout it reads
/// ([`filters_channels_last`]): their columns to whole tiles and their depth to whole
/// slices. Its products take `M` operands.
pub(super) fn launch_channels_last<R: CubeRuntime, F: FloatElement, S: FloatElement, M: Float>(
    copy: &CubeTensor<R>,
    gemm: GemmLaunch<'_, R>,
) {
    let window = &gemm.window;
    let [batch, _, _, channels] = dims4(copy);
    let [_, cols, _, _] = dims4(gemm.output);
    let quads = batch * gemm.quads[0] * gemm.quads[1];
    let tile = channels_last_tile(4 * quads, cols, &copy.client);
    let run = run_of(S::dtype());
    let product_depth = match S::dtype() {
        DType::BF16 => BF16_PRODUCT_DEPTH,
        _ => TF32_PRODUCT_DEPTH,
    };
    let depth = channels * (window.size_h * window.size_w) as usize;
    let depth_runs = depth.div_ceil(run).next_multiple_of(SLICE_RUNS as usize);
    let columns = cols.next_multiple_of(tile.columns() as usize);
    let filters = empty_like(copy, [columns, depth_runs * run], S::dtype());
    let (count, dim) = elementwise_over(&copy.client, columns * depth_runs);
    launch!(filters_channels_last::<F, S, R>(
        &filters,
        count,
        dim,
        run,
        gemm.weight.into_array_arg(),
        filters.clone().into_array_arg(),
        cols,
        channels,
        depth_runs,
        columns,
        *window,
        gemm.transposed,
    ));
    let count = CubeCount::Static(
        quads.div_ceil(tile.quads() as usize) as u32,
        cols.div_ceil(tile.columns() as usize) as u32,
        1,
    );
    launch!(conv_gemm_channels_last::<F, S, M, R>(
        gemm.output,
        count,
        CubeDim::new_1d(CUBE_UNITS),
        run,
        copy.clone().into_array_arg(),
        filters.into_array_arg(),
        gemm.bias
            .map(|b| into_contiguous(b).into_array_arg())
            .into(),
        gemm.output.clone().into_array_arg(),
        gemm.argmax.map(|a| a.clone().into_array_arg()).into(),
        channels_last_map(copy),
        nchw(gemm.output),
        gemm.quads[0] as u32,
        gemm.quads[1] as u32,
        depth_runs as u32,
        *window,
        tile,
        product_depth,
        argmax_storage(gemm.argmax),
    ));
}

/// `src` (a 4-D NCHW map) copied by [`padded_channels_last`] into a new map of `S`
/// [N, rows, columns, channels] of `size` = [rows, columns], shifted by `pad`: zeros where
/// `src` has no value.
pub(super) fn channels_last_copy<R: CubeRuntime, F: FloatElement, S: FloatElement>(
    src: &CubeTensor<R>,
    size: [usize; 2],
    pad: [u32; 2],
) -> CubeTensor<R> {
    let [batch, channels, _, _] = dims4(src);
    let copy = empty_like(src, [batch, size[0], size[1], channels], S::dtype());
    let run = run_of(S::dtype());
    let runs = batch * size[0] * size[1] * channels / run;
    let (count, dim) = elementwise_over(&src.client, runs);
    launch!(padded_channels_last::<F, S, R>(
        &copy,
        count,
        dim,
        run,
        src.clone().into_array_arg(),
        copy.clone().into_array_arg(),
        nchw(src),
        channels_last_map(&copy),
        pad[0],
        pad[1],
    ));
    copy
}

/// The sizes of a channels-last map from [`channels_last_copy`].
pub(super) fn channels_last_map<R: CubeRuntime>(map: &CubeTensor<R>) -> ChannelsLastLaunch<R> {
    let [batch, rows, cols, channels] = dims4(map);
    ChannelsLastLaunch::new(
        batch,
        rows as u32,
        cols as u32,
        (channels / run_of(map.dtype)) as u32,
    )
}

/// The conv output's gradient channels-last, as the channels-last input and weight gradients
/// read it ([`conv_gemm_channels_last`],
/// [`crate::kernels::conv::gemm_weight_grad_channels_last`]): `map`, with each conv
/// position shifted by `padding`.
pub(crate) struct ChannelsLastGrad<R: CubeRuntime> {
    pub map: CubeTensor<R>,
    pub padding: [u32; 2],
}

/// [`ChannelsLastGrad`] in `S` from the conv output's gradient `grad` (contiguous), or a 2×2
/// stride-2 pool's gradient routed through `argmax` in the same pass
/// ([`routed_channels_last`]; other pools' first routed back as they are): padded for the
/// input gradient's GEMM over `input_window` where there is one, else not.
pub(crate) fn conv_grad_channels_last<R: CubeRuntime, F: FloatElement, S: FloatElement>(
    operands: &ConvOperands<R>,
    grad: &CubeTensor<R>,
    argmax: Option<&CubeTensor<R>>,
    pool: Window,
    input_window: Option<Window>,
) -> ChannelsLastGrad<R> {
    let (size, padding) = match input_window {
        Some(window) => {
            let [_, _, h, w] = operands.x_dims;
            let size = channels_last_size(quads_over([h, w]), window);
            (size, [window.pad_h, window.pad_w])
        }
        None => (operands.out_size, [0, 0]),
    };
    let map = match argmax {
        Some(argmax) if pools_in_quads(pool) => {
            let [batch, c_out, _, _] = dims4(grad);
            let map = empty_like(grad, [batch, size[0], size[1], c_out], S::dtype());
            let run = run_of(S::dtype());
            let runs = batch * size[0] * size[1] * c_out / run;
            let (count, dim) = elementwise_over(&grad.client, runs);
            launch!(routed_channels_last::<F, S, R>(
                &map,
                count,
                dim,
                run,
                grad.clone().into_array_arg(),
                argmax.clone().into_array_arg(),
                map.clone().into_array_arg(),
                nchw(grad),
                channels_last_map(&map),
                padding[0],
                padding[1],
                argmax_storage(Some(argmax)),
            ));
            map
        }
        _ => {
            let conv_grad = operands.conv_grad::<F>(grad, argmax, pool);
            channels_last_copy::<R, F, S>(&conv_grad, size, padding)
        }
    };
    ChannelsLastGrad { map, padding }
}

/// The input channels-last and padded to cover every patch of the weight gradient, over
/// `covered` = [rows, columns]: the forward's `copy` where it covers them (the forward's
/// grid of quads may stop a row or column short of an odd-sized output under a pool),
/// else a new copy.
pub(super) fn backward_input_copy<R: CubeRuntime, F: FloatElement, S: FloatElement>(
    operands: &ConvOperands<R>,
    copy: Option<CubeTensor<R>>,
    covered: [usize; 2],
) -> CubeTensor<R> {
    let covers = |copy: &CubeTensor<R>| {
        let [_, rows, cols, _] = dims4(copy);
        rows >= covered[0] && cols >= covered[1]
    };
    match copy {
        Some(copy) if covers(&copy) => copy,
        _ => {
            let w = operands.window;
            channels_last_copy::<R, F, S>(&operands.x, covered, [w.pad_h, w.pad_w])
        }
    }
}
