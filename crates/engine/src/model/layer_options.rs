//! The options of a CNN's layers as a run file gives them: a convolution's, batch norm's,
//! a global pool's, a residual block's shortcut and a dense layer's width.

use std::fmt;

use burn::prelude::*;
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

/// A convolution: `filters` square `kernel`×`kernel` filters (with a bias unless `bias =
/// false`), sliding by `stride`, over the input zero-padded by `padding` on each side.
#[derive(Config, Debug, Copy, PartialEq, Eq)]
pub struct ConvSpec {
    /// Output channels.
    pub filters: usize,
    /// Side of the square filters.
    #[config(default = 3)]
    pub kernel: usize,
    #[config(default = 1)]
    pub stride: usize,
    /// Zeros added on each side of both axes.
    #[config(default = 0)]
    pub padding: usize,
    /// Whether each filter adds a bias: a convolution followed by batch norm has no use
    /// for one, since the norm's shift takes its place.
    #[config(default = true)]
    pub bias: bool,
}

/// Batch normalization's settings, with PyTorch's meaning and defaults.
#[derive(Config, Debug, Copy, PartialEq)]
pub struct NormSpec {
    /// The weight of each batch in the running mean and variance.
    #[config(default = 0.1)]
    pub momentum: f64,
    /// Added to the variance before its square root.
    #[config(default = 1e-5)]
    pub eps: f64,
    /// Whether a learned scale and shift follow the normalization.
    #[config(default = true)]
    pub affine: bool,
}

/// What a global pool takes of each channel's whole map.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GlobalPool {
    Avg,
    Max,
}

/// How a residual block's input reaches its output, where it is added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Shortcut {
    /// The input itself: the block keeps its input's shape.
    #[default]
    Identity,
    /// A 1×1 convolution (no bias) with the block's stride, then batch norm: any change of
    /// channels and size.
    Conv,
    /// ResNet's option A: every `stride`-th pixel, the new channels zeros (half before the
    /// input's channels, half after); no weights.
    OptionA,
}

impl fmt::Display for Shortcut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Shortcut::Identity => "identity",
            Shortcut::Conv => "conv",
            Shortcut::OptionA => "option_a",
        })
    }
}

/// A dense layer's outputs: a number, or as many as the network has classes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Width {
    Units(usize),
    /// The class count: the logits layer, which must come last.
    Classes,
}

impl fmt::Display for Width {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Width::Units(units) => write!(f, "{units}"),
            Width::Classes => f.write_str("classes"),
        }
    }
}

const CLASSES: &str = "classes";

impl Serialize for Width {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match *self {
            Width::Units(units) => serializer.serialize_u64(units as u64),
            Width::Classes => serializer.serialize_str(CLASSES),
        }
    }
}

impl<'de> Deserialize<'de> for Width {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct WidthVisitor;

        impl Visitor<'_> for WidthVisitor {
            type Value = Width;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "a number of outputs or \"{CLASSES}\"")
            }

            fn visit_u64<E: de::Error>(self, units: u64) -> Result<Width, E> {
                usize::try_from(units)
                    .map(Width::Units)
                    .map_err(|_| E::invalid_value(de::Unexpected::Unsigned(units), &self))
            }

            // TOML integers arrive signed.
            fn visit_i64<E: de::Error>(self, units: i64) -> Result<Width, E> {
                u64::try_from(units)
                    .map_err(|_| E::invalid_value(de::Unexpected::Signed(units), &self))
                    .and_then(|units| self.visit_u64(units))
            }

            fn visit_str<E: de::Error>(self, text: &str) -> Result<Width, E> {
                if text == CLASSES {
                    Ok(Width::Classes)
                } else {
                    Err(E::invalid_value(de::Unexpected::Str(text), &self))
                }
            }
        }

        deserializer.deserialize_any(WidthVisitor)
    }
}
