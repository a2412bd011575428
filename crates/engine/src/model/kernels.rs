//! The choice between cubenet's kernels and Burn's ops inside a network.

use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
use burn::tensor::activation::log_softmax;
use burn::tensor::module::max_pool2d;
use cubenet_kernels::{KernelBackend, PoolOptions2d, cross_entropy};
use serde::{Deserialize, Serialize};

/// Which implementation runs a network's conv·ReLU·pool blocks and dense layers. Both
/// compute the same function with the same parameters (so records load into both); on
/// backends without CubeCL kernels (ndarray) `custom` runs Burn's ops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Kernels {
    /// cubenet's kernels: the fused conv·bias·ReLU·max-pool (one pass, pooled map + u8
    /// argmax) and the dense layer.
    #[default]
    Custom,
    /// Burn's conv2d, relu, max_pool2d and linear, one after the other.
    Burn,
}

impl Kernels {
    /// Mean softmax cross-entropy of `logits` against `targets`: cubenet's one-kernel loss
    /// on the custom path, Burn's `CrossEntropyLoss` (defaults) on Burn's. Same value.
    pub fn cross_entropy<B: KernelBackend>(
        self,
        logits: Tensor<B, 2>,
        targets: Tensor<B, 1, Int>,
    ) -> Tensor<B, 1> {
        match self {
            Kernels::Custom => cross_entropy(logits, targets),
            Kernels::Burn => CrossEntropyLossConfig::new()
                .init(&logits.device())
                .forward(logits, targets),
        }
    }

    /// Mean cross-entropy of `logits` against `targets` smoothed by `epsilon` (`1 − ε` on
    /// each row's class plus `ε / classes` on every class, PyTorch's `label_smoothing`):
    /// `(1 − ε) · CE + ε · mean(−log softmax)`, with CE from [`Self::cross_entropy`] on the
    /// custom path, Burn's smoothed `CrossEntropyLoss` on Burn's; plain CE when ε is 0.
    pub fn smoothed_cross_entropy<B: KernelBackend>(
        self,
        logits: Tensor<B, 2>,
        targets: Tensor<B, 1, Int>,
        epsilon: f32,
    ) -> Tensor<B, 1> {
        if epsilon == 0.0 {
            return self.cross_entropy(logits, targets);
        }
        match self {
            Kernels::Custom => {
                let uniform = log_softmax(logits.clone(), 1).mean().neg();
                let exact = cross_entropy(logits, targets);
                exact.mul_scalar(1.0 - epsilon) + uniform.mul_scalar(epsilon)
            }
            Kernels::Burn => CrossEntropyLossConfig::new()
                .with_smoothing(Some(epsilon))
                .init(&logits.device())
                .forward(logits, targets),
        }
    }

    /// Max-pool of `x`: cubenet's pool kernel (with its argmax kept for the backward) on
    /// the custom path, Burn's `max_pool2d` on Burn's.
    pub fn max_pool<B: KernelBackend>(self, x: Tensor<B, 4>, pool: PoolOptions2d) -> Tensor<B, 4> {
        match self {
            Kernels::Custom => cubenet_kernels::max_pool2d(x, pool),
            Kernels::Burn => max_pool2d(x, pool.kernel, pool.stride, pool.padding, [1, 1], false),
        }
    }
}

#[cfg(test)]
mod tests {
    use burn::backend::{Autodiff, NdArray};
    use burn::tensor::Distribution;

    use super::*;

    type B = Autodiff<NdArray>;

    /// The loss `−Σ q·log p / n` with PyTorch's smoothed targets `q`, and its gradient
    /// `(p − q) / n`, in float64 from the logits.
    fn by_hand(logits: &[f32], targets: &[i64], classes: usize, eps: f64) -> (f64, Vec<f64>) {
        let rows = targets.len();
        let (mut loss, mut grad) = (0.0, Vec::new());
        for (row, &target) in logits.chunks(classes).zip(targets) {
            let max = row.iter().fold(f64::MIN, |m, &v| m.max(f64::from(v)));
            let sum: f64 = row.iter().map(|&v| (f64::from(v) - max).exp()).sum();
            for (k, &v) in row.iter().enumerate() {
                let log_p = f64::from(v) - max - sum.ln();
                let q = eps / classes as f64 + if k == target as usize { 1.0 - eps } else { 0.0 };
                loss -= q * log_p / rows as f64;
                grad.push((log_p.exp() - q) / rows as f64);
            }
        }
        (loss, grad)
    }

    #[test]
    fn smoothed_cross_entropy_is_pytorchs_on_both_paths_with_its_gradient() {
        let device = Default::default();
        let (rows, classes) = (5, 7);
        let logits =
            Tensor::<NdArray, 2>::random([rows, classes], Distribution::Normal(0.0, 2.0), &device);
        let values: Vec<f32> = logits.to_data().to_vec().unwrap();
        let targets = [0i64, 6, 3, 3, 1];
        for eps in [0.0, 0.1, 0.2] {
            let (loss, grad) = by_hand(&values, &targets, classes, eps);
            for kernels in [Kernels::Custom, Kernels::Burn] {
                let x = Tensor::<B, 2>::from_inner(logits.clone()).require_grad();
                let y = Tensor::<B, 1, Int>::from_ints(targets, &device);
                let out = kernels.smoothed_cross_entropy(x.clone(), y, eps as f32);
                let got = f64::from(out.clone().into_scalar());
                assert!(
                    (got - loss).abs() < 1e-5,
                    "{kernels:?} ε {eps}: {got} against {loss}"
                );
                let grads = out.backward();
                let got: Vec<f32> = x.grad(&grads).unwrap().to_data().to_vec().unwrap();
                for (g, want) in got.iter().zip(&grad) {
                    assert!(
                        (f64::from(*g) - want).abs() < 1e-6,
                        "{kernels:?} ε {eps}: {got:?}"
                    );
                }
            }
        }
    }
}
