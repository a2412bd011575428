//! The custom kernel path computes the same network as Burn's ops: with the same weights,
//! a model on each backend this machine has, run by cubenet's kernels, gives the outputs,
//! gradients and training losses of the same model run by Burn's ops on ndarray (CPU, f32).
//!
//! The reference is Burn's ops on the CPU rather than on the same GPU because Burn 0.21's
//! CUDA matmul is not exact there: it rounds like TF32 (relative errors ~1e-3) and, for a
//! 48-row input to the single-conv CNN's 5408→10 layer, returns wrong values
//! (docs/perf-log/2026-11-21-nan-at-48-image-batches.md).

use burn::backend::{Autodiff, NdArray};
use burn::module::{Module, ModuleVisitor, Param};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer};
use burn::prelude::*;
use burn::record::{BinBytesRecorder, FullPrecisionSettings, Recorder};
use burn::tensor::backend::AutodiffBackend;
use burn::tensor::ops::IntElem;
use cubenet::device::{BackendError, BackendKind, BackendTask, run_on};
use cubenet::model::{
    CnnConfig, ConvSpec, ImageModel, ImageModelConfig, Kernels, LayerSpec, LeNetConfig,
    SimpleCnnConfig, Width,
};
use cubenet_kernels::AutodiffKernelBackend;
use cubenet_kernels::testing::SeededInit;
use rand::rngs::StdRng;
use rand::{RngExt, SeedableRng};

/// The reference: Burn's ops on the CPU.
type Cpu = Autodiff<NdArray>;

/// Largest accepted difference, relative to the largest magnitude of the reference value.
const TOLERANCE: f32 = 1e-4;

fn floats<B: Backend, const D: usize>(tensor: Tensor<B, D>) -> Vec<f32> {
    tensor.into_data().convert::<f32>().to_vec().unwrap()
}

fn max_relative_diff(ours: &[f32], reference: &[f32]) -> f32 {
    assert_eq!(ours.len(), reference.len());
    let scale = reference.iter().fold(1e-12f32, |m, v| m.max(v.abs()));
    let diff = ours.iter().zip(reference).fold(0f32, |m, (a, b)| {
        if (a - b).is_nan() {
            f32::INFINITY
        } else {
            m.max((a - b).abs())
        }
    });
    diff / scale
}

/// A model configuration with the given kernel path.
type ModelFor = fn(Kernels) -> ImageModelConfig;

/// The model with cubenet's kernels on `B` and Burn's ops on the CPU, with the same weights
/// (drawn with `seed`, the same in every run).
fn twin_models<B: AutodiffKernelBackend>(
    config: ModelFor,
    seed: u64,
    device: &B::Device,
) -> (ImageModel<B>, ImageModel<Cpu>) {
    let cpu = Default::default();
    // Parameters initialize lazily, and a clone of an uninitialized one draws its own
    // values: move one set of drawn weights between the models.
    let reference = config(Kernels::Burn)
        .init::<Cpu>(&cpu)
        .unwrap()
        .map(&mut SeededInit::new(seed));
    let recorder = BinBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = recorder
        .record(reference.clone().into_record(), ())
        .unwrap();
    let ours = config(Kernels::Custom).init::<B>(device).unwrap();
    let ours = ours.load_record(recorder.load(bytes.clone(), device).unwrap());
    let reference = reference.load_record(recorder.load(bytes, &cpu).unwrap());
    (ours, reference)
}

/// `len` normal-ish values in [-2, 2), the same on every backend.
fn host_values(rng: &mut StdRng, len: usize) -> Vec<f32> {
    (0..len).map(|_| rng.random_range(-2.0..2.0)).collect()
}

/// MNIST-shaped images (`[batch, 1, 28, 28]`) of `values`.
fn images<B: Backend>(values: &[f32], batch: usize, device: &B::Device) -> Tensor<B, 4> {
    shaped_images(values, [batch, 1, 28, 28], device)
}

fn shaped_images<B: Backend>(
    values: &[f32],
    shape: [usize; 4],
    device: &B::Device,
) -> Tensor<B, 4> {
    Tensor::from_data(TensorData::new(values.to_vec(), shape), device)
}

/// A run-file CNN on RGB images of an odd size: multi-channel convolutions (3→6→10→12
/// channels, none a multiple of a block size) fused with ReLU and pooling, padded and
/// strided, a convolution with ReLU only, and dense layers with ReLU.
fn multi_channel_cnn(kernels: Kernels) -> ImageModelConfig {
    let layers = vec![
        LayerSpec::Conv(ConvSpec::new(6).with_padding(1)),
        LayerSpec::Relu,
        LayerSpec::pool(2),
        LayerSpec::Conv(ConvSpec::new(10).with_kernel(5).with_padding(2)),
        LayerSpec::Relu,
        LayerSpec::pool(2),
        LayerSpec::Conv(ConvSpec::new(12).with_stride(2).with_padding(1)),
        LayerSpec::Relu,
        LayerSpec::Dense(Width::Units(20)),
        LayerSpec::Relu,
        LayerSpec::Dense(Width::Classes),
    ];
    ImageModelConfig::Cnn(
        CnnConfig::new(MULTI_CHANNEL_INPUT, 10, layers.into()).with_kernels(kernels),
    )
}

/// `[channels, height, width]` of [`multi_channel_cnn`]'s images.
const MULTI_CHANNEL_INPUT: [usize; 3] = [3, 19, 17];

#[derive(Clone)]
struct SamePaths;

