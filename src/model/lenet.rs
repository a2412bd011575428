//! A LeNet-style CNN: two conv → ReLU → 2x2 max-pool blocks, then two linear layers.

use burn::prelude::*;
use cubenet_kernels::KernelBackend;

use super::ModelError;
use super::conv_block::ConvBlock;
use super::dense::Dense;
use super::geometry::{check_nonzero, conv_output, pool_output};
use super::kernel_path::KernelPath;

const KERNEL: usize = 5;
const POOL: usize = 2;

/// Configuration of [`LeNet`].
#[derive(Config, Debug)]
pub struct LeNetConfig {
    /// Filters of the first and second convolution.
    #[config(default = "[32, 64]")]
    pub channels: [usize; 2],
    /// Width of the hidden linear layer.
    #[config(default = 128)]
    pub hidden: usize,
    /// Side of the square input images.
    #[config(default = 28)]
    pub image_size: usize,
    /// Output classes.
    #[config(default = 10)]
    pub num_classes: usize,
    /// Refuse inputs whose conv outputs the 2x2 pool windows do not tile exactly.
    #[config(default = true)]
    pub exact_pooling: bool,
    /// Which implementation runs the conv·ReLU·pool blocks and the linear layers.
    #[config(default = "KernelPath::Custom")]
    pub kernels: KernelPath,
}

/// conv 5x5 (padding 2) → pool → conv 5x5 → pool → linear → ReLU → linear.
#[derive(Module, Debug)]
pub struct LeNet<B: Backend> {
    block1: ConvBlock<B>,
    block2: ConvBlock<B>,
    hidden: Dense<B>,
    output: Dense<B>,
}

impl LeNetConfig {
    /// Checks the geometry and initializes the weights on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<LeNet<B>, ModelError> {
        let [c1, c2] = self.channels;
        check_nonzero("conv1", "filters", [c1])?;
        check_nonzero("conv2", "filters", [c2])?;
        check_nonzero("hidden", "width", [self.hidden])?;
        check_nonzero("output", "classes", [self.num_classes])?;
        let pool =
            |layer, input| pool_output(layer, input, [POOL; 2], [POOL; 2], self.exact_pooling);
        let size = conv_output("conv1", [self.image_size; 2], [KERNEL; 2], [1, 1], [2, 2])?;
        let size = pool("pool1", size)?;
        let size = conv_output("conv2", size, [KERNEL; 2], [1, 1], [0, 0])?;
        let size = pool("pool2", size)?;
        Ok(LeNet {
            block1: ConvBlock::new([1, c1], KERNEL, 2, POOL, self.kernels, device),
            block2: ConvBlock::new([c1, c2], KERNEL, 0, POOL, self.kernels, device),
            hidden: Dense::new([c2 * size[0] * size[1], self.hidden], self.kernels, device),
            output: Dense::new([self.hidden, self.num_classes], self.kernels, device),
        })
    }
}

impl<B: Backend> LeNet<B> {
    /// Which implementation runs the layers.
    pub fn kernels(&self) -> KernelPath {
        self.block1.kernels()
    }
}

impl<B: KernelBackend> LeNet<B> {
    /// Class logits `[n, classes]` for images `[n, 1, side, side]`.
    pub fn forward(&self, images: Tensor<B, 4>) -> Tensor<B, 2> {
        let x = self.block2.forward(self.block1.forward(images));
        let x = self.hidden.forward_relu(x.flatten(1, 3));
        self.output.forward(x)
    }
}
