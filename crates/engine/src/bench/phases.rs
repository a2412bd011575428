//! Where a training step of the single-conv CNN spends its time, phase by phase (an Amdahl's-law
//! view): each phase is closed by a device synchronization, so the phases add up to more
//! than an unsynchronized step and their shares, not their sum, are the point.
//!
//! The backward is split by cutting the graph at the flattened features: the loss's backward
//! stops there, and the conv block's backward is run from `sum(features · g)` with `g` the
//! features' gradient. That phase therefore also pays for the product, the sum and their
//! backward: elementwise passes over the features (about 1 GB of traffic at d = 256, batch
//! 1000), which a real step does not run.

use std::time::Instant;

use burn::optim::GradientsParams;
use burn::prelude::*;
use cubenet_kernels::AutodiffKernelBackend;

use super::step::{SgdStep, random_batch};
use super::sweep::BenchModel;
use super::timing::{Protocol, Timing, sync};
use crate::model::{ImageModel, Kernels, SimpleCnnConfig};

/// The phases, in the order a step runs them.
pub const PHASES: [&str; 6] = [
    "conv·ReLU·pool forward",
    "linear forward",
    "loss forward",
    "loss + linear backward",
    "conv·ReLU·pool backward",
    "SGD update",
];

/// Reads the clock after synchronizing the device.
struct PhaseClock<'a, B: Backend> {
    device: &'a B::Device,
    mark: Instant,
    laps: Vec<f64>,
}

impl<'a, B: Backend> PhaseClock<'a, B> {
    fn start(device: &'a B::Device) -> Self {
        sync::<B>(device);
        PhaseClock {
            device,
            mark: Instant::now(),
            laps: Vec::with_capacity(PHASES.len()),
        }
    }

    /// Ends the running phase.
    fn lap(&mut self) {
        sync::<B>(self.device);
        let now = Instant::now();
        self.laps.push((now - self.mark).as_secs_f64() * 1e3);
        self.mark = now;
    }

    /// Starts a phase after untimed work.
    fn resume(&mut self) {
        sync::<B>(self.device);
        self.mark = Instant::now();
    }
}

/// Times each phase of the single-conv CNN's training step with `filters` filters on `batch`
/// random images; one [`Timing`] per entry of [`PHASES`].
pub fn time_phases<B: AutodiffKernelBackend>(
    device: &B::Device,
    filters: usize,
    batch: usize,
    kernels: Kernels,
    protocol: Protocol,
) -> Vec<Timing> {
    B::seed(device, 0);
    let mut model = ImageModel::Cnn(
        SimpleCnnConfig::new()
            .with_filters(filters)
            .with_kernels(kernels)
            .init::<B>(device)
            .expect("the single-conv CNN geometry is valid"),
    );
    let input = BenchModel::Simple.input();
    let (images, targets) = random_batch::<B>(batch, input, device);
    let mut sgd = SgdStep::new(kernels);
    let mut samples = vec![Vec::with_capacity(protocol.repeats); PHASES.len()];
    for step in 0..protocol.warmup + protocol.repeats {
        let ImageModel::Cnn(cnn) = &model else {
            unreachable!("built as the single-conv CNN above")
        };
        let mut clock = PhaseClock::<B>::start(device);
        let features = cnn.features(images.clone());
        clock.lap();
        // Cutting the graph at the features lets the backward run one layer at a time.
        let cut = features.clone().detach().require_grad();
        let logits = cnn.classify(cut.clone());
        clock.lap();
        let loss = sgd.loss(logits, targets.clone());
        clock.lap();
        let head_grads = loss.backward();
        clock.lap();
        let feature_grad = cut.grad(&head_grads).expect("the features feed the loss");
        drop(
            (features * Tensor::from_inner(feature_grad))
                .sum()
                .backward(),
        );
        clock.lap();
        // The update needs every gradient in one set: an untimed whole backward.
        let loss = sgd.loss(model.forward(images.clone()), targets.clone());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        clock.resume();
        model = sgd.update(model, grads);
        clock.lap();
        if step >= protocol.warmup {
            for (phase, lap) in samples.iter_mut().zip(clock.laps) {
                phase.push(lap);
            }
        }
    }
    samples.into_iter().map(Timing::from_samples).collect()
}
