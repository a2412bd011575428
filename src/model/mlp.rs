//! A fully connected network with a configurable stack of hidden layers.

use burn::nn::{Linear, LinearConfig};
use burn::prelude::*;

use super::geometry::check_nonzero;
use super::{Activation, ModelError};

/// Configuration of [`Mlp`].
#[derive(Config, Debug)]
pub struct MlpConfig {
    /// Input features.
    pub inputs: usize,
    /// Width of each hidden layer, input side first; empty for a linear model.
    pub hidden: Vec<usize>,
    /// Outputs (classes, or regression targets).
    pub outputs: usize,
    /// Nonlinearity after every hidden layer.
    #[config(default = "Activation::Relu")]
    pub activation: Activation,
}

/// Linear layers with an activation between them; the last layer's output is left raw
/// (logits or regression values).
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    layers: Vec<Linear<B>>,
    #[module(skip)]
    activation: Activation,
}

impl MlpConfig {
    /// Checks the sizes and initializes the weights on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Mlp<B>, ModelError> {
        check_nonzero("input", "features", [self.inputs])?;
        check_nonzero("output", "outputs", [self.outputs])?;
        for (i, &width) in self.hidden.iter().enumerate() {
            check_nonzero(&format!("hidden{}", i + 1), "width", [width])?;
        }
        let widths: Vec<usize> = std::iter::once(self.inputs)
            .chain(self.hidden.iter().copied())
            .chain(std::iter::once(self.outputs))
            .collect();
        let layers = widths
            .windows(2)
            .map(|pair| LinearConfig::new(pair[0], pair[1]).init(device))
            .collect();
        Ok(Mlp {
            layers,
            activation: self.activation,
        })
    }
}

impl<B: Backend> Mlp<B> {
    /// Outputs `[n, outputs]` for inputs `[n, inputs]`.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let last = self.layers.len() - 1;
        self.layers.iter().enumerate().fold(x, |x, (i, layer)| {
            let y = layer.forward(x);
            if i < last {
                self.activation.forward(y)
            } else {
                y
            }
        })
    }
}
