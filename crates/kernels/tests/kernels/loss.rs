//! Softmax cross-entropy, loss and logit gradient, against a float64 computation on the
//! host; on the GPU runtimes and, for the default body, on NdArray.

use burn::prelude::*;
use cubenet_kernels::AutodiffKernelBackend;
use cubenet_kernels::testing::with_default_bodies;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

use crate::cases::{CASES, values};
use crate::harness::{KernelCheck, Reference, compare, floats, on_each_backend, tensor};

/// A batch of logits with its targets and the loss's upstream gradient.
#[derive(Debug)]
struct LossCase {
    seed: u64,
    rows: usize,
    classes: usize,
    /// Logits are uniform in ±`spread`: large spreads test the max subtraction.
    spread: f32,
}

impl LossCase {
    /// Rows 1–2000 (1 forced regularly; more than the forward cube's 256 units often),
    /// classes 1–40 with 10 forced in, spreads from 0.1 to 80.
    fn random(index: u64) -> Self {
        let seed = 9_000_011 + index;
        let mut rng = StdRng::seed_from_u64(seed);
        Self {
            seed,
            rows: match index % 4 {
                0 => 1,
                1 => rng.random_range(200..=2000),
                _ => rng.random_range(1..=300),
            },
            classes: if index.is_multiple_of(3) {
                10
            } else {
                rng.random_range(1..=40)
            },
            spread: [0.1, 1.0, 5.0, 80.0][(index % 4) as usize],
        }
    }

    fn data(&self) -> (Vec<f32>, Vec<i64>, f32) {
        let mut rng = StdRng::seed_from_u64(self.seed);
        let logits = values(&mut rng, self.rows * self.classes)
            .into_iter()
            .map(|v| v * self.spread)
            .collect();
        let targets = (0..self.rows)
            .map(|_| rng.random_range(0..self.classes) as i64)
            .collect();
        (logits, targets, rng.random_range(0.5..2.0))
    }

    /// (loss, logits' gradient) by `cubenet_kernels::cross_entropy` on `B`.
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (Vec<f32>, Vec<f32>) {
        let (logits, targets, upstream) = self.data();
        let logits = tensor::<B, 2>(&logits, [self.rows, self.classes], device).require_grad();
        let targets = Tensor::<B, 1, Int>::from_data(TensorData::new(targets, [self.rows]), device);
        let loss = cubenet_kernels::cross_entropy(logits.clone(), targets);
        assert_eq!(loss.dims(), [1], "{self:?}");
        let grads = (loss.clone() * upstream).sum().backward();
        (
            floats(loss),
            floats(logits.grad(&grads).expect("logits gradient")),
        )
    }

    /// The same in float64 on the host.
    fn expected(&self) -> (Vec<f32>, Vec<f32>) {
        let (logits, targets, upstream) = self.data();
        let mut loss = 0f64;
        let mut grad = Vec::with_capacity(logits.len());
        for (row, &target) in logits.chunks(self.classes).zip(&targets) {
            let max = row.iter().fold(f64::MIN, |m, &v| m.max(f64::from(v)));
            let sum: f64 = row.iter().map(|&v| (f64::from(v) - max).exp()).sum();
            loss += sum.ln() + max - f64::from(row[target as usize]);
            for (c, &v) in row.iter().enumerate() {
                let p = (f64::from(v) - max).exp() / sum;
                let hot = if c as i64 == target { 1.0 } else { 0.0 };
                grad.push(((p - hot) * f64::from(upstream) / self.rows as f64) as f32);
            }
        }
        (vec![(loss / self.rows as f64) as f32], grad)
    }

    fn check(&self, ours: (Vec<f32>, Vec<f32>)) -> f64 {
        let expected = self.expected();
        let loss = compare(&format!("loss of {self:?}"), &ours.0, &expected.0);
        let grad = compare(&format!("logits grad of {self:?}"), &ours.1, &expected.1);
        loss.max(grad)
    }
}

struct LossCheck;

impl KernelCheck for LossCheck {
    fn run<B: AutodiffKernelBackend>(&self, device: &B::Device) -> (usize, f64) {
        let cases = (0..CASES).map(LossCase::random).chain([LossCase {
            seed: 1000,
            rows: 1000,
            classes: 10,
            spread: 3.0,
        }]);
        let mut worst = 0f64;
        let mut count = 0;
        for case in cases {
            worst = worst.max(case.check(case.run::<B>(device)));
            count += 1;
        }
        (count, worst)
    }
}

#[test]
fn cross_entropy_matches_float64() {
    on_each_backend("cross_entropy loss + logits grad", LossCheck);
}

#[test]
fn cross_entropy_default_body_matches_float64() {
    for index in 0..40 {
        let case = LossCase::random(index);
        case.check(with_default_bodies(|| {
            case.run::<Reference>(&Default::default())
        }));
    }
}
