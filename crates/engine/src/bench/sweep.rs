//! What a backend benchmark measures: the networks, the sizes of the batch and filter sweeps,
//! and how the slow CPU points are capped.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::block_shape::BlockShape;
use super::timing::Protocol;
use super::variant::Variant;
use crate::data::{IMAGE_PIXELS, IMAGE_SIDE, NUM_CLASSES};
use crate::model::{
    Activation, CnnConfig, ConvSpec, ImageModelConfig, Kernels, LayerSpec, LeNetConfig, MlpConfig,
    Precision, SimpleCnnConfig, Width,
};

/// Hidden widths of the benchmark's MLP (784 → 256 → 128 → 10, ReLU).
pub const MLP_HIDDEN: [usize; 2] = [256, 128];

/// A network the benchmark trains.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum BenchModel {
    /// The single-conv CNN (conv 3x3 1→d, ReLU, pool, linear); its size is the filter count d.
    Simple,
    /// The LeNet-style CNN at its default widths.
    Lenet,
    /// The MLP 784-256-128-10.
    Mlp,
    /// The CIFAR-shaped CNN: 3x32x32 images, three blocks of conv 3x3 (padding 1), ReLU and
    /// 2x2 max-pool with 64, 128 and 256 filters, then dense to 10 classes.
    Cifar,
}

/// Filters of the CIFAR-shaped CNN's three conv blocks, and their kernel and padding.
pub const CIFAR_FILTERS: [usize; 3] = [64, 128, 256];
const CIFAR_KERNEL: usize = 3;
const CIFAR_PADDING: usize = 1;

impl BenchModel {
    /// The network's configuration; `filters` only matters for [`BenchModel::Simple`].
    pub fn config(
        self,
        filters: Option<usize>,
        kernels: Kernels,
        precision: Precision,
    ) -> ImageModelConfig {
        match self {
            BenchModel::Simple => ImageModelConfig::Simple(
                SimpleCnnConfig::new()
                    .with_filters(filters.unwrap_or(SimpleCnnConfig::new().network.filters))
                    .with_kernels(kernels)
                    .with_precision(precision),
            ),
            BenchModel::Lenet => ImageModelConfig::Lenet(
                LeNetConfig::new()
                    .with_kernels(kernels)
                    .with_precision(precision),
            ),
            BenchModel::Mlp => ImageModelConfig::Mlp(
                MlpConfig::new(IMAGE_PIXELS, MLP_HIDDEN.to_vec(), NUM_CLASSES)
                    .with_activation(Activation::Relu),
            ),
            BenchModel::Cifar => {
                let mut layers: Vec<LayerSpec> = CIFAR_FILTERS
                    .iter()
                    .flat_map(|&filters| {
                        [
                            LayerSpec::Conv(
                                ConvSpec::new(filters)
                                    .with_kernel(CIFAR_KERNEL)
                                    .with_padding(CIFAR_PADDING),
                            ),
                            LayerSpec::Relu,
                            LayerSpec::pool(2),
                        ]
                    })
                    .collect();
                layers.push(LayerSpec::Dense(Width::Classes));
                ImageModelConfig::Cnn(
                    CnnConfig::new(self.input(), NUM_CLASSES, layers.into())
                        .with_kernels(kernels)
                        .with_precision(precision),
                )
            }
        }
    }

    /// Every network, in table order.
    pub const ALL: [BenchModel; 4] = [
        BenchModel::Simple,
        BenchModel::Lenet,
        BenchModel::Mlp,
        BenchModel::Cifar,
    ];

    /// `[channels, height, width]` of the network's images: MNIST's, or CIFAR's 3x32x32.
    pub fn input(self) -> [usize; 3] {
        match self {
            BenchModel::Cifar => [3, 32, 32],
            BenchModel::Simple | BenchModel::Lenet | BenchModel::Mlp => [1, IMAGE_SIDE, IMAGE_SIDE],
        }
    }

    /// The CIFAR-shaped network's conv·ReLU·pool blocks, in order.
    pub fn cifar_blocks() -> Vec<BlockShape> {
        let mut input = BenchModel::Cifar.input();
        CIFAR_FILTERS
            .iter()
            .map(|&filters| {
                let block = BlockShape {
                    input,
                    filters,
                    kernel: CIFAR_KERNEL,
                    padding: CIFAR_PADDING,
                };
                input = block.output();
                block
            })
            .collect()
    }

