//! The pools of a CNN that are layers of their own: a max-pool that follows no conv·ReLU
//! (those are fused into the convolution), average pools, and global pools.

use burn::prelude::*;
use burn::tensor::module::avg_pool2d;
use cubenet_kernels::{KernelBackend, PoolOptions2d};

use super::{GlobalPool, Kernels};

/// A max-pool on its own: no parameters, only its windows.
#[derive(Module, Clone, Debug)]
pub struct MaxPool {
    pool: PoolOptions2d,
    kernels: Kernels,
}

impl MaxPool {
    pub fn new(window: usize, stride: usize, kernels: Kernels) -> Self {
        Self {
            pool: pool_options(window, stride),
            kernels,
        }
    }

    pub fn forward<B: KernelBackend>(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        self.kernels.max_pool(x, self.pool)
    }
}

/// `window`×`window` windows moved by `stride`, unpadded.
pub fn pool_options(window: usize, stride: usize) -> PoolOptions2d {
    PoolOptions2d::new([window; 2], [stride; 2], [0, 0])
}

/// The mean of each window (windows as a max-pool places them; no padding, so every
/// window holds `window²` values).
#[derive(Module, Clone, Debug)]
pub struct AvgPool {
    window: usize,
    stride: usize,
}

impl AvgPool {
    pub fn new(window: usize, stride: usize) -> Self {
        Self { window, stride }
    }

    pub fn forward<B: Backend>(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        avg_pool2d(x, [self.window; 2], [self.stride; 2], [0, 0], true, false)
    }
}

/// Each channel's whole map to one value: `[n, c, h, w]` to `[n, c, 1, 1]`.
#[derive(Module, Clone, Debug)]
pub struct GlobalPooling {
    pool: GlobalPool,
}

impl GlobalPooling {
    pub fn new(pool: GlobalPool) -> Self {
        Self { pool }
    }

    pub fn forward<B: Backend>(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        match self.pool {
            GlobalPool::Avg => x.mean_dim(3).mean_dim(2),
            GlobalPool::Max => x.max_dim(3).max_dim(2),
        }
    }
}
