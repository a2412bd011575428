//! conv → ReLU → max-pool, the building block of the CNNs, run either by cubenet's fused
//! kernel or by Burn's own ops; also the conv alone and conv → ReLU, for networks that pool
//! elsewhere or not at all.

use burn::nn::PaddingConfig2d;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::prelude::*;
use burn::tensor::activation::relu;
use cubenet_kernels::{ConvOptions2d, KernelBackend, PoolOptions2d, conv_relu_pool, conv2d};

use super::{Kernels, Size2};

/// What a [`ConvBlock`] applies after its convolution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AfterConv {
    /// Nothing: the raw convolution.
    Nothing,
    /// ReLU.
    Relu,
    /// ReLU, then a max-pool: one fused kernel on the custom path.
    ReluPool(PoolOptions2d),
}

/// A convolution (with a bias or without) followed by [`AfterConv`].
#[derive(Module, Debug)]
pub struct ConvBlock<B: Backend> {
    conv: Conv2d<B>,
    #[module(skip)]
    conv_options: ConvOptions2d,
    #[module(skip)]
    after: AfterConv,
    #[module(skip)]
    kernels: Kernels,
}

impl<B: Backend> ConvBlock<B> {
    /// `channels` = [in, out], `kernel`-sized filters with the stride and zero padding of
    /// `conv` (and a bias if `bias`), then `after`. Callers check the geometry first.
    #[allow(clippy::too_many_arguments)] // each is one setting of the convolution
    pub fn new(
        channels: [usize; 2],
        kernel: Size2,
        conv: ConvOptions2d,
        bias: bool,
        after: AfterConv,
        kernels: Kernels,
        device: &B::Device,
    ) -> Self {
        let [ph, pw] = conv.padding;
        let layer = Conv2dConfig::new(channels, kernel)
            .with_stride(conv.stride)
            .with_padding(PaddingConfig2d::Explicit(ph, pw, ph, pw))
            .with_bias(bias)
            .init(device);
        Self {
            conv: layer,
            conv_options: conv,
            after,
            kernels,
        }
    }

    /// Which implementation runs this block.
    pub fn kernels(&self) -> Kernels {
        self.kernels
    }
}

impl<B: KernelBackend> ConvBlock<B> {
    pub fn forward(&self, x: Tensor<B, 4>) -> Tensor<B, 4> {
        let weight = self.conv.weight.val();
        let bias = self.conv.bias.as_ref().map(|bias| bias.val());
        let conv = match (self.kernels, self.after) {
            // One pass that never stores the full-resolution map.
            (Kernels::Custom, AfterConv::ReluPool(pool)) => {
                return conv_relu_pool(x, weight, bias, self.conv_options, pool);
            }
            (Kernels::Custom, _) => conv2d(x, weight, bias, self.conv_options),
            (Kernels::Burn, _) => self.conv.forward(x),
        };
        match self.after {
            AfterConv::Nothing => conv,
            AfterConv::Relu => relu(conv),
            AfterConv::ReluPool(pool) => self.kernels.max_pool(relu(conv), pool),
        }
    }
}
