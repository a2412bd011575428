//! conv → ReLU → max-pool, the building block of both CNNs, run either by cubenet's fused
//! kernel or by Burn's own ops.

use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;
use burn::tensor::module::max_pool2d;
use cubenet_kernels::{ConvOptions2d, KernelBackend, PoolOptions2d, conv_relu_pool};

use super::KernelPath;

/// A convolution with ReLU and max-pool; stride 1, square kernel and pool.
#[derive(Module, Debug)]
pub struct ConvBlock<B: Backend> {
    conv: Conv2d<B>,
    #[module(skip)]
    conv_options: ConvOptions2d,
    #[module(skip)]
    pool: PoolOptions2d,
    #[module(skip)]
    kernels: KernelPath,
}

impl<B: Backend> ConvBlock<B> {
    /// `channels` = [in, out]; `kernel`×`kernel` filters with `padding`; `pool`×`pool`
    /// windows with stride `pool`. Callers check the geometry first.
    pub fn new(
        channels: [usize; 2],
        kernel: usize,
        padding: usize,
        pool: usize,
        kernels: KernelPath,
        device: &B::Device,
    ) -> Self {
        let conv = Conv2dConfig::new(channels, [kernel; 2])
            .with_padding(PaddingConfig2d::Explicit(
                padding, padding, padding, padding,
            ))
            .init(device);
        Self {
            conv,
            conv_options: ConvOptions2d::new([1, 1], [padding; 2]),
            pool: PoolOptions2d::new([pool; 2], [pool; 2], [0, 0]),
            kernels,
        }
    }
}

impl<B: Backend> ConvBlock<B> {
    /// Which implementation runs this block.
    pub fn kernels(&self) -> KernelPath {
        self.kernels
    }
}

impl<B: KernelBackend> ConvBlock<B> {
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        match self.kernels {
            KernelPath::Custom => conv_relu_pool(
                x,
                self.conv.weight.val(),
                self.conv.bias.as_ref().map(|bias| bias.val()),
                self.conv_options,
                self.pool,
            ),
            KernelPath::Burn => {
                let PoolOptions2d {
                    kernel,
                    stride,
                    padding,
                } = self.pool;
                max_pool2d(
                    relu(self.conv.forward(x)),
                    kernel,
                    stride,
                    padding,
                    [1, 1],
                    false,
                )
            }
        }
    }
}
