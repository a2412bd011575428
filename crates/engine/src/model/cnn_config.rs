//! A CNN's configuration: its input, classes and layers, and those layers as the steps
//! every pass over the network walks (residual blocks opened, fused layers grouped).

use std::fmt;

use burn::prelude::*;
use cubenet_kernels::Precision;

use super::{Kernels, LayerSpec, LayerSpecs, Shortcut};

/// Configuration of [`Cnn`].
#[derive(Config, Debug)]
pub struct CnnConfig {
    /// Input images: `[channels, height, width]`.
    pub input: [usize; 3],
    /// Output classes: the width of `dense = "classes"`.
    pub classes: usize,
    /// The layers, input side first; the last is `dense = "classes"`.
    pub layers: LayerSpecs,
    /// Which implementation runs the convolutions, pools and dense layers.
    #[config(default = "Kernels::Custom")]
    pub kernels: Kernels,
    /// How cubenet's kernels multiply in the convolutions (`tf32`, `bf16`: on the tensor
    /// cores).
    #[config(default = "Precision::Fp32")]
    pub precision: Precision,
}

/// One step of a CNN with its residual blocks opened.
#[derive(Debug, Clone, PartialEq)]
pub enum Step {
    Layer(LayerSpec),
    /// A residual block starts: its input is kept for the shortcut.
    Fork(Shortcut),
    /// A residual block ends: the shortcut of the kept input is added.
    Join(Shortcut),
}

impl fmt::Display for Step {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Step::Layer(layer) => layer.fmt(f),
            Step::Fork(shortcut) => write!(f, "residual, shortcut {shortcut}"),
            Step::Join(shortcut) => write!(f, "add the {shortcut} shortcut"),
        }
    }
}

/// `layers` as steps, each with its position as a run file lists it: `3`, and `3.2` for
/// the second layer of the residual block at 3 (whose join is `3` again).
pub fn steps(layers: &[LayerSpec]) -> Vec<(String, Step)> {
    fn open(layers: &[LayerSpec], prefix: &str, steps: &mut Vec<(String, Step)>) {
        for (index, layer) in layers.iter().enumerate() {
            let position = format!("{prefix}{}", index + 1);
            match layer {
                LayerSpec::Residual(block) => {
                    steps.push((position.clone(), Step::Fork(block.shortcut)));
                    open(&block.layers, &format!("{position}."), steps);
                    steps.push((position, Step::Join(block.shortcut)));
                }
                layer => steps.push((position, Step::Layer(layer.clone()))),
            }
        }
    }
    let mut steps = Vec::new();
    open(layers, "", &mut steps);
    steps
}

/// How many steps from `index` on run as one module: conv → ReLU (→ max-pool) and
/// dense → ReLU are fused, every other step is a module of its own.
pub(super) fn fused_len(steps: &[(String, Step)], index: usize) -> usize {
    let layer = |offset| match steps.get(index + offset) {
        Some((_, Step::Layer(layer))) => Some(layer),
        _ => None,
    };
    match (layer(0), layer(1), layer(2)) {
        (Some(LayerSpec::Conv(_)), Some(LayerSpec::Relu), Some(LayerSpec::Pool { .. })) => 3,
        (Some(LayerSpec::Conv(_) | LayerSpec::Dense(_)), Some(LayerSpec::Relu), _) => 2,
        _ => 1,
    }
}
