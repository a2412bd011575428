//! End-to-end training on real MNIST with the CPU backend.

use std::process::Command;

use burn::backend::{Autodiff, NdArray};
use burn::data::dataset::Dataset;
use cubenet::data::ImageSource;
use cubenet::device::BackendKind;
use cubenet::model::{ImageModel, ImageModelConfig, MlpConfig, SimpleCnnConfig};
use cubenet::train::{
    CONFIG_FILE, CURVES_FILE, ImageSplits, ImageTrainingConfig, MODEL_FILE, Run, RunDir, evaluate,
    load_model, train,
};

type B = Autodiff<NdArray>;

#[test]
fn seeded_simple_cnn_learns_digits_from_2000_images() {
    let config = ImageTrainingConfig::new(ImageModelConfig::Simple(
        SimpleCnnConfig::new().with_filters(8),
    ))
    .with_epochs(3)
    .with_batch_size(32)
    .with_limit_train(Some(2_000))
    .with_limit_test(Some(1_000));
    let splits = ImageSplits::load(
        &ImageSource::Mnist(crate::common::mnist_source()),
        &config,
        None,
    )
    .unwrap();
    assert_eq!(
        (splits.train.len(), splits.valid.len(), splits.test.len()),
        (1_800, 200, 1_000)
    );

    let dir = tempfile::tempdir().unwrap();
    let run = Run::fresh(RunDir::claim(dir.path(), &[]).unwrap());
    let device = Default::default();
    let (model, _) = train::<B>(&config, &splits, &run, &[device]).unwrap();
    let accuracy = evaluate(&model, &splits.test, &device, false).accuracy();
    assert!(accuracy >= 0.85, "test accuracy {accuracy}");

    for file in [CONFIG_FILE, MODEL_FILE, CURVES_FILE] {
        let len = std::fs::metadata(dir.path().join(file))
            .map(|m| m.len())
            .unwrap_or(0);
        assert!(len > 100, "{file} missing or empty");
    }
    assert!(dir.path().join("checkpoint").is_dir());
    let saved: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join(CONFIG_FILE)).unwrap()).unwrap();
    assert_eq!(saved["model"]["filters"], 8);
    assert_eq!(saved["limit_train"], 2_000);
}

#[test]
fn mlp_trains_on_flattened_digits() {
    let config = ImageTrainingConfig::new(ImageModelConfig::Mlp(MlpConfig::new(784, vec![64], 10)))
        .with_epochs(2)
        .with_limit_train(Some(2_000))
        .with_limit_test(Some(500));
    let splits = ImageSplits::load(
        &ImageSource::Mnist(crate::common::mnist_source()),
        &config,
        None,
    )
    .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let run = Run::fresh(RunDir::claim(dir.path(), &[]).unwrap());
    let device = Default::default();
    let (model, _) = train::<B>(&config, &splits, &run, &[device]).unwrap();
    let accuracy = evaluate(&model, &splits.test, &device, false).accuracy();
    assert!(accuracy >= 0.75, "test accuracy {accuracy}");
}

#[test]
fn invalid_settings_are_refused_before_training() {
    let config = ImageTrainingConfig::new(ImageModelConfig::Simple(SimpleCnnConfig::new()))
        .with_batch_size(0);
    let err = config.validate().unwrap_err();
    assert_eq!(
        err.to_string(),
        "invalid setting: batch-size must be at least 1"
    );
    let config = config.with_batch_size(8).with_valid_fraction(1.0);
    assert!(
        config
            .validate()
            .unwrap_err()
            .to_string()
            .contains("valid-fraction")
    );
}

