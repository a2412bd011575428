//! One training step of the seed CNN (forward, softmax cross-entropy, backward, SGD update)
//! on data already resident on the device, with no host synchronization inside the step.

use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::prelude::*;
use burn::tensor::Distribution;
use cubenet_kernels::AutodiffKernelBackend;
use serde::Serialize;

use super::timing::{Timing, time_synced};
use crate::model::{KernelPath, SimpleCnnConfig};

/// A timed training step configuration and its result.
#[derive(Debug, Clone, Serialize)]
pub struct StepBench {
    pub model: String,
    pub kernels: KernelPath,
    pub batch: usize,
    pub filters: usize,
    pub timing: Timing,
}

/// Times the seed CNN's training step with `filters` filters on `batch` random images.
pub fn seed_cnn_step<B: AutodiffKernelBackend>(
    device: &B::Device,
    batch: usize,
    filters: usize,
    kernels: KernelPath,
    warmup: usize,
    repeats: usize,
) -> StepBench {
    B::seed(device, 0);
    let config = SimpleCnnConfig::new()
        .with_filters(filters)
        .with_kernels(kernels);
    let mut model = Some(
        config
            .init::<B>(device)
            .expect("the seed CNN geometry is valid"),
    );
    let images = Tensor::<B, 4>::random([batch, 1, 28, 28], Distribution::Normal(0.0, 1.0), device);
    let targets = Tensor::<B, 1, Int>::random([batch], Distribution::Uniform(0.0, 10.0), device);
    let loss_fn = CrossEntropyLossConfig::new().init(device);
    let mut optimizer = SgdConfig::new().init();
    let timing = time_synced::<B>(device, warmup, repeats, || {
        let current = model
            .take()
            .expect("the model is put back after every step");
        let loss = loss_fn.forward(current.forward(images.clone()), targets.clone());
        let grads = GradientsParams::from_grads(loss.backward(), &current);
        model = Some(optimizer.step(0.01, current, grads));
    });
    StepBench {
        model: "simple".into(),
        kernels,
        batch,
        filters,
        timing,
    }
}
