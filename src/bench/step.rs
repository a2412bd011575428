//! One training step (forward, softmax cross-entropy, backward, SGD update) on a batch
//! already resident on the device, with no host synchronization inside the step.

use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{GradientsParams, Optimizer, SgdConfig};
use burn::prelude::*;
use burn::tensor::Distribution;
use cubenet_kernels::AutodiffKernelBackend;

use super::sweep::Point;
use super::timing::{Protocol, Timing, time_synced};
use crate::data::{IMAGE_SIDE, NUM_CLASSES};
use crate::model::{KernelPath, MnistModel};

/// Learning rate of the benchmarks' plain SGD (no momentum), as in `pytorch_reference.py`:
/// large enough that the one timed epoch visibly trains (its test accuracy is reported).
pub const BENCH_LR: f64 = 0.1;

/// Random images `[batch, 1, 28, 28]` and digits `[batch]`, created on `device`.
pub fn random_batch<B: Backend>(
    batch: usize,
    device: &B::Device,
) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
    let images = Tensor::random(
        [batch, 1, IMAGE_SIDE, IMAGE_SIDE],
        Distribution::Normal(0.0, 1.0),
        device,
    );
    let targets = Tensor::random(
        [batch],
        Distribution::Uniform(0.0, NUM_CLASSES as f64),
        device,
    );
    (images, targets)
}

/// A network at a sweep point, seeded, on `device`.
pub fn bench_model<B: AutodiffKernelBackend>(
    point: Point,
    kernels: KernelPath,
    device: &B::Device,
) -> MnistModel<B> {
    B::seed(device, 0);
    point
        .model
        .config(point.filters, kernels)
        .init(device)
        .expect("the benchmark networks have valid geometry")
}

/// Times the training step of `point`'s network on random data.
pub fn time_training_step<B: AutodiffKernelBackend>(
    device: &B::Device,
    point: Point,
    kernels: KernelPath,
    protocol: Protocol,
) -> Timing {
    let mut model = Some(bench_model::<B>(point, kernels, device));
    let (images, targets) = random_batch::<B>(point.batch, device);
    let loss_fn = CrossEntropyLossConfig::new().init(device);
    let mut optimizer = SgdConfig::new().init();
    time_synced::<B>(device, protocol, || {
        let current = model
            .take()
            .expect("the model is put back after every step");
        let loss = loss_fn.forward(current.forward(images.clone()), targets.clone());
        let grads = GradientsParams::from_grads(loss.backward(), &current);
        model = Some(optimizer.step(BENCH_LR, current, grads));
    })
}
