//! Data-parallel training (burn-train's multi-device strategy) on two handles of the CPU,
//! which is how CI checks the path without GPUs: the same weights as one device trained on
//! the concatenated batches, and a whole cubenet run on two handles that learns.

use burn::backend::ndarray::NdArrayDevice;
use burn::backend::{Autodiff, NdArray};
use burn::data::dataloader::DataLoaderBuilder;
use burn::data::dataset::Dataset;
use burn::data::dataset::transform::SelectionDataset;
use burn::optim::SgdConfig;
use burn::train::{ExecutionStrategy, Learner, MultiDeviceOptim, SupervisedTraining};
use cubenet::data::{ImageBatcher, ImageSource};
use cubenet::model::{ImageModel, ImageModelConfig, SimpleCnnConfig};
use cubenet::train::{
    EpochLineRenderer, ImageSplits, ImageTrainingConfig, Run, RunDir, evaluate, train,
};

use crate::common::{assert_parameters_close, mnist_source, parameter_values};

type B = Autodiff<NdArray>;

/// Images per device and step, and the steps compared.
const BATCH: usize = 16;
const STEPS: usize = 4;
const LR: f64 = 0.05;

/// MNIST split as cubenet splits it, `limit` images before the split.
fn splits(config: &ImageTrainingConfig) -> ImageSplits {
    ImageSplits::load(&ImageSource::Mnist(mnist_source()), config, None).unwrap()
}

/// One epoch of plain SGD (constant `lr`) over `images` in their order, `batch` at a time
/// on each of `devices`; the model comes back from the first device.
fn sgd_epoch(
    model: ImageModel<B>,
    images: impl Dataset<cubenet::data::ImageItem> + 'static,
    valid: impl Dataset<cubenet::data::ImageItem> + 'static,
    devices: Vec<NdArrayDevice>,
    batch: usize,
    lr: f64,
) -> ImageModel<NdArray> {
    let dir = tempfile::tempdir().unwrap();
    let train_loader = DataLoaderBuilder::<B, _, _>::new(ImageBatcher::default())
        .batch_size(batch)
        .build(images);
    let valid_loader = DataLoaderBuilder::<NdArray, _, _>::new(ImageBatcher::default())
        .batch_size(batch)
        .build(valid);
    let mut training = SupervisedTraining::new(dir.path(), train_loader, valid_loader)
        .with_application_logger(None)
        .renderer(EpochLineRenderer::default())
        .num_epochs(1);
    if devices.len() > 1 {
        training = training.with_training_strategy(
            ExecutionStrategy::MultiDevice(devices, MultiDeviceOptim::OptimMainDevice).into(),
        );
    }
    training
        .launch(Learner::new(model, SgdConfig::new().init(), lr))
        .model
}

#[test]
fn two_cpu_handles_give_the_weights_of_one_device_on_the_concatenated_batches() {
    let config = ImageTrainingConfig::new(ImageModelConfig::Simple(
        SimpleCnnConfig::new().with_filters(6),
    ))
    .with_limit_train(Some(2 * BATCH * STEPS + 40));
    let splits = splits(&config);
    let model = config.model.init::<B>(&Default::default()).unwrap();
    let start = parameter_values(&model);

    // burn-train gives device k the k-th half of the images; its step j takes batch j of
    // each half. One device sees those pairs of batches concatenated, one after the other.
    let n = 2 * BATCH * STEPS;
    let half = n / 2;
    let concatenated: Vec<usize> = (0..STEPS)
        .flat_map(|j| (j * BATCH..(j + 1) * BATCH).chain(half + j * BATCH..half + (j + 1) * BATCH))
        .collect();
    let subset =
        |indices: Vec<usize>| SelectionDataset::from_indices_checked(splits.train.clone(), indices);
    let valid = || subset((0..8).collect());

    // Each device's loss is its batch's mean and the strategy sums the devices' gradients:
    // twice the concatenated batch's mean gradient, so half the learning rate.
    let two = sgd_epoch(
        model.clone(),
        subset((0..n).collect()),
        valid(),
        vec![NdArrayDevice::Cpu; 2],
        BATCH,
        LR / 2.0,
    );
    let one = sgd_epoch(
        model,
        subset(concatenated),
        valid(),
        vec![NdArrayDevice::Cpu],
        2 * BATCH,
        LR,
    );

    let (two, one) = (parameter_values(&two), parameter_values(&one));
    assert_ne!(one, start, "training moved no weight");
    // The two runs sum the same f32 products in a different order (each half's mean, then
    // their sum, against one mean over both): a few units in the last place per step, a
    // rounding drift far below 1e-5 over four steps of weights of size ~0.1.
    assert_parameters_close(&two, &one, 1e-5);
}

#[test]
fn a_run_on_two_cpu_handles_learns_and_records_its_devices() {
    let config = ImageTrainingConfig::new(ImageModelConfig::Simple(
        SimpleCnnConfig::new().with_filters(8),
    ))
    .with_epochs(2)
    .with_batch_size(16)
    .with_devices(vec![0, 1])
    .with_limit_train(Some(2_000))
    .with_limit_test(Some(500));
    let splits = splits(&config);
    let dir = tempfile::tempdir().unwrap();
    let devices = cubenet::device::devices_at::<B>(
        cubenet::device::BackendKind::Ndarray,
        &Default::default(),
        &config.devices,
    )
    .unwrap();
    let run = Run::fresh(RunDir::claim(dir.path(), &[]).unwrap());
    assert_eq!(devices.len(), 2);
    let (model, speed) = train::<B>(&config, &splits, &run, &devices).unwrap();
    let accuracy = evaluate(&model, &splits.test, &devices[0], false).accuracy();
    assert!(accuracy >= 0.8, "test accuracy {accuracy}");
    let speed = speed.expect("two epochs trained");
    assert_eq!(speed.devices, 2);
    assert!(speed.images_per_second > 0.0 && speed.per_device() < speed.images_per_second);
    let saved: serde_json::Value = serde_json::from_slice(
        &std::fs::read(dir.path().join(cubenet::train::CONFIG_FILE)).unwrap(),
    )
    .unwrap();
    assert_eq!(saved["devices"], serde_json::json!([0, 1]));
}

#[test]
fn device_lists_that_cannot_train_are_refused() {
    let config = ImageTrainingConfig::new(ImageModelConfig::Simple(SimpleCnnConfig::new()));
    for (devices, message) in [
        (
            vec![],
            "invalid setting: devices must name at least one device",
        ),
        (vec![0, 1, 0], "invalid setting: device 0 is listed twice"),
        (
            vec![70_000],
            "invalid setting: device 70000 is past the last index a backend numbers (65535)",
        ),
    ] {
        let error = config.clone().with_devices(devices).validate().unwrap_err();
        assert_eq!(error.to_string(), message);
    }
}
