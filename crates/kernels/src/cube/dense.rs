//! The dense layer on CubeCL: a split-K forward (one kernel when K fits one split) with the
//! bias and ReLU applied inside, and the input and weight (+ bias) gradients.

use burn_cubecl::kernel::into_contiguous;
use burn_cubecl::tensor::CubeTensor;
use burn_cubecl::{CubeRuntime, FloatElement};
use cubecl::prelude::*;

use super::alloc::{empty_group, empty_like};
use super::grid::{block_counts, blocks, elementwise, row_vector_size, sm_count, unit_block};
use super::launch::launch;
use super::layout::dims2;
use crate::kernels::dense::{
    DenseSizesLaunch, dense_forward_partial, dense_forward_sum, dense_input_grad, dense_weight_grad,
};
use crate::{DenseActivation, GradsWanted, LayerGrads};

/// Batch rows per cube of the forward, each weight load serving all of them; and the most
/// output columns per cube (fewer when the layer has fewer outputs). Its units hold rows ×
/// columns sums, which at more rows or columns take so many registers that an SM holds one
/// cube (`docs/perf-log/2026-11-22-v06-dense-kernels-as-memory-streams.md`).
const FORWARD_ROWS: u32 = 4;
const FORWARD_MAX_COLS: u32 = 16;
/// Units per cube of the forward: at least one per output of its block, which adds up that
/// output's sums.
const FORWARD_CUBE_SIZE: u32 = 64;
/// Vectors of inputs each unit of the forward multiplies, about: sets the splits of K, so
/// that the products outweigh the sum that follows them.
const FORWARD_VECTORS_PER_UNIT: usize = 16;
/// Cubes of the forward an SM should hold, where the batch and the outputs make fewer: K is
/// split further, down to [`FORWARD_MIN_VECTORS_PER_UNIT`] vectors a unit: a head with few
/// outputs and a small batch (the CIFAR-shaped network's, 4096 → 10) otherwise makes about
/// one cube an SM, too few warps to hide the latency of its loads
/// (`docs/perf-log/2026-11-29-bf16-channels-last.md`).
const FORWARD_CUBES_PER_SM: usize = 4;
const FORWARD_MIN_VECTORS_PER_UNIT: usize = 4;
const _: () = assert!(FORWARD_ROWS * FORWARD_MAX_COLS <= FORWARD_CUBE_SIZE);
/// Units per cube of the input gradient (one vector of inputs each), and the most batch
/// rows each unit computes with one read of its weights.
const INPUT_GRAD_UNITS: u32 = 256;
const INPUT_GRAD_ROWS: u32 = 8;
/// Most output columns per unit of the weight gradient (its accumulators).
const WEIGHT_GRAD_MAX_COLS: u32 = 16;
/// Units per cube of the weight gradient: vectors of weight rows × lanes sharing out the
/// batch (a power of two: the lanes combine by halving).
const WEIGHT_GRAD_UNITS: u32 = 256;
/// Most and fewest vectors of weight rows per cube of the weight gradient: 16 × 16 units,
/// or down to 4 × 64 where the 16 × 16 grid would leave SMs idle (the single-conv CNN's head
/// at d = 32: fewer cubes than SMs). A grid that fills the GPU keeps 16 × 16, since
/// narrower cubes' lanes meet in more halvings
/// (`docs/perf-log/2026-11-25-v18-dense-weight-gradient-narrow-cubes.md`).
const WEIGHT_GRAD_MAX_ROWS: u32 = 16;
const WEIGHT_GRAD_MIN_ROWS: u32 = 4;
const _: () =
    assert!(WEIGHT_GRAD_UNITS.is_power_of_two() && WEIGHT_GRAD_MIN_ROWS.is_power_of_two());
/// About how many images each lane of a narrowed weight gradient adds up before the lanes
/// meet in shared memory (a barrier per halving and column): the lanes are the batch over
/// this, rounded up to a power of two.
const WEIGHT_GRAD_IMAGES_PER_LANE: usize = 16;

/// `activation(x · weightᵀ + bias)`.
pub(crate) fn forward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    bias: Option<CubeTensor<R>>,
    activation: DenseActivation,
) -> CubeTensor<R> {
    let (x, weight) = (into_contiguous(x), into_contiguous(weight));
    let ([batch, inputs], [outputs, _]) = (dims2(&x), dims2(&weight));
    let width = row_vector_size(&x);
    let row_vectors = inputs / width;
    let block = [FORWARD_ROWS, (outputs as u32).clamp(1, FORWARD_MAX_COLS)];
    let [row_blocks, col_blocks] = block_counts([batch, outputs], block);
    let unit_vectors = |vectors: usize| row_vectors.div_ceil(FORWARD_CUBE_SIZE as usize * vectors);
    let cubes = row_blocks as usize * col_blocks as usize;
    let filling = sm_count(&x.client)
        .map_or(1, |sms| (FORWARD_CUBES_PER_SM * sms).div_ceil(cubes))
        .min(unit_vectors(FORWARD_MIN_VECTORS_PER_UNIT));
    let splits = unit_vectors(FORWARD_VECTORS_PER_UNIT).max(filling).max(1);
    let vectors_per_split = row_vectors.div_ceil(splits);
    let single_split = splits == 1;
    let relu = activation == DenseActivation::Relu;
    let bias = bias.map(into_contiguous);
    // One split writes the output itself; more write partial sums for a second kernel.
    let [partials, output] = if single_split {
        let output = empty_like(&x, [batch, outputs], F::dtype());
        [output.clone(), output]
    } else {
        empty_group(
            &x,
            [
                ([splits, batch, outputs].into(), F::dtype()),
                ([batch, outputs].into(), F::dtype()),
            ],
        )
    };
    let [rows, cols] = block;
    let first_stage_bias = bias.clone().filter(|_| single_split);
    launch!(dense_forward_partial::<F, R>(
        &partials,
        CubeCount::Static(row_blocks, col_blocks, splits as u32),
        CubeDim::new_1d(FORWARD_CUBE_SIZE),
        width,
        x.into_array_arg(),
        weight.into_array_arg(),
        first_stage_bias.map(CubeTensor::into_array_arg).into(),
        partials.clone().into_array_arg(),
        DenseSizesLaunch::new(batch, row_vectors, outputs),
        vectors_per_split as u32,
        rows,
        cols,
        FORWARD_CUBE_SIZE,
        single_split,
        relu && single_split,
    ));
    if single_split {
        return output;
    }
    let (count, dim) = elementwise(&output);
    launch!(dense_forward_sum::<F, R>(
        &output,
        count,
        dim,
        partials.into_array_arg(),
        bias.map(CubeTensor::into_array_arg).into(),
        output.clone().into_array_arg(),
        splits,
        outputs,
        relu,
    ));
    output
}

