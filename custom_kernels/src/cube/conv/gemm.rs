//! Launches of the implicit-GEMM convolution ([`crate::kernels::conv::gemm`] and
//! [`crate::kernels::conv::gemm_weight_grad`]): the forward of a multi-channel convolution,
//! fused with ReLU and a 2×2 stride-2 max-pool or alone, the input gradient of a stride-1
//! one, and the partial sums of the weight and bias gradients. At [`Precision::Tf32`] and
//! [`Precision::Bf16`] all three run on the tensor cores
//! ([`crate::kernels::conv::gemm_tensor_cores`],
//! [`crate::kernels::conv::gemm_weight_grad_tensor_cores`]); in bf16, where the summed
//! channels come in runs of eight, on channels-last copies of their operands
//! ([`crate::kernels::conv::gemm_channels_last`],
//! [`crate::kernels::conv::gemm_weight_grad_channels_last`]).

use burn::tensor::{DType, bf16};
use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::ir::features::MmaConfig;
use cubecl::ir::{ElemType, FloatKind};
use cubecl::prelude::*;

use super::ConvOperands;
use crate::Precision;
use crate::cube::alloc::empty_like;
use crate::cube::grid::{elementwise_over, sm_count};
use crate::cube::launch::launch;
use crate::cube::layout::{dims4, nchw};
use crate::cube::pool::argmax_storage;
use crate::kernels::conv::channels_last::{
    ChannelsLastLaunch, filters_channels_last, padded_channels_last, routed_channels_last,
};
use crate::kernels::conv::gemm::{CUBE_UNITS, Tile, conv_gemm};
use crate::kernels::conv::gemm_channels_last::{RUN, conv_gemm_channels_last};
use crate::kernels::conv::gemm_tensor_cores::{
    BF16_PRODUCT_DEPTH, MMA_COLUMNS, PRODUCT_SIDE, SLICE_DEPTH, TF32_PRODUCT_DEPTH, TensorTile,
    conv_gemm_tensor_cores,
};
use crate::kernels::conv::gemm_weight_grad::{SLICE_QUADS, TILE_SIDE, conv_gemm_weight_grad};
use crate::kernels::conv::gemm_weight_grad_channels_last::{
    PositionGridLaunch, conv_gemm_weight_grad_channels_last,
};
use crate::kernels::conv::gemm_weight_grad_tensor_cores::{
    SLICE_POSITIONS, conv_gemm_weight_grad_tensor_cores,
};
use crate::kernels::geometry::Window;

/// Fewest summed channels (input channels in the forward and the weight gradient, output
/// channels in the input gradient) for which the GEMMs run; the direct kernels keep the
/// rest, but for the forward of layers with many taps (below).
const MIN_CHANNELS: usize = 8;
/// Fewest (channel, tap) terms for which the forward of a layer of fewer channels runs as a
/// GEMM: its slices are 8 deep, so a single-channel 3×3 layer (the single-conv CNN's, 9 terms in
/// two slices) would leave most of its second slice zero, while first layers of 3 × 3×3 or
/// 1 × 5×5 terms (the CIFAR-shaped network's, LeNet's) fill 84% and 78% of four: there the
/// GEMM took 0.090 and 0.074 ms against the direct kernel's 0.14 and 0.10 (H100, batch 512
/// and 1000).
const MIN_FORWARD_DEPTH: usize = 24;

/// Fewest quads one split of the weight gradient walks (8 slices): fewer would spend more
/// on writing and summing partials than on the products.
const MIN_SPLIT_QUADS: usize = 64;
/// Cubes of [`Tile::WIDE_SHORT`] an SM runs at once (Nsight Compute, H100: 79 registers a
/// unit, three cubes of 256 units; [`Tile::WIDE`] has 127, two).
const SHORT_CUBES_PER_SM: usize = 3;
/// Cubes of the weight gradient an SM runs at once, depending on the instance's registers
/// (Nsight Compute, H100: 80 a unit for 3×3 filters, three cubes of 256 units; 102 for
/// LeNet's 5×5, two): the split count fills whole waves of either.
const WEIGHT_GRAD_CUBES_PER_SM: [usize; 2] = [2, 3];
/// Fewest cubes an SM of the tall channels-last tiles' grid (see [`channels_last_tile`]).
const TALL_CUBES_PER_SM: usize = 3;
/// SMs assumed on runtimes that do not report their count.
const SMS_UNKNOWN: usize = 64;
/// A split count within this many percent of the best one's time counts as equal.
const SPLITS_TOLERANCE_PERCENT: usize = 2;

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