    /// Whether the filter count d is one of the network's sizes.
    pub fn has_filters(self) -> bool {
        self == BenchModel::Simple
    }
}

impl fmt::Display for BenchModel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The command-line name, which the serde attributes spell the same way.
        let value = clap::ValueEnum::to_possible_value(self).expect("no variant is skipped");
        f.write_str(value.get_name())
    }
}

/// One measured configuration: a network at a batch size (and filter count).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Point {
    pub model: BenchModel,
    pub batch: usize,
    pub filters: Option<usize>,
}

impl fmt::Display for Point {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.filters {
            Some(d) => write!(f, "{} d={d} batch={}", self.model, self.batch),
            None => write!(f, "{} batch={}", self.model, self.batch),
        }
    }
}

/// The sizes to sweep: every model over `batches` (the single-conv CNN at `batch_sweep_filters`
/// filters), and the single-conv CNN over `filters` at `filter_sweep_batch`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sweep {
    pub models: Vec<BenchModel>,
    pub batches: Vec<usize>,
    pub batch_sweep_filters: usize,
    pub filters: Vec<usize>,
    pub filter_sweep_batch: usize,
}

impl Default for Sweep {
    /// The standard sweeps: batch ∈ {100, 250, 500, 1000} at d = 256, d ∈ {32, 64, 128, 256}
    /// at batch 1000.
    fn default() -> Self {
        Sweep {
            models: vec![BenchModel::Simple, BenchModel::Lenet, BenchModel::Mlp],
            batches: vec![100, 250, 500, 1000],
            batch_sweep_filters: 256,
            filters: vec![32, 64, 128, 256],
            filter_sweep_batch: 1000,
        }
    }
}

impl Sweep {
    /// Every point once, in table order.
    pub fn points(&self) -> Vec<Point> {
        let mut points: Vec<Point> = self
            .models
            .iter()
            .flat_map(|&model| {
                let by_batch = self.batches.iter().map(move |&batch| Point {
                    model,
                    batch,
                    filters: model.has_filters().then_some(self.batch_sweep_filters),
                });
                let by_filters = self
                    .filters
                    .iter()
                    .filter(move |_| model.has_filters())
                    .map(move |&d| Point {
                        model,
                        batch: self.filter_sweep_batch,
                        filters: Some(d),
                    });
                by_batch.chain(by_filters)
            })
            .collect();
        points.sort();
        points.dedup();
        points
    }
}

/// A whole benchmark: the sweep, the protocols, and the limits on CPU variants.
#[derive(Debug, Clone)]
pub struct BenchPlan {
    pub sweep: Sweep,
    /// Protocol of GPU points (at least 20 timed steps, so a median is stable).
    pub gpu: Protocol,
    /// Protocol of CPU points, which can take seconds per step.
    pub cpu: Protocol,
    /// CPU variants skip points with a larger batch.
    pub cpu_max_batch: Option<usize>,
    /// CPU variants skip points with more filters.
    pub cpu_max_filters: Option<usize>,
    /// Filter counts of the single-conv CNN whose per-phase breakdown is measured (GPU variants,
    /// at `sweep.filter_sweep_batch`).
    pub phase_filters: Vec<usize>,
}

impl BenchPlan {
    /// The protocol `variant` is timed with.
    pub fn protocol(&self, variant: Variant) -> Protocol {
        if variant.is_cpu() { self.cpu } else { self.gpu }
    }

    /// The points `variant` measures, after the CPU caps.
    pub fn points(&self, variant: Variant) -> Vec<Point> {
        let within = |value: Option<usize>, cap: Option<usize>| match (value, cap) {
            (Some(value), Some(cap)) => value <= cap,
            _ => true,
        };
        self.sweep
            .points()
            .into_iter()
            .filter(|p| {
                !variant.is_cpu()
                    || (within(Some(p.batch), self.cpu_max_batch)
                        && within(p.filters, self.cpu_max_filters))
            })
            .collect()
    }

    /// The seed-CNN points whose phases `variant` breaks down.
    pub fn phase_points(&self, variant: Variant) -> Vec<Point> {
        if variant.is_cpu() || !self.sweep.models.contains(&BenchModel::Simple) {
            return Vec::new();
        }
        self.phase_filters
            .iter()
            .map(|&d| Point {
                model: BenchModel::Simple,
                batch: self.sweep.filter_sweep_batch,
                filters: Some(d),
            })
            .collect()
    }
}
