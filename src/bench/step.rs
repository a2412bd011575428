//! One training step (forward, softmax cross-entropy, backward, SGD update) on a batch
//! already resident on the device, with no host synchronization inside the step.

use burn::nn::loss::{CrossEntropyLoss, CrossEntropyLossConfig};
use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{GradientsParams, Optimizer, Sgd, SgdConfig};
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

/// The benchmarks' training step: softmax cross-entropy and plain SGD at [`BENCH_LR`].
pub struct SgdStep<B: AutodiffKernelBackend> {
    loss: CrossEntropyLoss<B>,
    optimizer: OptimizerAdaptor<Sgd<B::InnerBackend>, MnistModel<B>, B>,
}

impl<B: AutodiffKernelBackend> SgdStep<B> {
    pub fn new(device: &B::Device) -> Self {
        SgdStep {
            loss: CrossEntropyLossConfig::new().init(device),
            optimizer: SgdConfig::new().init(),
        }
    }

    /// Forward, loss, backward and update on one batch; no host synchronization.
    pub fn run(
        &mut self,
        model: MnistModel<B>,
        images: Tensor<B, 4>,
        targets: Tensor<B, 1, Int>,
    ) -> MnistModel<B> {
        let loss = self.loss.forward(model.forward(images), targets);
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        self.optimizer.step(BENCH_LR, model, grads)
    }
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
    let mut step = SgdStep::new(device);
    time_synced::<B>(device, protocol, || {
        let current = model
            .take()
            .expect("the model is put back after every step");
        model = Some(step.run(current, images.clone(), targets.clone()));
    })
}
