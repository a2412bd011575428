//! The shape of one image's features between two layers of a network.

use std::fmt;

/// One image's activations between two layers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeatureShape {
    /// Feature maps `[channels, height, width]`.
    Maps([usize; 3]),
    /// Features, from the first dense layer on.
    Flat(usize),
}

impl FeatureShape {
    /// Values per image: what a dense layer flattens the maps into.
    pub fn values(self) -> usize {
        match self {
            FeatureShape::Maps([c, h, w]) => c * h * w,
            FeatureShape::Flat(n) => n,
        }
    }

    /// What a convolution reads and batch normalization normalizes over: the channels of
    /// maps, or the features.
    pub fn features(self) -> usize {
        match self {
            FeatureShape::Maps([c, ..]) => c,
            FeatureShape::Flat(n) => n,
        }
    }
}

impl fmt::Display for FeatureShape {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FeatureShape::Maps([c, h, w]) => write!(f, "{c}x{h}x{w}"),
            FeatureShape::Flat(n) => write!(f, "{n}"),
        }
    }
}
