//! One training step (forward, softmax cross-entropy, backward, SGD update) on a batch
//! already resident on the device, with no host synchronization inside the step.

use burn::optim::adaptor::OptimizerAdaptor;
use burn::optim::{GradientsParams, Optimizer, Sgd, SgdConfig};
use burn::prelude::*;
use burn::tensor::Distribution;
use cubenet_kernels::AutodiffKernelBackend;

use super::sweep::Point;
use super::timing::{Protocol, Timing, time_synced};
use super::variant::BurnSetup;
use crate::data::NUM_CLASSES;
use crate::model::{ImageModel, Kernels};
use crate::train::{FusedSgd, FusedSgdConfig};

/// Learning rate of the benchmarks' plain SGD (no momentum), as in `pytorch_reference.py`:
/// large enough that the one timed epoch visibly trains (its test accuracy is reported).
pub const BENCH_LR: f64 = 0.1;

/// Random images `[batch, channels, height, width]` (`input` is the last three) and
/// classes `[batch]`, created on `device`.
pub fn random_batch<B: Backend>(
    batch: usize,
    input: [usize; 3],
    device: &B::Device,
) -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
    let [channels, height, width] = input;
    let images = Tensor::random(
        [batch, channels, height, width],
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

/// A network at a sweep point as `setup` runs it, seeded, on `device`.
pub fn bench_model<B: AutodiffKernelBackend>(
    point: Point,
    setup: BurnSetup,
    device: &B::Device,
) -> ImageModel<B> {
    B::seed(device, 0);
    point
        .model
        .config(point.filters, setup.kernels, setup.precision)
        .init(device)
        .expect("the benchmark networks have valid geometry")
}

/// The benchmarks' training step: softmax cross-entropy and plain SGD at [`BENCH_LR`], each
/// from the kernel path under test (cubenet's one-kernel loss and update, or Burn's).
pub struct SgdStep<B: AutodiffKernelBackend> {
    kernels: Kernels,
    optimizer: Update<B>,
}

/// Burn's `Sgd` or cubenet's [`FusedSgd`], both plain SGD.
enum Update<B: AutodiffKernelBackend> {
    Burn(OptimizerAdaptor<Sgd<B::InnerBackend>, ImageModel<B>, B>),
    Fused(FusedSgd<B>),
}

impl<B: AutodiffKernelBackend> SgdStep<B> {
    pub fn new(kernels: Kernels) -> Self {
        let optimizer = match kernels {
            Kernels::Custom => Update::Fused(FusedSgdConfig::new().init()),
            Kernels::Burn => Update::Burn(SgdConfig::new().init()),
        };
        SgdStep { kernels, optimizer }
    }

    /// The loss of `logits` against `targets`.
    pub fn loss(&self, logits: Tensor<B, 2>, targets: Tensor<B, 1, Int>) -> Tensor<B, 1> {
        self.kernels.cross_entropy(logits, targets)
    }

    /// The SGD update of `model` from a whole backward's gradients.
    pub fn update(&mut self, model: ImageModel<B>, grads: GradientsParams) -> ImageModel<B> {
        match &mut self.optimizer {
            Update::Burn(optimizer) => optimizer.step(BENCH_LR, model, grads),
            Update::Fused(optimizer) => optimizer.step(BENCH_LR, model, grads),
        }
    }

    /// Forward, loss, backward and update on one batch; no host synchronization.
    pub fn run(
        &mut self,
        model: ImageModel<B>,
        images: Tensor<B, 4>,
        targets: Tensor<B, 1, Int>,
    ) -> ImageModel<B> {
        match &mut self.optimizer {
            Update::Burn(optimizer) => train_step(model, optimizer, images, targets, BENCH_LR),
            Update::Fused(optimizer) => train_step(model, optimizer, images, targets, BENCH_LR),
        }
    }
}

/// Forward, the loss on the model's own kernel path, backward and one `optimizer` step at
/// `lr` on one batch; no host synchronization.
pub fn train_step<B: AutodiffKernelBackend>(
    model: ImageModel<B>,
    optimizer: &mut impl Optimizer<ImageModel<B>, B>,
    images: Tensor<B, 4>,
    targets: Tensor<B, 1, Int>,
    lr: f64,
) -> ImageModel<B> {
    let loss = model
        .kernels()
        .cross_entropy(model.forward(images), targets);
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optimizer.step(lr, model, grads)
}

/// Times the training step of `point`'s network on random data.
pub fn time_training_step<B: AutodiffKernelBackend>(
    device: &B::Device,
    point: Point,
    setup: BurnSetup,
    protocol: Protocol,
) -> Timing {
    let mut model = Some(bench_model::<B>(point, setup, device));
    let (images, targets) = random_batch::<B>(point.batch, point.model.input(), device);
    let mut step = SgdStep::new(setup.kernels);
    time_synced::<B>(device, protocol, || {
        let current = model
            .take()
            .expect("the model is put back after every step");
        model = Some(step.run(current, images.clone(), targets.clone()));
    })
}
