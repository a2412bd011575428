//! A fully connected layer, run either by cubenet's dense kernel or by Burn's `Linear`.

use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;
use cubenet_kernels::{KernelBackend, dense};

use super::KernelPath;

/// `x · W + b` over the last axis of a `[batch, inputs]` tensor. The parameters are a
/// Burn `Linear` (initialization and weight layout are Burn's; records nest it under
/// `linear`), so both kernel paths load the same records.
#[derive(Module, Debug)]
pub struct Dense<B: Backend> {
    linear: Linear<B>,
    #[module(skip)]
    kernels: KernelPath,
}

impl<B: Backend> Dense<B> {
    /// `features` = [inputs, outputs]; with a bias.
    pub fn new(features: [usize; 2], kernels: KernelPath, device: &B::Device) -> Self {
        Self {
            linear: LinearConfig::new(features[0], features[1]).init(device),
            kernels,
        }
    }
}

impl<B: KernelBackend> Dense<B> {
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        match self.kernels {
            KernelPath::Custom => dense(
                x,
                self.linear.weight.val(),
                self.linear.bias.as_ref().map(|bias| bias.val()),
            ),
            KernelPath::Burn => self.linear.forward(x),
        }
    }
}
