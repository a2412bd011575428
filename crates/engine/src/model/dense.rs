//! A fully connected layer, run either by cubenet's dense kernel or by Burn's matmul.

use burn::module::Param;
use burn::nn::LinearConfig;
use burn::prelude::*;
use burn::tensor::activation::relu;
use burn::tensor::module::linear;
use cubenet_kernels::{KernelBackend, dense, dense_relu};

use super::Kernels;

/// `x · Wᵀ + b` over the last axis of a `[batch, inputs]` tensor. The weight is stored
/// `[outputs, inputs]`, one row per output as PyTorch's and candle's `Linear` store it: the
/// dense kernels stream each output's weights as vectors, with no transpose in a step.
/// Initialized by Burn's `Linear` initializer (uniform in ±1/√inputs).
#[derive(Module, Debug)]
pub struct Dense<B: Backend> {
    weight: Param<Tensor<B, 2>>,
    bias: Param<Tensor<B, 1>>,
    #[module(skip)]
    kernels: Kernels,
}

impl<B: Backend> Dense<B> {
    /// `features` = [inputs, outputs]; with a bias.
    pub fn new(features: [usize; 2], kernels: Kernels, device: &B::Device) -> Self {
        let [inputs, outputs] = features;
        let init = LinearConfig::new(inputs, outputs).initializer;
        Self {
            weight: init.init_with([outputs, inputs], Some(inputs), Some(outputs), device),
            bias: init.init_with([outputs], Some(inputs), Some(outputs), device),
            kernels,
        }
    }

    /// The weight, `[outputs, inputs]`.
    pub fn weight(&self) -> Tensor<B, 2> {
        self.weight.val()
    }

    /// The bias, `[outputs]`.
    pub fn bias(&self) -> Tensor<B, 1> {
        self.bias.val()
    }
}

impl<B: KernelBackend> Dense<B> {
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let (weight, bias) = (self.weight.val(), self.bias.val());
        match self.kernels {
            Kernels::Custom => dense(x, weight, Some(bias)),
            Kernels::Burn => linear(x, weight.transpose(), Some(bias)),
        }
    }

    /// ReLU of [`Dense::forward`]; on the custom path the dense kernels apply it (and pass
    /// its gradient), with no kernels of its own.
    pub fn forward_relu(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let (weight, bias) = (self.weight.val(), self.bias.val());
        match self.kernels {
            Kernels::Custom => dense_relu(x, weight, Some(bias)),
            Kernels::Burn => relu(linear(x, weight.transpose(), Some(bias))),
        }
    }
}
