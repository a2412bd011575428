//! cubenet's fused SGD and Adam against Burn's `Sgd` and `Adam` on a LeNet (8 parameters of
//! ranks 1, 2 and 4) on NdArray: the gathering of parameters, gradients and kept state,
//! weight decay and step counts passed to the update, putting the updates back, and the
//! records; the kernels themselves are tested against float64 in `cubenet-kernels`.

use burn::backend::{Autodiff, NdArray};
use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, GradientsParams, Optimizer, SgdConfig};
use burn::prelude::*;
use cubenet::bench::train_step;
use cubenet::model::{ImageModel, Kernels, LeNetConfig};
use cubenet::train::{FusedAdamConfig, FusedSgdConfig};

use crate::common::{assert_parameters_close, parameter_values};

type B = Autodiff<NdArray>;

const LR: f64 = 0.05;
const STEPS: usize = 3;

/// A small LeNet with its parameters initialized (tests share Burn's random generator, so
/// runs to compare start from clones of one network, not from one seed each).
fn lenet() -> ImageModel<B> {
    let config = LeNetConfig::new()
        .with_channels([2, 3])
        .with_hidden(8)
        .with_kernels(Kernels::Custom);
    let model = ImageModel::Cnn(config.init(&Default::default()).unwrap());
    parameter_values(&model);
    model
}

/// Four fixed images (a smooth pattern, no random generator) and their digits.
fn batch() -> (Tensor<B, 4>, Tensor<B, 1, Int>) {
    let device = Default::default();
    let pixels: Vec<f32> = (0..4 * 28 * 28).map(|i| (i as f32 * 0.37).sin()).collect();
    (
        Tensor::from_data(TensorData::new(pixels, [4, 1, 28, 28]), &device),
        Tensor::from_ints([3, 1, 4, 1], &device),
    )
}

fn train(
    mut model: ImageModel<B>,
    optimizer: &mut impl Optimizer<ImageModel<B>, B>,
    steps: usize,
) -> ImageModel<B> {
    let (images, targets) = batch();
    for _ in 0..steps {
        model = train_step(model, optimizer, images.clone(), targets.clone(), LR);
    }
    model
}

fn assert_close(ours: &[Vec<f32>], burn: &[Vec<f32>]) {
    assert_eq!(ours.len(), 8, "a LeNet has 8 parameters");
    assert_parameters_close(ours, burn, 1e-5);
}

#[test]
fn fused_sgd_matches_burns_sgd_with_and_without_momentum_nesterov_and_weight_decay() {
    let settings = [
        (0.0, false, 0.0),
        (0.9, false, 0.0),
        (0.0, false, 0.01),
        (0.9, false, 0.01),
        (0.85, true, 0.0),
        (0.9, true, 5e-4),
    ];
    for (momentum, nesterov, decay) in settings {
        let burn_config = SgdConfig::new()
            .with_momentum((momentum > 0.0).then(|| {
                MomentumConfig::new()
                    .with_momentum(momentum)
                    .with_dampening(0.0)
                    .with_nesterov(nesterov)
            }))
            .with_weight_decay((decay > 0.0).then(|| WeightDecayConfig::new(decay as f32)));
        let start = lenet();
        let burn = train(start.clone(), &mut burn_config.init(), STEPS);
        let mut fused = FusedSgdConfig::new()
            .with_momentum(momentum)
            .with_nesterov(nesterov)
            .with_weight_decay(decay)
            .init();
        let ours = train(start.clone(), &mut fused, STEPS);
        assert_ne!(
            parameter_values(&ours),
            parameter_values(&start),
            "the steps changed the parameters"
        );
        assert_close(&parameter_values(&ours), &parameter_values(&burn));
    }
}

#[test]
fn fused_sgd_velocities_survive_a_record_round_trip() {
    let config = FusedSgdConfig::new().with_momentum(0.9);
    let start = lenet();
    let mut straight = config.init();
    let expected = train(start.clone(), &mut straight, STEPS);

    let mut first = config.init();
    let model = train(start, &mut first, STEPS - 1);
    let record = Optimizer::<ImageModel<B>, B>::to_record(&first);
    assert_eq!(record.len(), 8, "one velocity per parameter");
    let mut resumed = Optimizer::<ImageModel<B>, B>::load_record(config.init(), record);
    let resumed = train(model, &mut resumed, 1);
    assert_close(&parameter_values(&resumed), &parameter_values(&expected));
}