impl BackendTask for SamePaths {
    type Output = ();

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) {
        // Small models, the single-conv CNN at d = 32 with the batch of 48 that a 64-image epoch
        // of 54,000 images ends on, and a multi-channel run-file CNN.
        let mut rng = StdRng::seed_from_u64(3);
        let configs: [(ModelFor, usize); 4] = [
            (
                |k| {
                    ImageModelConfig::Simple(SimpleCnnConfig::new().with_filters(7).with_kernels(k))
                },
                9,
            ),
            (
                |k| {
                    ImageModelConfig::Lenet(
                        LeNetConfig::new()
                            .with_channels([5, 6])
                            .with_hidden(16)
                            .with_kernels(k),
                    )
                },
                9,
            ),
            (
                |k| ImageModelConfig::Simple(SimpleCnnConfig::new().with_kernels(k)),
                48,
            ),
            (multi_channel_cnn, 7),
        ];
        for (config, batch) in configs {
            let (ours, reference) = twin_models::<B>(config, 3, &device);
            let [c, h, w] = match config(Kernels::Custom) {
                ImageModelConfig::Cnn(cnn) => cnn.input,
                _ => [1, 28, 28],
            };
            let shape = [batch, c, h, w];
            let pixels = host_values(&mut rng, shape.iter().product());
            let out_ours = ours.forward(shaped_images(&pixels, shape, &device));
            let out_ref = reference.forward(shaped_images(&pixels, shape, &Default::default()));
            let diff = max_relative_diff(&floats(out_ours.clone()), &floats(out_ref.clone()));
            assert!(
                diff <= TOLERANCE,
                "{kind}: logits differ by {diff:e} ({config:?})",
                config = config(Kernels::Custom)
            );

            // Gradients of every parameter agree too.
            let grads_ours = parameter_grads(&ours, &out_ours.powi_scalar(2).sum().backward());
            let grads_ref = parameter_grads(&reference, &out_ref.powi_scalar(2).sum().backward());
            assert_eq!(grads_ours.len(), grads_ref.len());
            assert!(grads_ours.len() >= 4, "{kind}: too few parameters");
            for (i, (a, b)) in grads_ours.iter().zip(&grads_ref).enumerate() {
                let diff = max_relative_diff(a, b);
                assert!(
                    diff <= TOLERANCE,
                    "{kind}: gradient of parameter {i} differs by {diff:e}"
                );
            }
        }
        println!("custom kernels on {kind} agree with Burn's ops on ndarray");
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
                cubenet_kernels::testing::skip_missing_device(
                    &kind.to_string(),
                    &reason.to_string(),
                )
            }
            Err(other) => panic!("{other}"),
        }
    }
}

#[test]
fn custom_path_matches_burn_ops_on_cpu_on_every_backend() {
    on_every_backend(SamePaths);
}

/// Trains the single-conv CNN with cubenet's kernels on each backend and with Burn's ops on the
/// CPU, from the same weights, for a few Adam steps on the same batches (48 images: the
/// batch a 64-image epoch of MNIST ends on), and checks that the losses stay finite and
/// equal.
#[derive(Clone)]
struct SameTraining;

impl BackendTask for SameTraining {
    type Output = ();

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) {
        const STEPS: usize = 12;
        const BATCH: usize = 48;
        let single_conv: ModelFor =
            |k| ImageModelConfig::Simple(SimpleCnnConfig::new().with_kernels(k));
        let (ours, reference) = twin_models::<B>(single_conv, 11, &device);
        let mut rng = StdRng::seed_from_u64(11);
        let batches: Vec<(Vec<f32>, Vec<i64>)> = (0..STEPS)
            .map(|_| {
                let pixels = host_values(&mut rng, BATCH * 28 * 28);
                let labels = (0..BATCH).map(|_| rng.random_range(0..10)).collect();
                (pixels, labels)
            })
            .collect();
        let losses_ours = train(ours, &batches, &device);
        let losses_ref = train(reference, &batches, &Default::default());
        for (step, (a, b)) in losses_ours.iter().zip(&losses_ref).enumerate() {
            assert!(
                a.is_finite() && b.is_finite(),
                "{kind}: step {step}: losses {a} and {b}"
            );
            assert!(
                (a - b).abs() <= 1e-3 * b.abs(),
                "{kind}: step {step}: loss {a} vs {b}"
            );
        }
        println!("custom kernels on {kind} train like Burn's ops on ndarray for {STEPS} steps");
    }
}

/// Adam steps on `batches` of (pixels, labels); the loss of each step.
fn train<B: AutodiffKernelBackend>(
    mut model: ImageModel<B>,
    batches: &[(Vec<f32>, Vec<i64>)],
    device: &B::Device,
) -> Vec<f32> {
    let mut optimizer = AdamConfig::new().init();
    let loss_fn = CrossEntropyLossConfig::new().init(device);
    batches
        .iter()
        .map(|(pixels, labels)| {
            let batch = labels.len();
            let targets = Tensor::<B, 1, Int>::from_data(
                TensorData::new(labels.clone(), [batch]).convert::<IntElem<B>>(),
                device,
            );
            let loss = loss_fn.forward(model.forward(images(pixels, batch, device)), targets);
            let value = loss.clone().into_scalar().elem::<f32>();
            let grads = GradientsParams::from_grads(loss.backward(), &model);
            model = optimizer.step(1e-3, model.clone(), grads);
            value
        })
        .collect()
}

#[test]
fn custom_path_trains_like_burn_ops_on_cpu_on_every_backend() {
    on_every_backend(SameTraining);
}
