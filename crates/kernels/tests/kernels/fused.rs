//! The fused conv·bias·ReLU·max-pool against Burn's conv2d → relu → max_pool2d, forward,
//! argmax and all gradients; in TF32 and bf16, forward and argmax, and in bf16 on values
//! bf16 holds exactly, everything.

use burn::prelude::*;
use burn::tensor::{activation, module};
use cubenet_kernels::{AutodiffKernelBackend, NO_ARGMAX, PoolOptions2d, Precision};
use rand::SeedableRng;
use rand::rngs::StdRng;

use crate::cases::{CASES, ConvCase, random_pool};
use crate::conv::{ConvData, burn_conv_options, run_conv_like};
use crate::harness::{
    KernelCheck, Operands, Reference, TOLERANCE, compare_results_within, compare_within, floats,
    ints, on_each_backend,
};
use crate::pool::expected_offsets;

/// Burn's ops for max-pool(ReLU(conv(x) + b)): the conv output, the pooled map and Burn's
/// argmax (flat indices into the conv output's plane).
pub fn burn_conv_relu_pool<B: Backend>(
    case: &ConvCase,
    pool: PoolOptions2d,
    x: Tensor<B, 4>,
    weight: Tensor<B, 4>,
    bias: Option<Tensor<B, 1>>,
) -> (Tensor<B, 4>, Tensor<B, 4>, Tensor<B, 4, Int>) {
    let conv = module::conv2d(x, weight, bias, burn_conv_options(case));
    let (output, indices) = module::max_pool2d_with_indices(
        activation::relu(conv.clone()),
        pool.kernel,
        pool.stride,
        pool.padding,
        [1, 1],
        false,
    );
    (conv, output, indices)
}

/// `random_cases` of the seeded random sequence `base` (with random pools), then the
/// networks' shapes under the 2×2 pool, on `operands`.
struct FusedCheck {
    operands: Operands,
    base: u64,
    random_cases: u64,
}

