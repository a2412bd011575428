//! The seed CNN: conv 3x3 (1→d) → ReLU → 2x2 max-pool → linear (13·13·d → 10).

use burn::prelude::*;
use cubenet_kernels::KernelBackend;

use super::ModelError;
use super::conv_block::ConvBlock;
use super::dense::Dense;
use super::geometry::{check_nonzero, conv_output, pool_output};
use super::kernel_path::KernelPath;

const KERNEL: usize = 3;
const POOL: usize = 2;

/// Configuration of [`SimpleCnn`].
#[derive(Config, Debug)]
pub struct SimpleCnnConfig {
    /// Convolution filters `d`.
    #[config(default = 32)]
    pub filters: usize,
    /// Side of the square input images.
    #[config(default = 28)]
    pub image_size: usize,
    /// Output classes.
    #[config(default = 10)]
    pub num_classes: usize,
    /// Refuse an input whose conv output the 2x2 pool windows do not tile exactly.
    #[config(default = true)]
    pub exact_pooling: bool,
    /// Which implementation runs the conv·ReLU·pool block and the linear layer.
    #[config(default = "KernelPath::Custom")]
    pub kernels: KernelPath,
}

/// One convolution, one pool, one linear layer: the single-conv CNN.
#[derive(Module, Debug)]
pub struct SimpleCnn<B: Backend> {
    block: ConvBlock<B>,
    output: Dense<B>,
}

impl SimpleCnnConfig {
    /// Checks the geometry and initializes the weights on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<SimpleCnn<B>, ModelError> {
        check_nonzero("conv", "filters", [self.filters])?;
        check_nonzero("output", "classes", [self.num_classes])?;
        let input = [self.image_size; 2];
        let conv = conv_output("conv", input, [KERNEL; 2], [1, 1], [0, 0])?;
        let pooled = pool_output("pool", conv, [POOL; 2], [POOL; 2], self.exact_pooling)?;
        Ok(SimpleCnn {
            block: ConvBlock::new([1, self.filters], KERNEL, 0, POOL, self.kernels, device),
            output: Dense::new(
                [self.filters * pooled[0] * pooled[1], self.num_classes],
                self.kernels,
                device,
            ),
        })
    }
}

impl<B: Backend> SimpleCnn<B> {
    /// Which implementation runs the layers.
    pub fn kernels(&self) -> KernelPath {
        self.block.kernels()
    }
}

impl<B: KernelBackend> SimpleCnn<B> {
    /// Class logits `[n, classes]` for images `[n, 1, side, side]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        self.classify(self.features(images))
    }

    /// The conv·ReLU·pool block's output, flattened to `[n, pooled·pooled·d]`. Split from
    /// [`classify`](Self::classify) so that benchmarks can time each layer.
    pub fn features(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        self.block.forward(images).flatten(1, 3)
    }

    /// Class logits from the flattened features: the linear layer.
    pub fn classify(&self, features: Tensor<B, 2>) -> Tensor<B, 2> {
        self.output.forward(features)
    }
}
