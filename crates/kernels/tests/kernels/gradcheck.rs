//! Finite-difference check of the fused op's gradients on small shapes: independent of
//! any reference implementation.

use burn::prelude::*;
use cubenet_kernels::{AutodiffKernelBackend, ConvOptions2d, PoolOptions2d};
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cases::values;
use crate::harness::{KernelCheck, floats, ints, on_each_backend, tensor};

/// Central-difference step; small enough that most perturbations cross no ReLU or max kink.
const STEP: f32 = 2e-3;

struct FusedGradCheck;

/// Σ upstream ⊙ conv_relu_pool(x, w, b) and the argmax it used.
fn loss<B: AutodiffKernelBackend>(
    x: &[f32],
    w: &[f32],
    b: &[f32],
    shapes: &Shapes,
    upstream: &Tensor<B::InnerBackend, 4>,
    device: &B::Device,
) -> (f64, Vec<i64>) {
    let inner = |v: &[f32], s| tensor::<B::InnerBackend, 4>(v, s, device);
    let bias = tensor::<B::InnerBackend, 1>(b, [shapes.weight[0]], device);
    let (out, argmax) = cubenet_kernels::conv_relu_pool_with_argmax(
        inner(x, shapes.x),
        inner(w, shapes.weight),
        Some(bias),
        shapes.conv,
        shapes.pool,
    );
    let value = (out * upstream.clone()).sum().into_scalar().elem::<f64>();
    (value, ints(argmax))
}

struct Shapes {
    x: [usize; 4],
    weight: [usize; 4],
    conv: ConvOptions2d,
    pool: PoolOptions2d,
}

impl KernelCheck for FusedGradCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        let geometries = [
            (
                ConvOptions2d::new([1, 1], [0, 0]),
                PoolOptions2d::new([2, 2], [2, 2], [0, 0]),
            ),
            (
                ConvOptions2d::new([2, 1], [1, 2]),
                PoolOptions2d::new([3, 2], [2, 1], [1, 0]),
            ),
        ];
        let mut checked = 0;
        let mut worst = 0f64;
        for (seed, (conv, pool)) in geometries.into_iter().enumerate() {
            let mut rng = StdRng::seed_from_u64(77 + seed as u64);
            let shapes = Shapes {
                x: [2, 2, 7, 8],
                weight: [3, 2, 3, 3],
                conv,
                pool,
            };
            let conv_size = conv.output_size([7, 8], [3, 3]);
            let [oh, ow] = pool.output_size(conv_size);
            let out_shape = [2, 3, oh, ow];
            let (x, w, b) = (
                values(&mut rng, 2 * 2 * 7 * 8),
                values(&mut rng, 3 * 2 * 9),
                values(&mut rng, 3),
            );
            let upstream_values = values(&mut rng, out_shape.iter().product());

            // Autodiff gradients.
            let xt = tensor::<B, 4>(&x, shapes.x, device).require_grad();
            let wt = tensor::<B, 4>(&w, shapes.weight, device).require_grad();
            let bt = tensor::<B, 1>(&b, [3], device).require_grad();
            let out = cubenet_kernels::conv_relu_pool(
                xt.clone(),
                wt.clone(),
                Some(bt.clone()),
                conv,
                pool,
            );
            let grads = (out * tensor::<B, 4>(&upstream_values, out_shape, device))
                .sum()
                .backward();
            let analytic = [
                floats(xt.grad(&grads).unwrap()),
                floats(wt.grad(&grads).unwrap()),
                floats(bt.grad(&grads).unwrap()),
            ];

            let upstream = tensor::<B::InnerBackend, 4>(&upstream_values, out_shape, device);
            let (_, base_argmax) = loss::<B>(&x, &w, &b, &shapes, &upstream, device);
            let params = [x, w, b];
            for (which, values) in params.iter().enumerate() {
                // Every bias, 15 random coordinates of x and of the weights.
                let coords: Vec<usize> = if which == 2 {
                    (0..values.len()).collect()
                } else {
                    (0..15).map(|_| rng.random_range(0..values.len())).collect()
                };
                for coord in coords {
                    let shifted = |delta: f32| {
                        let mut p = params.clone();
                        p[which][coord] += delta;
                        loss::<B>(&p[0], &p[1], &p[2], &shapes, &upstream, device)
                    };
                    let ((plus, argmax_plus), (minus, argmax_minus)) =
                        (shifted(STEP), shifted(-STEP));
                    if argmax_plus != base_argmax || argmax_minus != base_argmax {
                        continue; // the step crossed a kink: the difference quotient is meaningless
                    }
                    let numeric = (plus - minus) / (2.0 * f64::from(STEP));
                    let exact = f64::from(analytic[which][coord]);
                    let err = (numeric - exact).abs() / exact.abs().max(1.0);
                    assert!(
                        err < 1e-2,
                        "geometry {seed}, param {which}, coord {coord}: autodiff {exact}, finite difference {numeric}"
                    );
                    worst = worst.max(err);
                    checked += 1;
                }
            }
        }
        assert!(
            checked >= 40,
            "only {checked} coordinates were away from kinks"
        );
        (checked, worst)
    }
}

#[test]
fn conv_relu_pool_gradients_match_finite_differences() {
    on_each_backend(
        "conv_relu_pool finite differences (coordinates)",
        FusedGradCheck,
    );
}