/// Without gradients (a step with nothing to update) the model comes back unchanged.
#[test]
fn fused_sgd_without_gradients_leaves_the_model() {
    let model = lenet();
    let before = parameter_values(&model);
    let mut optimizer = FusedSgdConfig::new().with_momentum(0.9).init();
    let model = optimizer.step(LR, model, GradientsParams::new());
    assert_eq!(parameter_values(&model), before);
}

#[test]
fn fused_adam_matches_burns_adam_with_and_without_weight_decay() {
    for decay in [0.0, 0.01] {
        let burn_config = AdamConfig::new()
            .with_weight_decay((decay > 0.0).then(|| WeightDecayConfig::new(decay)));
        let start = lenet();
        let burn = train(start.clone(), &mut burn_config.init(), STEPS + 2);
        let mut fused = FusedAdamConfig::new().with_weight_decay(decay).init();
        let ours = train(start.clone(), &mut fused, STEPS + 2);
        assert_ne!(
            parameter_values(&ours),
            parameter_values(&start),
            "the steps changed the parameters"
        );
        assert_close(&parameter_values(&ours), &parameter_values(&burn));
    }
}

/// The record is Burn's Adam record: a run resumes from either optimizer's checkpoint with
/// the other and continues as it would have.
#[test]
fn fused_adam_and_burns_adam_resume_from_each_others_records() {
    let start = lenet();
    let expected = train(start.clone(), &mut AdamConfig::new().init(), STEPS);

    let mut burn = AdamConfig::new().init();
    let model = train(start.clone(), &mut burn, STEPS - 1);
    let record = Optimizer::<ImageModel<B>, B>::to_record(&burn);
    assert_eq!(record.len(), 8, "one state per parameter");
    let mut fused =
        Optimizer::<ImageModel<B>, B>::load_record(FusedAdamConfig::new().init(), record);
    let resumed = train(model, &mut fused, 1);
    assert_close(&parameter_values(&resumed), &parameter_values(&expected));

    let mut fused = FusedAdamConfig::new().init();
    let model = train(start, &mut fused, STEPS - 1);
    let record = Optimizer::<ImageModel<B>, B>::to_record(&fused);
    let mut burn = Optimizer::<ImageModel<B>, B>::load_record(AdamConfig::new().init(), record);
    let resumed = train(model, &mut burn, 1);
    assert_close(&parameter_values(&resumed), &parameter_values(&expected));
}

#[test]
fn fused_adam_without_gradients_leaves_the_model() {
    let model = lenet();
    let before = parameter_values(&model);
    let mut optimizer = FusedAdamConfig::new().init();
    let model = optimizer.step(LR, model, GradientsParams::new());
    assert_eq!(parameter_values(&model), before);
}

/// Burn counts Adam's steps per parameter (its bias corrections use that count): a
/// parameter without a gradient in a step falls one behind, and the next step updates the
/// model as two groups of different counts.
#[test]
fn fused_adam_counts_steps_per_parameter_as_burns_adam_does() {
    /// The first 4-D parameter: the first convolution's filters.
    struct FirstFilters(Option<burn::module::ParamId>);
    impl burn::module::ModuleVisitor<B> for FirstFilters {
        fn visit_float<const D: usize>(&mut self, param: &burn::module::Param<Tensor<B, D>>) {
            if D == 4 {
                self.0.get_or_insert(param.id);
            }
        }
    }
    /// One step of `optimizer`, without the gradient of `skipped` if given.
    fn step(
        model: ImageModel<B>,
        optimizer: &mut impl Optimizer<ImageModel<B>, B>,
        skipped: Option<burn::module::ParamId>,
    ) -> ImageModel<B> {
        let (images, targets) = batch();
        let loss = model
            .kernels()
            .cross_entropy(model.forward(images), targets);
        let mut grads = GradientsParams::from_grads(loss.backward(), &model);
        if let Some(id) = skipped {
            let removed = grads.remove::<NdArray, 4>(id);
            assert!(removed.is_some(), "the filters had a gradient");
        }
        optimizer.step(LR, model, grads)
    }
    let start = lenet();
    let mut filters = FirstFilters(None);
    start.visit(&mut filters);
    let skipped = filters.0;
    assert!(skipped.is_some());
    let mut burn = AdamConfig::new().init();
    let mut fused = FusedAdamConfig::new().init();
    let (mut ours, mut theirs) = (start.clone(), start);
    for skip in [None, skipped, None, None] {
        ours = step(ours, &mut fused, skip);
        theirs = step(theirs, &mut burn, skip);
    }
    assert_close(&parameter_values(&ours), &parameter_values(&theirs));
}