/// One launch of the implicit GEMM: a map convolved over `window` with `weight` (read
/// transposed and flipped for an input gradient, if `transposed`), plus `bias`, into
/// `output` (a 4-D map), over a grid of `quads` = [quads_h, quads_w] per image; with
/// `argmax`, `output` is the pooled map and the quads are its pool windows.
struct GemmLaunch<'a, R: CubeRuntime> {
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    output: &'a CubeTensor<R>,
    argmax: Option<&'a CubeTensor<R>>,
    quads: [usize; 2],
    window: Window,
    transposed: bool,
}

/// The tensor-core tile for a GEMM of `cols` columns.
fn tensor_tile(cols: usize) -> TensorTile {
    if cols <= TensorTile::NARROW.columns() as usize {
        TensorTile::NARROW
    } else {
        TensorTile::WIDE
    }
}

/// The tile of the channels-last GEMM of `rows` rows and `cols` columns on `client`:
/// [`TensorTile::TALL`] (warps of 64 × 32) for more than 32 columns where its grid still
/// holds [`TALL_CUBES_PER_SM`] cubes an SM, else [`tensor_tile`]'s. The GEMMs were bound by
/// the L1 pipe (85%, Nsight Compute, H200) with warps of 32 × 32, whose matrix loads take
/// 256 bytes a product against 192; the tall tile took the CIFAR-shaped forward and
/// input-gradient products at b512 from 457 to 402 µs a step, but LeNet's forward at b512
/// (196 tall cubes, 162 registers, one cube an SM) from 82 to 101, and its b1000 step (383
/// tall cubes) lost about 5%.
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