/// The gradients of [`forward`] from its output's gradient `grad`; `relu_output` is the
/// forward's output when its activation was ReLU.
pub(crate) fn backward<R: CubeRuntime, F: FloatElement>(
    x: CubeTensor<R>,
    weight: CubeTensor<R>,
    grad: CubeTensor<R>,
    relu_output: Option<CubeTensor<R>>,
    wants: GradsWanted,
) -> LayerGrads<CubeTensor<R>> {
    let (x, grad) = (into_contiguous(x), into_contiguous(grad));
    let relu_output = relu_output.map(into_contiguous);
    let ([batch, inputs], [outputs, _]) = (dims2(&x), dims2(&weight));
    let width = row_vector_size(&x);
    let row_vectors = inputs / width;
    let x_grad = wants.x.then(|| {
        let weight = into_contiguous(weight);
        let x_grad = empty_like(&x, [batch, inputs], F::dtype());
        let rows = unit_block(
            &x_grad.client,
            INPUT_GRAD_ROWS,
            batch,
            row_vectors.next_multiple_of(INPUT_GRAD_UNITS as usize),
        );
        launch!(dense_input_grad::<F, R>(
            &x_grad,
            blocks([row_vectors, batch], [INPUT_GRAD_UNITS, rows]),
            CubeDim::new_1d(INPUT_GRAD_UNITS),
            width,
            grad.clone().into_array_arg(),
            relu_output.clone().map(CubeTensor::into_array_arg).into(),
            weight.into_array_arg(),
            x_grad.clone().into_array_arg(),
            DenseSizesLaunch::new(batch, row_vectors, outputs),
            rows,
        ));
        x_grad
    });
    // Without a bias its unit is not launched and its one-element buffer is not written.
    let [weight_grad, bias_grad] = empty_group(
        &x,
        [
            ([outputs, inputs].into(), F::dtype()),
            ([if wants.bias { outputs } else { 1 }].into(), F::dtype()),
        ],
    );
    let units = row_vectors + usize::from(wants.bias);
    let cols = (outputs as u32).clamp(1, WEIGHT_GRAD_MAX_COLS);
    let widest_cubes =
        units.div_ceil(WEIGHT_GRAD_MAX_ROWS as usize) * outputs.div_ceil(cols as usize);
    let rows = match sm_count(&x.client) {
        Some(sms) if widest_cubes < sms => weight_grad_narrowed_rows(batch),
        _ => WEIGHT_GRAD_MAX_ROWS,
    };
    let lanes = WEIGHT_GRAD_UNITS / rows;
    launch!(dense_weight_grad::<F, R>(
        &weight_grad,
        blocks([units, outputs], [rows, cols]),
        CubeDim::new_2d(rows, lanes),
        width,
        x.into_array_arg(),
        grad.into_array_arg(),
        relu_output.map(CubeTensor::into_array_arg).into(),
        weight_grad.clone().into_array_arg(),
        bias_grad.clone().into_array_arg(),
        DenseSizesLaunch::new(batch, row_vectors, outputs),
        cols,
        rows,
        lanes,
        wants.bias,
    ));
    LayerGrads {
        x: x_grad,
        weight: weight_grad,
        bias: wants.bias.then_some(bias_grad),
    }
}

/// Rows of a narrowed weight-gradient cube at `batch`: lanes for about
/// [`WEIGHT_GRAD_IMAGES_PER_LANE`] images each, within the row bounds.
fn weight_grad_narrowed_rows(batch: usize) -> u32 {
    let lanes = (batch / WEIGHT_GRAD_IMAGES_PER_LANE).next_power_of_two() as u32;
    (WEIGHT_GRAD_UNITS / lanes).clamp(WEIGHT_GRAD_MIN_ROWS, WEIGHT_GRAD_MAX_ROWS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn narrowed_weight_grad_lanes_walk_about_16_images_each() {
        let rows: Vec<u32> = [1, 15, 128, 256, 511, 512, 1000, 1024, 60_000]
            .map(weight_grad_narrowed_rows)
            .into();
        assert_eq!(rows, [16, 16, 16, 16, 8, 8, 4, 4, 4]);
    }
}
