//! The custom and Burn kernel paths compute the same network: same weights, same outputs
//! and gradients, on every backend this machine has.

use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::*;
use burn::tensor::Distribution;
use burn::tensor::backend::AutodiffBackend;
use cubenet::backend::{BackendError, BackendKind, BackendTask, run_on};
use cubenet::model::{KernelPath, LeNetConfig, MnistModel, MnistModelConfig, SimpleCnnConfig};
use cubenet_kernels::AutodiffKernelBackend;

/// Largest accepted difference, relative to the largest magnitude of the Burn-path value.
const TOLERANCE: f32 = 1e-4;

fn max_relative_diff<B: Backend, const D: usize>(a: Tensor<B, D>, b: Tensor<B, D>) -> f32 {
    let scale = b.clone().abs().max().into_scalar().elem::<f32>().max(1e-12);
    (a - b).abs().max().into_scalar().elem::<f32>() / scale
}

/// A model configuration with the given kernel path.
type ModelFor = fn(KernelPath) -> MnistModelConfig;

/// The model built for each kernel path, with the same weights.
fn twin_models<B: AutodiffKernelBackend>(
    config: ModelFor,
    device: &B::Device,
) -> (MnistModel<B>, MnistModel<B>) {
    // Parameters initialize lazily, and a clone of an uninitialized one draws its own
    // values: move one set of loaded (initialized) weights between the models.
    let init = |kernels| config(kernels).init::<B>(device).unwrap();
    let burn = init(KernelPath::Burn).load_record(init(KernelPath::Burn).into_record());
    let custom = init(KernelPath::Custom).load_record(burn.clone().into_record());
    (custom, burn)
}

#[derive(Clone)]
struct SamePaths;

impl BackendTask for SamePaths {
    type Output = ();

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) {
        // Small models, and the seed CNN at d = 32 with the batch of 48 that a 64-image
        // epoch of 54,000 images ends on.
        let configs: [(ModelFor, usize); 3] = [
            (
                |k| {
                    MnistModelConfig::Simple(SimpleCnnConfig::new().with_filters(7).with_kernels(k))
                },
                9,
            ),
            (
                |k| {
                    MnistModelConfig::Lenet(
                        LeNetConfig::new()
                            .with_channels([5, 6])
                            .with_hidden(16)
                            .with_kernels(k),
                    )
                },
                9,
            ),
            (
                |k| MnistModelConfig::Simple(SimpleCnnConfig::new().with_kernels(k)),
                48,
            ),
        ];
        for (config, batch) in configs {
            B::seed(&device, 3);
            let (custom, burn) = twin_models::<B>(config, &device);
            let images =
                Tensor::<B, 4>::random([batch, 1, 28, 28], Distribution::Normal(0.0, 1.0), &device);
            let (out_custom, out_burn) = (custom.forward(images.clone()), burn.forward(images));
            let diff = max_relative_diff(out_custom.clone(), out_burn.clone());
            assert!(
                diff <= TOLERANCE,
                "{kind}: logits differ by {diff:e} ({config:?})",
                config = config(KernelPath::Custom)
            );

            // Gradients of every parameter agree too.
            let grads_custom =
                parameter_grads(&custom, &out_custom.powi_scalar(2).sum().backward());
            let grads_burn = parameter_grads(&burn, &out_burn.powi_scalar(2).sum().backward());
            assert_eq!(grads_custom.len(), grads_burn.len());
            assert!(grads_custom.len() >= 4, "{kind}: too few parameters");
            for (i, (a, b)) in grads_custom.iter().zip(&grads_burn).enumerate() {
                let scale = b.iter().fold(1e-12f32, |m, v| m.max(v.abs()));
                let diff = a.iter().zip(b).fold(0f32, |m, (x, y)| m.max((x - y).abs())) / scale;
                assert!(
                    diff <= TOLERANCE,
                    "{kind}: gradient of parameter {i} differs by {diff:e}"
                );
            }
        }
        println!("custom and burn kernel paths agree on {kind}");
    }
}

