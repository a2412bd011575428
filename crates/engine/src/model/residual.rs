//! The two ends of a residual block inside a [`Cnn`](super::Cnn)'s layer list: the fork that
//! keeps the block's input, and the join that adds the input's shortcut to the block's
//! output. Kept flat in the list (not a module holding its layers) so that the block's
//! layers fuse as any others do and a network's record has no nesting.

use burn::prelude::*;
use burn::tensor::module::avg_pool2d;
use cubenet_kernels::{ConvOptions2d, KernelBackend, Precision};

use super::{AfterConv, BatchNorm, ConvBlock, Kernels, NormSpec, Shortcut};

/// The stride by which a block turns maps `from` into maps `to` (`[c, h, w]`), as a 1×1
/// window takes every stride-th pixel; `None` where no stride does.
pub fn shortcut_stride(from: [usize; 3], to: [usize; 3]) -> Option<usize> {
    let [_, h, w] = from;
    let [_, to_h, to_w] = to;
    (1..=h.max(w)).find(|s| (h - 1) / s + 1 == to_h && (w - 1) / s + 1 == to_w)
}

/// Where a residual block starts: its input is kept for the [`Join`].
#[derive(Module, Clone, Debug)]
pub struct Fork {
    shortcut: Shortcut,
}

impl Fork {
    pub fn new(shortcut: Shortcut) -> Self {
        Self { shortcut }
    }
}

/// Where a residual block ends: the shortcut of the block's kept input, added to its
/// layers' output.
#[derive(Module, Debug)]
pub struct Join<B: Backend> {
    /// The 1×1 convolution and batch norm of a `conv` shortcut.
    projection: Option<Projection<B>>,
    #[module(skip)]
    shortcut: Shortcut,
    #[module(skip)]
    stride: usize,
    /// The zero channels an `option_a` shortcut puts before and after the input's.
    #[module(skip)]
    padding: [usize; 2],
}

#[derive(Module, Debug)]
pub struct Projection<B: Backend> {
    conv: ConvBlock<B>,
    norm: BatchNorm<B>,
}

impl<B: Backend> Join<B> {
    /// The join of a block from maps `from` to maps `to` (`[c, h, w]`, checked to fit).
    pub fn new(
        shortcut: Shortcut,
        [from, to]: [[usize; 3]; 2],
        kernels: Kernels,
        precision: Precision,
        device: &B::Device,
    ) -> Self {
        let stride = shortcut_stride(from, to).expect("the summary checked the stride");
        let projection = (shortcut == Shortcut::Conv).then(|| Projection {
            conv: ConvBlock::new(
                [from[0], to[0]],
                [1, 1],
                ConvOptions2d::new([stride; 2], [0, 0]).with_precision(precision),
                false,
                AfterConv::Nothing,
                kernels,
                device,
            ),
            norm: BatchNorm::new(to[0], NormSpec::new(), device),
        });
        let added = to[0].saturating_sub(from[0]);
        Self {
            projection,
            shortcut,
            stride,
            padding: [added / 2, added - added / 2],
        }
    }
}

impl<B: KernelBackend> Join<B> {
    /// `output` plus the shortcut of `input`.
    pub fn forward(&self, input: Tensor<B, 4>, output: Tensor<B, 4>) -> Tensor<B, 4> {
        let shortcut = match (&self.projection, self.shortcut) {
            (Some(projection), _) => projection.norm.forward(projection.conv.forward(input)),
            (None, Shortcut::OptionA) => {
                let input = match self.stride {
                    1 => input,
                    s => avg_pool2d(input, [1, 1], [s, s], [0, 0], true, false),
                };
                let [n, _, h, w] = input.dims();
                let device = input.device();
                let zeros =
                    |channels| (channels > 0).then(|| Tensor::zeros([n, channels, h, w], &device));
                let [before, after] = self.padding.map(zeros);
                let parts: Vec<_> = before.into_iter().chain([input]).chain(after).collect();
                Tensor::cat(parts, 1)
            }
            (None, _) => input,
        };
        output + shortcut
    }
}
