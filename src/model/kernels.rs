//! The choice between cubenet's kernels and Burn's ops inside a network.

use burn::nn::loss::CrossEntropyLossConfig;
use burn::prelude::*;
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

    /// Max-pool of `x`: cubenet's pool kernel (with its argmax kept for the backward) on
    /// the custom path, Burn's `max_pool2d` on Burn's.
    pub fn max_pool<B: KernelBackend>(self, x: Tensor<B, 4>, pool: PoolOptions2d) -> Tensor<B, 4> {
        match self {
            Kernels::Custom => cubenet_kernels::max_pool2d(x, pool),
            Kernels::Burn => max_pool2d(x, pool.kernel, pool.stride, pool.padding, [1, 1], false),
        }
    }
}
