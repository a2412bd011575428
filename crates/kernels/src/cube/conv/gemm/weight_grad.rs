//! The implicit-GEMM weight gradient's launches (gathering, tensor-core and channels-last
//! kernels) and the split of the batch's quads or positions that fills the GPU's waves,
//! kept beside the launches that size their grids with it.

use burn::tensor::{DType, bf16};
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::channels_last::{ChannelsLastGrad, backward_input_copy, channels_last_map, run_of};
use super::{ConvOperands, MIN_CHANNELS, SMS_UNKNOWN, forward_applies, pools_in_quads};
use super::{quads_over, tensor_core_operands};
use crate::Precision;
use crate::cube::grid::sm_count;
use crate::cube::launch::launch;
use crate::cube::layout::{dims4, nchw};
use crate::cube::pool::argmax_storage;
use crate::kernels::conv::gemm::CUBE_UNITS;
use crate::kernels::conv::gemm_weight_grad::{SLICE_QUADS, TILE_SIDE, conv_gemm_weight_grad};
use crate::kernels::conv::gemm_weight_grad_channels_last::{
    PositionGridLaunch, conv_gemm_weight_grad_channels_last,
};
use crate::kernels::conv::gemm_weight_grad_tensor_cores::{
    SLICE_POSITIONS, conv_gemm_weight_grad_tensor_cores,
};
use crate::kernels::conv::gemm_weight_grad_tf32::conv_gemm_weight_grad_tf32;
use crate::kernels::conv::tensor_tile::{BF16_PRODUCT_DEPTH, TF32_PRODUCT_DEPTH};
use crate::kernels::geometry::Window;

/// Fewest quads one split of the weight gradient walks (8 slices): fewer would spend more
/// on writing and summing partials than on the products.
const MIN_SPLIT_QUADS: usize = 64;
/// Cubes of the weight gradient an SM runs at once, which the instance's registers decide
/// (three cubes of 256 units for 3×3 filters, two for LeNet's 5×5): the split count fills
/// whole waves of either.
const WEIGHT_GRAD_CUBES_PER_SM: [usize; 2] = [2, 3];
/// A split count within this many percent of the best one's time counts as equal.
const SPLITS_TOLERANCE_PERCENT: usize = 2;

/// Whether the weight gradient of `operands` runs as a GEMM: multi-channel, or in bf16
/// where the forward does, since on a first layer's few terms bf16's tensor-core products
/// beat the direct kernel and TF32's do not
/// (`docs/perf-log/2026-11-29-bf16-products-issue-and-l1.md`); with a pooled gradient
/// (`routed`) only under the 2×2 stride-2 pool whose windows are quads.
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

/// The precision in which the backward of `operands` runs on channels-last copies
/// ([`conv_gemm_weight_grad_channels_last`], [`conv_gemm_weight_grad_tf32`] and the
/// channels-last input gradient), if it does: bf16 or TF32 on the tensor cores, with input
/// and output channels in whole runs.
pub(crate) fn channels_last_backward<R: CubeRuntime, F: FloatElement>(
    operands: &ConvOperands<R>,
) -> Option<Precision> {
    let [c_out, c_in, _, _] = operands.weight_dims;
    let precision = tensor_core_operands(operands.precision, F::dtype(), &operands.x.client)?;
    let run = match precision {
        Precision::Bf16 => run_of(DType::BF16),
        _ => run_of(F::dtype()),
    };
    (c_in.is_multiple_of(run) && c_out.is_multiple_of(run)).then_some(precision)
}

/// The weight gradient's partial sums (with the weight and bias gradient buffers) where
/// [`channels_last_backward`] holds, from the conv output's own gradient `conv_grad`: both
/// it and the input channels-last in `S` (the input's from [`backward_input_copy`]), the
/// products in bf16 or, where `S` is fp32, in TF32 (`M`).
pub(crate) fn weight_grad_partials_channels_last<
    R: CubeRuntime,
    F: FloatElement,
    S: FloatElement,
    M: Float,
>(
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
    let x = backward_input_copy::<R, F, S>(operands, input_copy, covered);
    let grid =
        PositionGridLaunch::new(positions, rows as u32, cols as u32, c_out, depth, per_split);
    let count = CubeCount::Static(tiles[0] as u32, tiles[1] as u32, splits as u32);
    let run = run_of(S::dtype());
    let (x_map, grad_map) = (channels_last_map(&x), channels_last_map(&conv_grad.map));
    let [pad_h, pad_w] = conv_grad.padding;
    let (x, grad) = (x.into_array_arg(), conv_grad.map.clone().into_array_arg());
    // The bf16 and TF32 kernels take the same arguments.
    macro_rules! launch_channels_last {
        ($kernel:ident::<$($generic:ty),+>) => {
            launch!($kernel::<$($generic),+>(
                partials,
                count,
                CubeDim::new_1d(CUBE_UNITS),
                run,
                x,
                grad,
                partials.clone().into_array_arg(),
                x_map,
                grad_map,
                pad_h,
                pad_w,
                grid,
                w,
                with_bias,
            ))
        };
    }
    match S::dtype() {
        DType::BF16 => launch_channels_last!(conv_gemm_weight_grad_channels_last::<F, S, R>),
        _ => launch_channels_last!(conv_gemm_weight_grad_tf32::<F, M, R>),
    }
    buffers
}

/// How many splits (1 to `most`, at most about four waves' worth) a grid of `tiles` cubes
/// per split takes so that its waves are full whether the GPU holds `slots[0]` or
/// `slots[1]` cubes at once: the fewest splits within [`SPLITS_TOLERANCE_PERCENT`] of the
/// least time summed over both, a split count's time being ⌈tiles · splits / slots⌉ waves
/// of 1 / splits of the work each. Both counts matter because an instance's registers decide
/// which one the GPU holds ([`WEIGHT_GRAD_CUBES_PER_SM`]), and a count sized for one leaves
/// the other's last wave part-empty
/// (`docs/perf-log/2026-11-24-v14-shared-memory-bank-conflicts.md`).
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
    use super::balanced_splits;

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
