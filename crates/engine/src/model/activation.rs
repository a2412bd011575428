//! The hidden-layer activations of the MLPs.

use std::fmt;
use std::str::FromStr;

use burn::prelude::*;
use burn::tensor::activation;
use serde::{Deserialize, Serialize};

/// An element-wise nonlinearity.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub enum Activation {
    /// σ(x) = 1 / (1 + e^-x).
    Sigmoid,
    /// σ(g·x): a sigmoid whose slope at 0 is scaled by the gain `g`.
    SigmoidGain { gain: f64 },
    /// 2σ(x) − 1: a sigmoid stretched to (−1, 1).
    ScaledSigmoid,
    /// tanh(x).
    Tanh,
    /// max(0, x).
    Relu,
    /// x·Φ(x), Φ the standard normal CDF: exact, as PyTorch's default `GELU`, and
    /// differentiated exactly (Burn's own GELU backward on CubeCL is the tanh
    /// approximation's).
    Gelu,
    /// x·σ(x).
    Silu,
}

impl Activation {
    /// Applies the activation element-wise.
    pub fn forward<B: Backend, const D: usize>(&self, x: Tensor<B, D>) -> Tensor<B, D> {
        match *self {
            Activation::Sigmoid => activation::sigmoid(x),
            Activation::SigmoidGain { gain } => activation::sigmoid(x.mul_scalar(gain)),
            Activation::ScaledSigmoid => activation::sigmoid(x).mul_scalar(2.0).sub_scalar(1.0),
            Activation::Tanh => activation::tanh(x),
            Activation::Relu => activation::relu(x),
            Activation::Gelu => {
                let cdf = x
                    .clone()
                    .div_scalar(std::f64::consts::SQRT_2)
                    .erf()
                    .add_scalar(1.0);
                x * cdf.mul_scalar(0.5)
            }
            Activation::Silu => x.clone() * activation::sigmoid(x),
        }
    }
}

/// The command-line spelling: `sigmoid`, `sigmoid-gain:4`, `scaled-sigmoid`, `tanh`, `relu`, `gelu`,
/// `silu`.
impl fmt::Display for Activation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Activation::Sigmoid => f.write_str("sigmoid"),
            Activation::SigmoidGain { gain } => write!(f, "sigmoid-gain:{gain}"),
            Activation::ScaledSigmoid => f.write_str("scaled-sigmoid"),
            Activation::Tanh => f.write_str("tanh"),
            Activation::Relu => f.write_str("relu"),
            Activation::Gelu => f.write_str("gelu"),
            Activation::Silu => f.write_str("silu"),
        }
    }
}

/// Saved and read (config files, `config.json`) in the command-line spelling.
impl From<Activation> for String {
    fn from(activation: Activation) -> String {
        activation.to_string()
    }
}

impl TryFrom<String> for Activation {
    type Error = String;

    fn try_from(s: String) -> Result<Self, String> {
        s.parse()
    }
}

impl FromStr for Activation {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "sigmoid" => Activation::Sigmoid,
            "scaled-sigmoid" => Activation::ScaledSigmoid,
            "tanh" => Activation::Tanh,
            "relu" => Activation::Relu,
            "gelu" => Activation::Gelu,
            "silu" => Activation::Silu,
            _ => {
                let gain = s
                    .strip_prefix("sigmoid-gain:")
                    .and_then(|g| g.parse::<f64>().ok())
                    .filter(|g| g.is_finite() && *g > 0.0)
                    .ok_or_else(|| {
                        format!(
                            "unknown activation `{s}` (sigmoid, sigmoid-gain:G with G > 0, \
                             scaled-sigmoid, tanh, relu, gelu, silu)"
                        )
                    })?;
                Activation::SigmoidGain { gain }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::backend::NdArray;

    fn apply(activation: Activation, x: f32) -> f32 {
        let input = Tensor::<NdArray, 1>::from_floats([x], &Default::default());
        activation.forward(input).into_scalar()
    }

    #[test]
    fn values_match_their_formulas() {
        let sigma = |x: f32| 1.0 / (1.0 + (-x).exp());
        for x in [-2.5f32, -0.3, 0.0, 0.7, 3.0] {
            assert!((apply(Activation::Sigmoid, x) - sigma(x)).abs() < 1e-6);
            let gained = apply(Activation::SigmoidGain { gain: 4.0 }, x);
            assert!((gained - sigma(4.0 * x)).abs() < 1e-6);
            let scaled = apply(Activation::ScaledSigmoid, x);
            assert!((scaled - (2.0 * sigma(x) - 1.0)).abs() < 1e-6);
            assert!((apply(Activation::Tanh, x) - x.tanh()).abs() < 1e-6);
            assert_eq!(apply(Activation::Relu, x), x.max(0.0));
        }
    }

    #[test]
    fn command_line_spelling_round_trips() {
        for a in [
            Activation::Sigmoid,
            Activation::SigmoidGain { gain: 2.5 },
            Activation::ScaledSigmoid,
            Activation::Tanh,
            Activation::Relu,
        ] {
            assert_eq!(a.to_string().parse::<Activation>(), Ok(a));
        }
        for bad in ["sigmoid-gain:", "sigmoid-gain:-1", "softplus"] {
            assert!(bad.parse::<Activation>().is_err(), "{bad}");
        }
    }
}