/// The gradient of every float parameter of `module`, in visiting order.
fn parameter_grads<B: AutodiffBackend, M: Module<B>>(
    module: &M,
    grads: &B::Gradients,
) -> Vec<Vec<f32>> {
    struct Collect<'a, B: AutodiffBackend> {
        grads: &'a B::Gradients,
        out: Vec<Vec<f32>>,
    }
    impl<B: AutodiffBackend> ModuleVisitor<B> for Collect<'_, B> {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            let grad = param
                .val()
                .grad(self.grads)
                .expect("every parameter has a gradient");
            self.out
                .push(grad.into_data().convert::<f32>().to_vec().unwrap());
        }
    }
    let mut collect = Collect {
        grads,
        out: Vec::new(),
    };
    module.visit(&mut collect);
    collect.out
}

/// Runs `task` on every compiled-in backend that has a device; a missing device fails the
/// test only when `CUBENET_REQUIRE_<BACKEND>=1` asks for it.
fn on_every_backend<T: BackendTask<Output = ()> + Clone>(task: T) {
    for kind in BackendKind::compiled() {
        match run_on(kind, task.clone()) {
            Ok(()) => {}
            Err(BackendError::NoDevice { reason, .. }) => {
                let var = format!("CUBENET_REQUIRE_{}", kind.to_string().to_uppercase());
                assert!(
                    std::env::var(&var).as_deref() != Ok("1"),
                    "{var}=1 but {kind}: {reason}"
                );
                println!("skipping {kind}: {reason}");
            }
            Err(other) => panic!("{other}"),
        }
    }
}

#[test]
fn custom_and_burn_paths_agree_on_every_backend() {
    on_every_backend(SamePaths);
}

/// Trains the seed CNN both ways from the same weights for a few Adam steps on the same
/// batches (48 images: the batch a 64-image epoch of MNIST ends on) and checks that the
/// losses stay finite and equal.
#[derive(Clone)]
struct SameTraining;

impl BackendTask for SameTraining {
    type Output = ();

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) {
        const STEPS: usize = 12;
        B::seed(&device, 11);
        let seed_cnn: ModelFor =
            |k| MnistModelConfig::Simple(SimpleCnnConfig::new().with_kernels(k));
        let (custom, burn) = twin_models::<B>(seed_cnn, &device);
        let batches: Vec<_> = (0..STEPS)
            .map(|_| {
                let images = Tensor::<B, 4>::random(
                    [48, 1, 28, 28],
                    Distribution::Normal(0.0, 1.0),
                    &device,
                );
                let targets =
                    Tensor::<B, 1, Int>::random([48], Distribution::Uniform(0.0, 10.0), &device);
                (images, targets)
            })
            .collect();
        let train = |mut model: MnistModel<B>| {
            let mut optimizer = AdamConfig::new().init();
            let loss_fn = CrossEntropyLossConfig::new().init(&device);
            batches
                .iter()
                .map(|(images, targets)| {
                    let loss = loss_fn.forward(model.forward(images.clone()), targets.clone());
                    let value = loss.clone().into_scalar().elem::<f32>();
                    let grads = GradientsParams::from_grads(loss.backward(), &model);
                    model = optimizer.step(1e-3, model.clone(), grads);
                    value
                })
                .collect::<Vec<f32>>()
        };
        let (losses_custom, losses_burn) = (train(custom), train(burn));
        for (step, (a, b)) in losses_custom.iter().zip(&losses_burn).enumerate() {
            assert!(
                a.is_finite() && b.is_finite(),
                "{kind}: step {step}: losses {a} and {b}"
            );
            assert!(
                (a - b).abs() <= 1e-3 * b.abs(),
                "{kind}: step {step}: loss {a} vs {b}"
            );
        }
        println!("custom and burn training agree on {kind} for {STEPS} steps");
    }
}

#[test]
fn custom_and_burn_training_agree_on_every_backend() {
    on_every_backend(SameTraining);
}