impl KernelCheck for FusedCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        // The random cases, then the single-conv CNN's own shapes with its 2x2 pool: the batches a
        // 64-image MNIST epoch runs on (64, then 48), an uneven one, a large one, and d = 256;
        // then LeNet's second block and the channels of the CIFAR-shaped network's second and
        // third (on smaller maps, to keep the software GPU quick), and one whose grid fills
        // a large GPU. Where the precision falls back to fp32, the networks' layers only
        // (see [`Operands::on`]).
        let plan = self.operands.on::<B>(device, self.random_cases);
        let operands = plan.operands;
        let fixed_shapes: Vec<ConvCase> = match plan.large_shapes {
            true => [(64, 32), (48, 32), (50, 32), (1000, 32), (120, 256)]
                .map(|(batch, d)| ConvCase::single_conv(batch, d))
                .into_iter()
                .chain(ConvCase::network_layers())
                .chain([ConvCase::large_grid()])
                .collect(),
            false => ConvCase::network_layers().to_vec(),
        };
        let two_by_two = Some(PoolOptions2d::new([2, 2], [2, 2], [0, 0]));
        let cases = (0..plan.random_cases)
            .map(|index| (ConvCase::random(self.base, index), None))
            .chain(fixed_shapes.into_iter().map(|case| (case, two_by_two)));
        let mut worst = 0f64;
        let mut count = 0;
        for (case, fixed_pool) in cases {
            count += 1;
            let conv_size = case.output_size();
            let pool = fixed_pool
                .unwrap_or_else(|| random_pool(&mut StdRng::seed_from_u64(case.seed), conv_size));
            let [out_h, out_w] = pool.output_size(conv_size);
            let out_shape = [case.batch, case.c_out, out_h, out_w];
            let data = ConvData::random_at(&case, out_shape.iter().product(), operands.bf16_values);
            let label = format!("{case:?}, {pool:?}");

            let options = case.options.with_precision(self.operands.precision);
            let mut argmax = None;
            let ours = run_conv_like::<B>(&case, &data, out_shape, device, |x, w, b| {
                let (output, indices) =
                    cubenet_kernels::conv_relu_pool_with_argmax(x, w, b, options, pool);
                argmax = Some(ints(indices));
                output
            });
            let mut conv_ref = None;
            let mut indices_ref = None;
            let reference = run_conv_like::<Reference>(
                &case,
                &data,
                out_shape,
                &Default::default(),
                |x, w, b| {
                    let (conv, output, indices) = burn_conv_relu_pool(&case, pool, x, w, b);
                    conv_ref = Some(floats(conv));
                    indices_ref = Some(ints(indices));
                    output
                },
            );
            let tolerance = operands.tolerance();
            let overlap = pool.stride[0] < pool.kernel[0] || pool.stride[1] < pool.kernel[1];
            worst = worst.max(if tolerance == TOLERANCE {
                let output = compare_within(
                    &format!("output of {label}"),
                    &ours.output,
                    &reference.output,
                    TOLERANCE,
                );
                let tolerances = [operands.gradient_tolerance(overlap); 2];
                output.max(compare_results_within(
                    &label, &ours, &reference, tolerances,
                ))
            } else {
                // Operand rounding can swap two window values that nearly tie, and the
                // gradients follow the argmax: only the forward is compared.
                compare_within(
                    &format!("output of {label} in {}", operands.precision),
                    &ours.output,
                    &reference.output,
                    tolerance,
                )
            });

            // The argmax must name the same window position, except where two conv values
            // tie within rounding, or where the pooled value is (about) zero.
            let argmax = argmax.unwrap();
            let conv_ref = conv_ref.unwrap();
            let expected = expected_offsets(&indices_ref.unwrap(), out_shape, conv_size[1], pool);
            let scale = conv_ref.iter().fold(1e-12f32, |m, v| m.max(v.abs()));
            let tolerance = tolerance as f32 * scale;
            let conv_value = |i: usize, offset: i64| {
                let plane = i / (out_h * out_w);
                let (ph, pw) = ((i / out_w) % out_h, i % out_w);
                let row = ph * pool.stride[0] + offset as usize / pool.kernel[1] - pool.padding[0];
                let col = pw * pool.stride[1] + offset as usize % pool.kernel[1] - pool.padding[1];
                conv_ref[(plane * conv_size[0] + row) * conv_size[1] + col]
            };
            for (i, (&got, &want)) in argmax.iter().zip(&expected).enumerate() {
                let pooled = reference.output[i];
                let ok = if pooled <= tolerance {
                    got == NO_ARGMAX as i64 || pooled.abs() <= tolerance
                } else {
                    got == want
                        || (got != NO_ARGMAX as i64
                            && (conv_value(i, got) - conv_value(i, want)).abs() <= tolerance)
                };
                assert!(
                    ok,
                    "argmax of {label}: element {i} is {got}, expected {want} (pooled {pooled})"
                );
            }
        }
        (count, worst)
    }
}

#[test]
fn conv_relu_pool_matches_burn() {
    let check = FusedCheck {
        operands: Operands::any_values(Precision::Fp32),
        base: 3,
        random_cases: CASES,
    };
    on_each_backend(
        "conv_relu_pool forward + argmax + x/weight/bias grads",
        check,
    );
}

/// TF32 operands on any values (forward and argmax), then on values bf16 holds (forward,
/// argmax and every gradient, to fp32 rounding); fewer random cases than in fp32 (and none
/// where there are no TF32 matrix units: see [`Operands::on`]).
#[test]
fn conv_relu_pool_in_tf32_matches_burn() {
    for (bf16_values, base) in [(false, 7), (true, 8)] {
        let check = FusedCheck {
            operands: Operands {
                precision: Precision::Tf32,
                bf16_values,
            },
            base,
            random_cases: CASES / 4,
        };
        on_each_backend(
            &format!("conv_relu_pool in TF32, bf16 values {bf16_values}"),
            check,
        );
    }
}

/// bf16 operands on any values (forward and argmax), then on values bf16 holds (forward,
/// argmax and every gradient, to fp32 rounding).
#[test]
fn conv_relu_pool_in_bf16_matches_burn() {
    for (bf16_values, base) in [(false, 13), (true, 15)] {
        let check = FusedCheck {
            operands: Operands {
                precision: Precision::Bf16,
                bf16_values,
            },
            base,
            random_cases: CASES / 4,
        };
        on_each_backend(
            &format!("conv_relu_pool in bf16, bf16 values {bf16_values}"),
            check,
        );
    }
}
