//! A fully connected network with a configurable stack of hidden layers.

use burn::prelude::*;
use cubenet_kernels::KernelBackend;

use super::geometry::check_nonzero;
use super::{Activation, Dense, Kernels, ModelError, NetworkSize, Sequential, TorchLayer};

/// Configuration of [`Mlp`].
#[derive(Config, Debug)]
pub struct MlpConfig {
    /// Input features.
    pub inputs: usize,
    /// Width of each hidden layer, input side first; empty for a linear model.
    pub hidden: Vec<usize>,
    /// Outputs (classes, or regression targets).
    pub outputs: usize,
    /// Nonlinearity after every hidden layer (unless `layer_activations` names each).
    #[config(default = "Activation::Relu")]
    pub activation: Activation,
    /// One nonlinearity per hidden layer, input side first; empty means `activation` for
    /// all of them.
    #[config(default = "Vec::new()")]
    pub layer_activations: Vec<Activation>,
    /// Which implementation runs the layers: cubenet's dense kernels or Burn's matmul.
    #[config(default = "Kernels::Custom")]
    pub kernels: Kernels,
}

/// Dense layers with an activation between them; the last layer's output is left raw
/// (logits or regression values).
#[derive(Module, Debug)]
pub struct Mlp<B: Backend> {
    /// The layers, input side first. Their weights are `[outputs, inputs]`; the field was
    /// `layers` when they were Burn `Linear`s, stored `[inputs, outputs]`, so a record saved
    /// then fails to load (missing field `dense`) instead of loading transposed.
    dense: Vec<Dense<B>>,
    /// The nonlinearity after each hidden layer.
    #[module(skip)]
    activations: Vec<Activation>,
}

impl MlpConfig {
    /// Checks the sizes; returns the activation of each hidden layer.
    pub fn check(&self) -> Result<Vec<Activation>, ModelError> {
        check_nonzero("input", "features", [self.inputs])?;
        check_nonzero("output", "outputs", [self.outputs])?;
        for (i, &width) in self.hidden.iter().enumerate() {
            check_nonzero(&format!("hidden{}", i + 1), "width", [width])?;
        }
        match self.layer_activations.len() {
            0 => Ok(vec![self.activation; self.hidden.len()]),
            n if n == self.hidden.len() => Ok(self.layer_activations.clone()),
            given => Err(ModelError::ActivationCount {
                given,
                hidden: self.hidden.len(),
            }),
        }
    }

    /// The MLP as a PyTorch `nn.Sequential`: `Linear` layers with the activations between
    /// them, after a `Flatten` when `flatten` (images); `module` is the cubenet path of the
    /// dense layers (`dense` in an image model, `mlp.dense` in a tabular net).
    pub fn sequential(&self, module: &str, flatten: bool) -> Result<Sequential, ModelError> {
        let activations = self.check()?;
        let mut sequential = Sequential::default();
        if flatten {
            sequential.push(TorchLayer::Flatten, None);
        }
        let widths = self.widths();
        for (index, pair) in widths.windows(2).enumerate() {
            let linear = TorchLayer::Linear {
                in_features: pair[0],
                out_features: pair[1],
            };
            sequential.push(linear, Some(format!("{module}.{index}")));
            if let Some(&activation) = activations.get(index) {
                sequential.push(TorchLayer::activation(activation), None);
            }
        }
        Ok(sequential)
    }

    /// Its parameters and the values a row passes through it.
    pub fn size(&self) -> NetworkSize {
        NetworkSize::of_widths(&self.widths())
    }

    /// Inputs, hidden widths, outputs: each layer reads one and writes the next.
    fn widths(&self) -> Vec<usize> {
        std::iter::once(self.inputs)
            .chain(self.hidden.iter().copied())
            .chain(std::iter::once(self.outputs))
            .collect()
    }

    /// Checks the sizes and initializes the weights on `device`.
    pub fn init<B: Backend>(&self, device: &B::Device) -> Result<Mlp<B>, ModelError> {
        let activations = self.check()?;
        let dense = self
            .widths()
            .windows(2)
            .map(|pair| Dense::new([pair[0], pair[1]], self.kernels, device))
            .collect();
        Ok(Mlp { dense, activations })
    }
}

impl<B: Backend> Mlp<B> {
    /// The layers, input side first.
    pub fn layers(&self) -> &[Dense<B>] {
        &self.dense
    }
}

impl<B: KernelBackend> Mlp<B> {
    /// Outputs `[n, outputs]` for inputs `[n, inputs]`.
    pub fn forward(&self, x: Tensor<B, 2>) -> Tensor<B, 2> {
        let (output, hidden) = self.dense.split_last().expect("an MLP has a layer");
        let x = hidden
            .iter()
            .zip(&self.activations)
            .fold(x, |x, (layer, &activation)| match activation {
                // Inside the dense kernels, gradient included.
                Activation::Relu => layer.forward_relu(x),
                other => other.forward(layer.forward(x)),
            });
        output.forward(x)
    }
}
