//! `conv2d` forward and all three gradients against Burn's conv2d, in fp32, TF32 and bf16.

use burn::prelude::*;
use burn::tensor::ops::ConvOptions;
use burn::tensor::{bf16, module};
use cubenet_kernels::{AutodiffKernelBackend, Precision};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::cases::{CASES, ConvCase, values};
use crate::harness::{
    KernelCheck, LayerResult, Operands, Reference, compare_results_within, floats, on_each_backend,
    tensor,
};

/// Inputs of one conv case, as host data, and the output's incoming gradient.
pub struct ConvData {
    pub x: Vec<f32>,
    pub weight: Vec<f32>,
    pub bias: Vec<f32>,
    pub upstream: Vec<f32>,
}

impl ConvData {
    pub fn random(case: &ConvCase, upstream_len: usize) -> Self {
        let mut rng = StdRng::seed_from_u64(case.seed ^ 0x5eed);
        Self {
            x: values(&mut rng, case.x_shape().iter().product()),
            weight: values(&mut rng, case.weight_shape().iter().product()),
            bias: values(&mut rng, case.c_out),
            upstream: values(&mut rng, upstream_len),
        }
    }

    /// The same data rounded to bf16: values the tensor cores' bf16 operands hold
    /// exactly, whose products are then exact at every precision.
    fn rounded_to_bf16(self) -> Self {
        let round = |values: Vec<f32>| {
            values
                .into_iter()
                .map(|v| bf16::from_f32(v).to_f32())
                .collect()
        };
        Self {
            x: round(self.x),
            weight: round(self.weight),
            bias: round(self.bias),
            upstream: round(self.upstream),
        }
    }

    /// [`ConvData::random`], rounded to bf16 where `bf16_values`.
    pub fn random_at(case: &ConvCase, upstream_len: usize, bf16_values: bool) -> Self {
        let data = Self::random(case, upstream_len);
        if bf16_values {
            data.rounded_to_bf16()
        } else {
            data
        }
    }
}

/// Runs `op` on `B` with the case's data as tracked parameters and backpropagates
/// Σ upstream ⊙ output.
pub fn run_conv_like<B: AutodiffKernelBackend>(
    case: &ConvCase,
    data: &ConvData,
    out_shape: [usize; 4],
    device: &B::Device,
    op: impl FnOnce(Tensor<B, 4>, Tensor<B, 4>, Option<Tensor<B, 1>>) -> Tensor<B, 4>,
) -> LayerResult {
    let mut x = if case.seed % 2 == 1 {
        padded_rows::<B>(&data.x, case.x_shape(), device)
    } else {
        tensor::<B, 4>(&data.x, case.x_shape(), device)
    };
    if case.x_grad {
        x = x.require_grad();
    }
    let weight = tensor::<B, 4>(&data.weight, case.weight_shape(), device).require_grad();
    let bias = case
        .bias
        .then(|| tensor::<B, 1>(&data.bias, [case.c_out], device).require_grad());
    let output = op(x.clone(), weight.clone(), bias.clone());
    assert_eq!(output.dims(), out_shape, "output shape for {case:?}");
    let upstream = tensor::<B, 4>(&data.upstream, out_shape, device);
    let grads = (output.clone() * upstream).sum().backward();
    LayerResult {
        output: floats(output),
        x_grad: case
            .x_grad
            .then(|| floats(x.grad(&grads).expect("x gradient"))),
        weight_grad: floats(weight.grad(&grads).expect("weight gradient")),
        bias_grad: bias.map(|b| floats(b.grad(&grads).expect("bias gradient"))),
    }
}

/// Images `[n, c, h, w]` as a view into rows padded with NaN (a slice of a wider tensor),
/// the way CUDA's pitched image batches arrive: the conv kernels must read them through
/// their strides. The padding (256 bytes) keeps the slice a view on every runtime.
fn padded_rows<B: AutodiffKernelBackend>(
    values: &[f32],
    shape: [usize; 4],
    device: &B::Device,
) -> Tensor<B, 4> {
    const PAD: usize = 64;
    let [n, c, h, w] = shape;
    let padded: Vec<f32> = values
        .chunks(w)
        .flat_map(|row| row.iter().copied().chain([f32::NAN; PAD]))
        .collect();
    tensor::<B, 4>(&padded, [n, c, h, w + PAD], device).slice([0..n, 0..c, 0..h, 0..w])
}