/// Launches `gemm` as [`conv_gemm`], or at [`Precision::Tf32`] or [`Precision::Bf16`] where
/// the runtime has matrix units for it as [`conv_gemm_tensor_cores`] — in bf16 as
/// [`conv_gemm_channels_last`] where `src`'s channels come in runs of [`RUN`], returning
/// the channels-last copy of `src` it made for it.
fn launch_gemm<R: CubeRuntime, F: FloatElement>(
    src: CubeTensor<R>,
    gemm: GemmLaunch<'_, R>,
    precision: Precision,
) -> Option<CubeTensor<R>> {
    let [batch, cols, _, _] = dims4(gemm.output);
    let operands = tensor_core_operands(precision, F::dtype(), &src.client);
    if operands == Some(Precision::Bf16) && dims4(&src)[1].is_multiple_of(RUN as usize) {
        let size = channels_last_size(gemm.quads, gemm.window);
        let padding = [gemm.window.pad_h, gemm.window.pad_w];
        let copy = channels_last_copy::<R, F>(&src, size, padding);
        launch_channels_last::<R, F>(&copy, gemm);
        return Some(copy);
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

/// The rows and columns a channels-last copy of a GEMM's map needs so that every patch
/// of its grid of `quads` over `window` lies inside: the padding is in the copy.
fn channels_last_size(quads: [usize; 2], window: Window) -> [usize; 2] {
    let covered = |quads: usize, stride: u32, size: u32| {
        (2 * quads).saturating_sub(1) * stride as usize + size as usize
    };
    [
        covered(quads[0], window.stride_h, window.size_h),
        covered(quads[1], window.stride_w, window.size_w),
    ]
}

/// [`conv_gemm_channels_last`] of `gemm` over [`channels_last_tile`]s, on `copy` (the map
/// channels-last, from [`channels_last_copy`] with the sizes of [`channels_last_size`]),
/// after copying the filters into the layout it reads ([`filters_channels_last`]): their
/// columns to whole tiles and their depth to whole slices.
fn launch_channels_last<R: CubeRuntime, F: FloatElement>(
    copy: &CubeTensor<R>,
    gemm: GemmLaunch<'_, R>,
) {
    let window = &gemm.window;
    let [batch, _, _, channels] = dims4(copy);
    let [_, cols, _, _] = dims4(gemm.output);
    let quads = batch * gemm.quads[0] * gemm.quads[1];
    let tile = channels_last_tile(4 * quads, cols, &copy.client);
    let run = RUN as usize;
    let depth = channels * (window.size_h * window.size_w) as usize;
    let depth_runs = depth.next_multiple_of(SLICE_DEPTH as usize) / run;
    let columns = cols.next_multiple_of(tile.columns() as usize);
    let filters = empty_like(copy, [columns, depth_runs * run], DType::BF16);
    let (count, dim) = elementwise_over(&copy.client, columns * depth_runs);
    launch!(filters_channels_last::<F, bf16, R>(
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
    launch!(conv_gemm_channels_last::<F, bf16, R>(
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
        argmax_storage(gemm.argmax),
    ));
}

/// `src` (a 4-D NCHW map) copied by [`padded_channels_last`] into a new bf16 map
/// [N, rows, columns, channels] of `size` = [rows, columns], shifted by `pad`: zeros where
/// `src` has no value.
fn channels_last_copy<R: CubeRuntime, F: FloatElement>(
    src: &CubeTensor<R>,
    size: [usize; 2],
    pad: [u32; 2],
) -> CubeTensor<R> {
    let [batch, channels, _, _] = dims4(src);
    let copy = empty_like(src, [batch, size[0], size[1], channels], DType::BF16);
    let runs = batch * size[0] * size[1] * channels / RUN as usize;
    let (count, dim) = elementwise_over(&src.client, runs);
    launch!(padded_channels_last::<F, bf16, R>(
        &copy,
        count,
        dim,
        RUN as usize,
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
fn channels_last_map<R: CubeRuntime>(map: &CubeTensor<R>) -> ChannelsLastLaunch<R> {
    let [batch, rows, cols, channels] = dims4(map);
    ChannelsLastLaunch::new(
        batch,
        rows as u32,
        cols as u32,
        (channels / RUN as usize) as u32,
    )
}

/// The precision the GEMMs of `dtype` tensors multiply in on `client` at `precision`:
/// [`Precision::Tf32`] or [`Precision::Bf16`] where the runtime has matrix units for it and
/// the tensors are f32; else `None` (the fp32 kernel). TF32 takes `wmma`'s 16 × 16 × 8
/// products; bf16 takes its 16 × 16 × 16 ones (the weight gradient) and `mma`'s 16 × 8 × 16
/// (the forward and the input gradient): CUDA from compute capability 8.0 on.
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

/// The tile of a GEMM of `quads` quads (of four rows) and `cols` columns on a GPU of `sms`
/// SMs: narrow up to 32 columns; else [`Tile::WIDE`], unless [`Tile::WIDE_SHORT`]'s grid
/// runs in one wave of [`SHORT_CUBES_PER_SM`] cubes an SM. Such a GEMM is too short for the
/// wide tile: its fewer, longer cubes leave SMs with one cube or none (H100, LeNet's conv2
/// at batch 100 to 250, 40 to 98 wide cubes on 132 SMs: steps 0.05–0.1 ms faster short); past
/// one short wave the wide tile wins (CIFAR's conv3 input gradient at batch 512, 256 wide
/// cubes against 512 short). Runtimes that do not report SMs get the wide tile.
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

/// Quads covering a map of `size`: ⌈size / 2⌉ per axis.
fn quads_over(size: [usize; 2]) -> [usize; 2] {
    size.map(|side| side.div_ceil(2))
}

/// max-pool₂ₓ₂(ReLU(conv(x) + bias)) into `output` and `argmax` (the pooled map's shape),
/// returning the input's copy where the weight gradient reads it too (see
/// [`backward_input_copy`]).
pub(crate) fn forward_relu_pool<R: CubeRuntime, F: FloatElement>(
    operands: ConvOperands<R>,
    bias: Option<CubeTensor<R>>,
    output: &CubeTensor<R>,
    argmax: &CubeTensor<R>,
) -> Option<CubeTensor<R>> {
    let [_, _, pooled_h, pooled_w] = dims4(output);
    let precision = operands.precision;
    let keep_copy = weight_grad_channels_last::<R, F>(&operands);
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
/// gradient reads it too (see [`backward_input_copy`]).
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
    let keep_copy = weight_grad_channels_last::<R, F>(&operands);
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

/// The input gradient's GEMM launch (see [`input_grad_window`]) into `x_grad`.
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
/// [`input_grad_window`]).
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

/// dx as [`input_grad`], from the conv output's gradient copied channels-last by
/// [`conv_grad_channels_last`] for the input gradient's `window`.
pub(crate) fn input_grad_channels_last<R: CubeRuntime, F: FloatElement>(
    operands: &ConvOperands<R>,
    conv_grad: &ChannelsLastGrad<R>,
    window: Window,
) -> CubeTensor<R> {
    let x_grad = empty_like(&operands.x, operands.x_dims, F::dtype());
    let gemm = input_grad_launch(operands, &x_grad, window);
    launch_channels_last::<R, F>(&conv_grad.map, gemm);
    x_grad
}

/// The conv output's gradient channels-last in bf16, as the bf16 input and weight gradients
/// read it ([`conv_gemm_channels_last`], [`conv_gemm_weight_grad_channels_last`]): `map`,
/// with each conv position shifted by `padding`.
pub(crate) struct ChannelsLastGrad<R: CubeRuntime> {
    pub map: CubeTensor<R>,
    pub padding: [u32; 2],
}

/// [`ChannelsLastGrad`] from the conv output's gradient `grad` (contiguous), or a 2×2
/// stride-2 pool's gradient routed through `argmax` in the same pass
/// ([`routed_channels_last`]; other pools' first routed back as they are): padded for the
/// input gradient's GEMM over `input_window` where there is one, else not.
pub(crate) fn conv_grad_channels_last<R: CubeRuntime, F: FloatElement>(
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
            let map = empty_like(grad, [batch, size[0], size[1], c_out], DType::BF16);
            let runs = batch * size[0] * size[1] * c_out / RUN as usize;
            let (count, dim) = elementwise_over(&grad.client, runs);
            launch!(routed_channels_last::<F, bf16, R>(
                &map,
                count,
                dim,
                RUN as usize,
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
            channels_last_copy::<R, F>(&conv_grad, size, padding)
        }
    };
    ChannelsLastGrad { map, padding }
}

/// Whether the weight gradient of `operands` runs as a GEMM: multi-channel, or in bf16
/// where the forward does (a first layer of 3 × 3×3 terms, CIFAR-shaped b512 on an H200: 87
/// µs against the direct kernel's 163; in TF32 LeNet's first layer took its b1000 step 1.72
/// → 1.88 ms); with a pooled gradient (`routed`) only under the 2×2 stride-2 pool whose
/// windows are quads.
pub(crate) fn weight_grad_applies<R: CubeRuntime, F: FloatElement>(
    operands: &ConvOperands<R>,
    routed: bool,
    pool: Window,
) -> bool {
    let in_bf16 = tensor_core_operands(operands.precision, F::dtype(), &operands.x.client)
        == Some(Precision::Bf16);
    (operands.x_dims[1] >= MIN_CHANNELS || in_bf16 && forward_applies(operands))
        && (!routed || pools_in_quads(pool))
}

/// The weight gradient's partial sums (with the weight and bias gradient buffers, see
/// [`ConvOperands::gradient_buffers`]): the batch's quads split so that the grid's waves
/// are full (see [`balanced_splits`]).
pub(crate) fn weight_grad_partials<R: CubeRuntime, F: FloatElement>(
    operands: &ConvOperands<R>,
    grad: &CubeTensor<R>,
    argmax: Option<&CubeTensor<R>>,
    with_bias: bool,
) -> [CubeTensor<R>; 3] {
    let [c_out, c_in, kh, kw] = operands.weight_dims;
    let depth = c_in * kh * kw;
    let [batch, _, grad_h, grad_w] = dims4(grad);
    let [quads_h, quads_w] = match argmax {
        Some(_) => [grad_h, grad_w],
        None => quads_over([grad_h, grad_w]),
    };
    let quads = batch * quads_h * quads_w;
    let tiles = weight_grad_tiles(operands);
    let quads_per_split = split_size(operands, tiles, quads, MIN_SPLIT_QUADS, SLICE_QUADS);
    let splits = quads.div_ceil(quads_per_split);
    let buffers = operands.gradient_buffers::<F>([splits, c_out, 1, depth + 1], with_bias);
    let partials = &buffers[0];
    // The kernels take the same arguments; the tensor-core one also its operand types and
    // the depth of a product.
    macro_rules! launch_split {
        ($kernel:ident::<$($generic:ty),+> $(, $extra:expr)*) => {
            launch!($kernel::<$($generic),+>(
                partials,
                CubeCount::Static(tiles[0] as u32, tiles[1] as u32, splits as u32),
                CubeDim::new_1d(CUBE_UNITS),
                operands.x.clone().into_array_arg(),
                grad.clone().into_array_arg(),
                argmax.map(|a| a.clone().into_array_arg()).into(),
                partials.clone().into_array_arg(),
                nchw(&operands.x),
                nchw(grad),
                quads_h as u32,
                quads_w as u32,
                quads_per_split as u32,
                operands.window,
                with_bias,
                $($extra,)*
                argmax_storage(argmax),
            ))
        };
    }
    match tensor_core_operands(operands.precision, F::dtype(), &operands.x.client) {
        Some(Precision::Tf32) => launch_split!(
            conv_gemm_weight_grad_tensor_cores::<F, F, tf32, R>,
            TF32_PRODUCT_DEPTH
        ),
        Some(Precision::Bf16) => launch_split!(
            conv_gemm_weight_grad_tensor_cores::<F, bf16, bf16, R>,
            BF16_PRODUCT_DEPTH
        ),
        _ => launch_split!(conv_gemm_weight_grad::<F, R>),
    }
    buffers
}

/// The weight gradient's tiles: [depth, C_out] over the tile's side.
fn weight_grad_tiles<R: CubeRuntime>(operands: &ConvOperands<R>) -> [usize; 2] {
    let [c_out, c_in, kh, kw] = operands.weight_dims;
    [c_in * kh * kw, c_out].map(|extent| extent.div_ceil(TILE_SIDE as usize))
}

/// How many of `items` (quads or positions, walked `slice` at a time) each split of the
/// weight gradient's grid of `tiles` walks: at least `fewest`, in whole slices, and as many
/// splits as [`balanced_splits`] picks.
fn split_size<R: CubeRuntime>(
    operands: &ConvOperands<R>,
    tiles: [usize; 2],
    items: usize,
    fewest: usize,
    slice: u32,
) -> usize {
    let sms = sm_count(&operands.x.client).unwrap_or(SMS_UNKNOWN);
    let slots = WEIGHT_GRAD_CUBES_PER_SM.map(|cubes| sms * cubes);
    let splits = balanced_splits(tiles[0] * tiles[1], slots, items.div_ceil(fewest));
    items.div_ceil(splits).next_multiple_of(slice as usize)
}

/// Whether the weight gradient of `operands` runs on channels-last copies
/// ([`conv_gemm_weight_grad_channels_last`]): in bf16 on the tensor cores, with input and
/// output channels in runs of [`RUN`].
pub(crate) fn weight_grad_channels_last<R: CubeRuntime, F: FloatElement>(
    operands: &ConvOperands<R>,
) -> bool {
    let [c_out, c_in, _, _] = operands.weight_dims;
    let run = RUN as usize;
    tensor_core_operands(operands.precision, F::dtype(), &operands.x.client)
        == Some(Precision::Bf16)
        && c_in.is_multiple_of(run)
        && c_out.is_multiple_of(run)
}

/// The input channels-last and padded to cover every patch of the weight gradient, over
/// `covered` = [rows, columns]: the forward's `copy` where it covers them (the forward's
/// grid of quads may stop a row or column short of an odd-sized output under a pool),
/// else a new copy.
fn backward_input_copy<R: CubeRuntime, F: FloatElement>(
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
            channels_last_copy::<R, F>(&operands.x, covered, [w.pad_h, w.pad_w])
        }
    }
}

/// The weight gradient's partial sums (with the weight and bias gradient buffers) where
/// [`weight_grad_channels_last`] holds, from the conv output's own gradient `conv_grad`:
/// both it and the input channels-last (the input's from [`backward_input_copy`]).
pub(crate) fn weight_grad_partials_channels_last<R: CubeRuntime, F: FloatElement>(
    operands: &ConvOperands<R>,
    input_copy: Option<CubeTensor<R>>,
    conv_grad: &ChannelsLastGrad<R>,
    with_bias: bool,
) -> [CubeTensor<R>; 3] {
    let [c_out, c_in, kh, kw] = operands.weight_dims;
    let depth = c_in * kh * kw;
    let batch = operands.x_dims[0];
    let [rows, cols] = operands.out_size;
    let positions = batch * rows * cols;
    let tiles = weight_grad_tiles(operands);
    let per_split = split_size(
        operands,
        tiles,
        positions,
        4 * MIN_SPLIT_QUADS,
        SLICE_POSITIONS,
    );
    let splits = positions.div_ceil(per_split);
    let buffers = operands.gradient_buffers::<F>([splits, c_out, 1, depth + 1], with_bias);
    let partials = &buffers[0];
    let w = operands.window;
    let covered = [(rows, w.stride_h, kh), (cols, w.stride_w, kw)]
        .map(|(out, stride, size)| (out - 1) * stride as usize + size);
    let x = backward_input_copy::<R, F>(operands, input_copy, covered);
    launch!(conv_gemm_weight_grad_channels_last::<F, bf16, R>(
        partials,
        CubeCount::Static(tiles[0] as u32, tiles[1] as u32, splits as u32),
        CubeDim::new_1d(CUBE_UNITS),
        RUN as usize,
        x.clone().into_array_arg(),
        conv_grad.map.clone().into_array_arg(),
        partials.clone().into_array_arg(),
        channels_last_map(&x),
        channels_last_map(&conv_grad.map),
        conv_grad.padding[0],
        conv_grad.padding[1],
        PositionGridLaunch::new(positions, rows as u32, cols as u32, c_out, depth, per_split),
        w,
        with_bias,
    ));
    buffers
}

/// How many splits (1 to `most`, at most about four waves' worth) a grid of `tiles` cubes
/// per split takes so that its waves are full whether the GPU holds `slots[0]` or
/// `slots[1]` cubes at once: the fewest splits within [`SPLITS_TOLERANCE_PERCENT`] of the
/// least time summed over both, a split count's time being ⌈tiles · splits / slots⌉ waves
/// of 1 / splits of the work each. Filling one wave of four cubes an SM left CIFAR's third
/// layer 1.45 waves in v13 (576 cubes on 396 slots); sized for three cubes an SM, LeNet's,
/// which fits two, had 1.48.
fn balanced_splits(tiles: usize, slots: [usize; 2], most: usize) -> usize {
    // Σ waves / splits as a fraction: [numerator, denominator].
    let time = |splits: usize| -> [usize; 2] {
        let waves = slots.iter().map(|&s| (tiles * splits).div_ceil(s)).sum();
        [waves, splits]
    };
    let candidates = 1..=most.min(4 * slots[1] / tiles.max(1)).max(1);
    let [best_waves, best_splits] = candidates
        .clone()
        .map(time)
        .min_by(|[wa, sa], [wb, sb]| (wa * sb).cmp(&(wb * sa)))
        .unwrap_or([1, 1]);
    candidates
        .into_iter()
        .find(|&splits| {
            let [waves, _] = time(splits);
            100 * waves * best_splits <= (100 + SPLITS_TOLERANCE_PERCENT) * best_waves * splits
        })
        .unwrap_or(1)
}

#[cfg(test)]
mod tests {
    use super::{Tile, balanced_splits, tile_for};

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

    #[test]
    fn splits_fill_whole_waves() {
        // An H100's 132 SMs with two or three cubes each: 264 or 396 slots.
        let slots = [264, 396];
        // CIFAR's third layer at batch 512: 72 tiles; 11 splits make 792 cubes, three
        // waves of two cubes an SM or two of three.
        assert_eq!(balanced_splits(72, slots, 128), 11);
        // Its second layer (18 tiles) and LeNet's conv2 (13): 792 and 780 cubes.
        assert_eq!(balanced_splits(18, slots, 1000), 44);
        assert_eq!(balanced_splits(13, slots, 1000), 60);
        // Bounded by the quads, and at least one split.
        assert_eq!(balanced_splits(13, slots, 7), 7);
        assert_eq!(balanced_splits(13, slots, 0), 1);
        // More tiles than four waves: no split.
        assert_eq!(balanced_splits(2000, slots, 50), 1);
    }
}