/// `mnist_cnn` on the CPU with `args` (split at spaces), into a fresh artifact directory: its
/// standard output, after checking that it succeeded.
fn run_mnist_cnn(args: &str) -> String {
    let artifacts = tempfile::tempdir().unwrap();
    let mut command = Command::new(crate::common::example_binary("mnist_cnn"));
    command
        .args(["--backend", "ndarray"])
        .args(args.split_whitespace())
        .arg("--artifact-dir")
        .arg(artifacts.path());
    let output = crate::common::with_mnist_dir(&mut command)
        .output()
        .expect("example binary runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

/// The README's main command, off a terminal: one line per epoch, then the accuracy line.
#[test]
fn mnist_cnn_example_prints_epoch_lines_and_accuracy() {
    let stdout = run_mnist_cnn("--filters 4 --epochs 2 --limit-train 1000 --limit-test 200");
    let lines: Vec<&str> = stdout.lines().collect();
    let epoch_lines: Vec<&&str> = lines.iter().filter(|l| l.starts_with("epoch ")).collect();
    assert_eq!(epoch_lines.len(), 2, "{stdout}");
    let pattern = regex_lite::Regex::new(
        r"^epoch [12]/2  train loss \d+\.\d{4} acc \d+\.\d{2}%  valid loss \d+\.\d{4} acc \d+\.\d{2}%  \d+\.\ds$",
    )
    .unwrap();
    for line in &epoch_lines {
        assert!(pattern.is_match(line), "bad epoch line: {line:?}");
    }
    let last = lines.last().unwrap();
    assert!(
        regex_lite::Regex::new(r"^test accuracy: \d+\.\d{2}%$")
            .unwrap()
            .is_match(last),
        "{last}"
    );
}

/// bf16 asked of a device without bf16 matrix units (the CPU) trains in fp32 and says so; a
/// run that asks nothing says which precision the backend's default gave.
#[test]
fn precision_the_device_lacks_is_named_on_the_output() {
    let stdout =
        run_mnist_cnn("--filters 4 --epochs 1 --limit-train 200 --limit-test 100 --precision bf16");
    let line = "convolutions multiply in fp32: precision bf16 asked, but this device has no bf16 matrix units";
    assert!(stdout.lines().any(|l| l == line), "{stdout}");
    let stdout = run_mnist_cnn("--filters 4 --epochs 1 --limit-train 200 --limit-test 100");
    assert!(
        stdout.lines().any(|l| l == "convolutions multiply in fp32"),
        "{stdout}"
    );
}

/// A backend the build lacks, or one without a device, is one line on stderr and exit code 2.
#[test]
fn unusable_backend_is_one_line_and_exit_code_2() {
    let missing = [BackendKind::Cuda, BackendKind::Wgpu]
        .into_iter()
        .find(|kind| !kind.is_compiled())
        .map(|kind| kind.to_string())
        // With every backend compiled in, CUDA without a GPU (CI, laptops) must fail the same way.
        .unwrap_or_else(|| "cuda".into());
    let output = Command::new(crate::common::example_binary("mnist_cnn"))
        .args(["--backend", &missing, "--data-dir", "/nonexistent"])
        .output()
        .expect("example binary runs");
    let stderr = String::from_utf8_lossy(&output.stderr);
    if output.status.code() == Some(0) {
        panic!("expected failure; did this machine have a GPU? {stderr}");
    }
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with(&format!("error: backend `{missing}`")),
        "{stderr}"
    );
}

/// Two CPU runs of the single-conv CNN with one seed end with the same weights, to the bit:
/// the convolution's backward pass sums a batch's weight gradient in the same order whichever
/// thread finishes first.
#[test]
fn seeded_cnn_runs_on_the_cpu_end_with_the_same_weights_to_the_bit() {
    let root = tempfile::tempdir().unwrap();
    let train = |name: &str| {
        let dir = root.path().join(name);
        let mut command = crate::cli::cubenet();
        command
            .args(["train", "--backend", "ndarray", "--config"])
            .arg(crate::common::configs().join("mnist_cnn.toml"))
            .args(["--set", "model.filters=8", "--set", "data.limit_train=640"])
            .args(["--set", "data.limit_test=100", "--epochs", "2"])
            .arg("--artifact-dir")
            .arg(&dir);
        crate::common::with_mnist_dir(&mut command);
        let (output, _, stderr) = crate::cli::run(&mut command);
        assert!(output.status.success(), "{stderr}");
        let device = Default::default();
        let skeleton = SimpleCnnConfig::new()
            .with_filters(8)
            .init::<NdArray>(&device);
        let model = ImageModel::Cnn(skeleton.unwrap());
        let model = load_model(&RunDir::open(&dir), model, &device).unwrap();
        crate::common::parameter_bits(&crate::common::parameter_values(&model))
    };
    assert_eq!(train("first"), train("second"), "the weights differ");
}