pub fn burn_conv_options(case: &ConvCase) -> ConvOptions<2> {
    ConvOptions::new(case.options.stride, case.options.padding, [1, 1], 1)
}

/// `random_cases` of the seeded random sequence `base`, then a large grid and the networks'
/// layers, on `operands` (as [`Operands::on`] plans them for the runtime).
struct ConvCheck {
    operands: Operands,
    base: u64,
    random_cases: u64,
}

impl KernelCheck for ConvCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        let mut worst = 0f64;
        let plan = self.operands.on::<B>(device, self.random_cases);
        let operands = plan.operands;
        let cases = (0..plan.random_cases)
            .map(|index| ConvCase::random(self.base, index))
            .chain(plan.large_shapes.then(ConvCase::large_grid))
            .chain(ConvCase::network_layers());
        // Tensor-core products touch the output and all gradients but the bias's (fp32
        // adds at every precision).
        let tolerances = [operands.tolerance(); 2];
        let mut count = 0;
        for case in cases {
            count += 1;
            let [oh, ow] = case.output_size();
            let out_shape = [case.batch, case.c_out, oh, ow];
            let data = ConvData::random_at(&case, out_shape.iter().product(), operands.bf16_values);
            let options = case.options.with_precision(self.operands.precision);
            let ours = run_conv_like::<B>(&case, &data, out_shape, device, |x, w, b| {
                cubenet_kernels::conv2d(x, w, b, options)
            });
            let reference = run_conv_like::<Reference>(
                &case,
                &data,
                out_shape,
                &Default::default(),
                |x, w, b| module::conv2d(x, w, b, burn_conv_options(&case)),
            );
            let label = format!("{case:?} at {}", operands.precision);
            worst = worst.max(compare_results_within(
                &label, &ours, &reference, tolerances,
            ));
        }
        (count, worst)
    }
}

#[test]
fn conv2d_matches_burn() {
    let check = ConvCheck {
        operands: Operands::any_values(Precision::Fp32),
        base: 1,
        random_cases: CASES,
    };
    on_each_backend("conv2d forward + x/weight/bias grads", check);
}

/// Fewer random cases than in fp32 (and none where there are no TF32 matrix units: see
/// [`Operands::on`]).
#[test]
fn conv2d_in_tf32_matches_burn_within_tf32_rounding() {
    let check = ConvCheck {
        operands: Operands::any_values(Precision::Tf32),
        base: 5,
        random_cases: CASES / 2,
    };
    on_each_backend("conv2d in TF32, forward + x/weight/bias grads", check);
}

/// TF32 operands on values bf16 holds (which TF32 holds too): every staged value, index and
/// slice of the TF32 kernels, to fp32 rounding.
#[test]
fn conv2d_in_tf32_on_bf16_values_matches_burn_to_fp32_rounding() {
    let check = ConvCheck {
        operands: Operands {
            precision: Precision::Tf32,
            bf16_values: true,
        },
        base: 6,
        random_cases: CASES / 2,
    };
    on_each_backend(
        "conv2d in TF32 on bf16 values, forward + x/weight/bias grads",
        check,
    );
}

/// bf16 operands on any values: the rounding itself.
#[test]
fn conv2d_in_bf16_matches_burn_within_bf16_rounding() {
    let check = ConvCheck {
        operands: Operands::any_values(Precision::Bf16),
        base: 9,
        random_cases: CASES / 4,
    };
    on_each_backend("conv2d in bf16, forward + x/weight/bias grads", check);
}

/// bf16 operands on values bf16 holds: every staged value, index and slice, to fp32
/// rounding.
#[test]
fn conv2d_in_bf16_on_bf16_values_matches_burn_to_fp32_rounding() {
    let check = ConvCheck {
        operands: Operands {
            precision: Precision::Bf16,
            bf16_values: true,
        },
        base: 11,
        random_cases: CASES / 2,
    };
    on_each_backend(
        "conv2d in bf16 on bf16 values, forward + x/weight/bias grads",
        check,
    );
}
