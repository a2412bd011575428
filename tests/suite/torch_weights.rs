//! Weights in and out under PyTorch's names: an exported network gives PyTorch the logits
//! cubenet computes, PyTorch-initialized weights give cubenet PyTorch's logits, and a file
//! that does not fit is named with its first misfit.
//!
//! The PyTorch side runs `examples/load_in_pytorch.py` with the system's `python3` and its
//! `torch` (Debian's python3-torch in CI). Without them these tests are skipped, unless
//! `CUBENET_REQUIRE_TORCH=1`, which CI sets.

use std::path::{Path, PathBuf};

use burn::backend::{Autodiff, NdArray};
use burn::module::AutodiffModule;
use burn::prelude::*;
use burn::tensor::Distribution;
use cubenet::data::{MNIST_SHAPE, MnistSplit, mnist_classes, mnist_normalization};
use cubenet::model::{
    Activation, CnnConfig, ImageModel, ImageModelConfig, LayerSpecs, LeNetConfig, MlpConfig,
    SimpleCnnConfig,
};
use cubenet::train::{
    ExportFormat, ImageTrainingConfig, SavedImageConfig, export_image_model, read_weights,
    sidecar_path,
};

use crate::cli::{assert_user_error, cubenet, run};
use crate::common::{mnist_source, python_with, run_python};

type B = NdArray;

/// MNIST test images per comparison.
pub(crate) const IMAGES: usize = 100;

/// The largest logit difference allowed between cubenet and PyTorch (float32 both).
const TOLERANCE: f32 = 1e-4;

/// A Python with `torch`; see [`python_with`].
fn python_with_torch() -> Option<PathBuf> {
    python_with(&["torch"], "CUBENET_REQUIRE_TORCH")
}

/// Runs `examples/load_in_pytorch.py` with `args`; panics with its stderr if it fails.
fn load_in_pytorch(python: &Path, args: &[&std::ffi::OsStr]) {
    run_python(python, "examples/load_in_pytorch.py", args);
}

fn run_file_layers(layers: &str) -> LayerSpecs {
    let table: toml::Table = toml::from_str(&format!("layers = [{layers}]")).unwrap();
    table["layers"].clone().try_into().unwrap()
}

/// The networks the export must cover: both presets, a run-file CNN with batch norm (on maps
/// and on features) and dropout, and an MLP with two kinds of activation.
pub(crate) fn networks() -> Vec<(&'static str, ImageModelConfig)> {
    let cnn = CnnConfig::new(
        [1, 28, 28],
        10,
        run_file_layers(
            r#"{ conv = 8, padding = 1 }, { relu = true }, { pool = 2 }, { batch_norm = true },
               { conv = 6, stride = 2 }, { relu = true }, { dense = 24 }, { relu = true },
               { dropout = 0.3 }, { batch_norm = true }, { dense = "classes" }"#,
        ),
    );
    // Residual blocks of each shortcut, GELU and SiLU, batch norm without scale and shift, a
    // conv without bias, average and global pools.
    let residual = CnnConfig::new(
        [1, 28, 28],
        10,
        run_file_layers(
            r#"{ conv = 6, padding = 1, bias = false }, { batch_norm = true }, { gelu = true },
               { residual = [{ conv = 6, padding = 1 }, { relu = true },
                             { conv = 6, padding = 1 }, { batch_norm = true, affine = false }] },
               { relu = true }, { avg_pool = 2 },
               { residual = [{ conv = 10, padding = 1, stride = 2 }, { silu = true }, { conv = 10, padding = 1 }],
                 shortcut = "conv" },
               { residual = [{ conv = 13, padding = 1, stride = 2 }, { relu = true }], shortcut = "option_a" },
               { global_pool = "avg" }, { dense = 12 }, { gelu = true }, { dense = "classes" }"#,
        ),
    );
    let max_pooled = CnnConfig::new(
        [1, 28, 28],
        10,
        run_file_layers(
            r#"{ conv = 4, padding = 1 }, { silu = true },
               { residual = [{ conv = 5, padding = 1 }, { relu = true }, { pool = 2 }],
                 shortcut = "conv" },
               { global_pool = "max" }, { dense = "classes" }"#,
        ),
    );
    vec![
        ("residual cnn", ImageModelConfig::Cnn(residual)),
        (
            "residual cnn, max-pooled",
            ImageModelConfig::Cnn(max_pooled),
        ),
        (
            "lenet",
            ImageModelConfig::Lenet(LeNetConfig::new().with_channels([6, 12]).with_hidden(32)),
        ),
        (
            "single-conv",
            ImageModelConfig::Simple(SimpleCnnConfig::new().with_filters(8)),
        ),
        ("run-file cnn", ImageModelConfig::Cnn(cnn)),
        (
            "mlp",
            ImageModelConfig::Mlp(
                MlpConfig::new(784, vec![40, 20], 10)
                    .with_layer_activations(vec![Activation::Tanh, Activation::Relu]),
            ),
        ),
    ]
}

/// `config`'s network with batch norm statistics that are not the initial 0 and 1: a few
/// training-mode passes move them, as training does.
pub(crate) fn trained_like(config: &ImageModelConfig) -> ImageModel<B> {
    let device = Default::default();
    let model = config.init::<Autodiff<B>>(&device).unwrap();
    for _ in 0..3 {
        let images = Tensor::random([16, 1, 28, 28], Distribution::Normal(0.5, 1.0), &device);
        let _ = model.forward(images);
    }
    model.valid()
}

/// The first [`IMAGES`] MNIST test images, normalized as an MNIST run normalizes them.
pub(crate) fn test_images() -> Tensor<B, 4> {
    let normalization = mnist_normalization();
    let test = mnist_source().load(MnistSplit::Test).unwrap();
    let pixels: Vec<f32> = test.pixels()[..IMAGES * 784]
        .iter()
        .map(|&p| (f32::from(p) / 255.0 - normalization.mean[0]) / normalization.std[0])
        .collect();
    Tensor::<B, 1>::from_floats(pixels.as_slice(), &Default::default()).reshape([IMAGES, 1, 28, 28])
}

pub(crate) fn write_f32(path: &Path, tensor: Tensor<B, 4>) {
    let values = tensor.into_data().to_vec::<f32>().unwrap();
    let bytes: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(path, bytes).unwrap();
}

pub(crate) fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn assert_close(cubenet: Tensor<B, 2>, pytorch: &[f32], what: &str) {
    let cubenet = cubenet.into_data().to_vec::<f32>().unwrap();
    assert_eq!(cubenet.len(), pytorch.len(), "{what}: logit counts");
    assert_eq!(cubenet.len(), IMAGES * 10, "{what}: logit counts");
    let worst = cubenet
        .iter()
        .zip(pytorch)
        .map(|(a, b)| (a - b).abs())
        .fold(0f32, f32::max);
    assert!(worst < TOLERANCE, "{what}: logits differ by {worst}");
}

pub(crate) fn saved(model: ImageModelConfig) -> SavedImageConfig {
    SavedImageConfig {
        config: ImageTrainingConfig::new(model),
        classes: mnist_classes(),
        shape: MNIST_SHAPE,
        normalization: mnist_normalization(),
    }
}

#[test]
fn exported_networks_give_pytorch_the_same_logits_and_pytorch_weights_give_cubenet_its() {
    let Some(python) = python_with_torch() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("inputs.f32");
    let images = test_images();
    write_f32(&inputs, images.clone());
    for (name, config) in networks() {
        let saved = saved(config.clone());
        let sequential = config.sequential().unwrap();

        // cubenet → PyTorch.
        let model = trained_like(&config);
        let weights = dir.path().join(format!("{name}.safetensors"));
        export_image_model(&model, &saved, &weights, ExportFormat::Safetensors).unwrap();
        let outputs = dir.path().join(format!("{name}.out"));
        load_in_pytorch(
            &python,
            &[
                sidecar_path(&weights).as_os_str(),
                "--inputs".as_ref(),
                inputs.as_os_str(),
                "--outputs".as_ref(),
                outputs.as_os_str(),
            ],
        );
        assert_close(model.forward(images.clone()), &read_f32(&outputs), name);

        // PyTorch → cubenet, from safetensors and from a PyTorch state dict.
        for extension in ["safetensors", "pt"] {
            let fresh = dir.path().join(format!("{name}-torch.{extension}"));
            load_in_pytorch(
                &python,
                &[
                    sidecar_path(&weights).as_os_str(),
                    "--fresh".as_ref(),
                    "7".as_ref(),
                    "--save".as_ref(),
                    fresh.as_os_str(),
                    "--inputs".as_ref(),
                    inputs.as_os_str(),
                    "--outputs".as_ref(),
                    outputs.as_os_str(),
                ],
            );
            let model = config.init::<B>(&Default::default()).unwrap();
            let model = read_weights(model, &sequential, &fresh).unwrap();
            let what = format!("{name} from PyTorch's .{extension}");
            assert_close(model.forward(images.clone()), &read_f32(&outputs), &what);
        }
    }
}

#[test]
fn weight_files_that_do_not_fit_are_refused_naming_the_first_misfit() {
    let dir = tempfile::tempdir().unwrap();
    let lenet = |channels| ImageModelConfig::Lenet(LeNetConfig::new().with_channels(channels));
    let weights = dir.path().join("lenet.safetensors");
    let config = lenet([6, 12]);
    export_image_model(
        &trained_like(&config),
        &saved(config),
        &weights,
        ExportFormat::Safetensors,
    )
    .unwrap();
    let load_error = |config: ImageModelConfig, path: &Path| {
        let model = config.init::<B>(&Default::default()).unwrap();
        let sequential = config.sequential().unwrap();
        read_weights(model, &sequential, path)
            .unwrap_err()
            .to_string()
    };

    let message = load_error(lenet([8, 12]), &weights);
    assert!(
        message.contains(&weights.display().to_string()),
        "{message}"
    );
    assert!(
        message.ends_with(
            "`0.weight` (layer 0, Conv2d) is [6, 1, 5, 5] in the file, the network's is \
             [8, 1, 5, 5]"
        ),
        "{message}"
    );
    // Convolutions that fit, then a hidden dense layer of another width.
    let narrower =
        ImageModelConfig::Lenet(LeNetConfig::new().with_channels([6, 12]).with_hidden(64));
    let message = load_error(narrower, &weights);
    assert!(
        message.ends_with(
            "`7.weight` (layer 7, Linear) is [128, 300] in the file, the network's is [64, 300]"
        ),
        "{message}"
    );
    // LeNet's weights in the single-conv CNN: its 3x3 filters are not LeNet's 5x5.
    let simple = ImageModelConfig::Simple(SimpleCnnConfig::new().with_filters(6));
    let message = load_error(simple, &weights);
    assert!(
        message.contains("`0.weight` (layer 0, Conv2d) is [6, 1, 5, 5]"),
        "{message}"
    );
    // An MLP starts with a Flatten, where the file has LeNet's first convolution.
    let mlp = ImageModelConfig::Mlp(MlpConfig::new(784, vec![16], 10));
    let message = load_error(mlp, &weights);
    assert!(
        message.ends_with(
            "`0.weight` (layer 0, Flatten) is in the file, but the network has no such tensor"
        ),
        "{message}"
    );

    let corrupt = dir.path().join("corrupt.safetensors");
    let bytes = std::fs::read(&weights).unwrap();
    std::fs::write(&corrupt, &bytes[..bytes.len() / 2]).unwrap();
    let message = load_error(lenet([6, 12]), &corrupt);
    assert!(message.starts_with(&format!("cannot load a model from {}", corrupt.display())));
    assert!(!message.contains('\n'), "{message}");
    let missing = dir.path().join("missing.pt");
    let message = load_error(lenet([6, 12]), &missing);
    assert!(message.ends_with("no such file"), "{message}");
}

/// The command line: export, `eval` and `predict` from the export, `--init-from` to
/// fine-tune, and what export never overwrites.
#[test]
fn export_eval_from_the_export_and_fine_tune_from_it() {
    let dir = tempfile::tempdir().unwrap();
    let train = |name: &str, extra: &[&str]| {
        let mut command = cubenet();
        command
            .args(["train", "--config"])
            .arg(crate::common::configs().join("xor.toml"))
            .args(["--epochs", "3"])
            .args(extra)
            .arg("--artifact-dir")
            .arg(dir.path().join(name));
        let (output, stdout, stderr) = run(&mut command);
        assert!(output.status.success(), "{stderr}");
        stdout
    };
    train("first", &[]);
    let first = dir.path().join("first");
    let (output, stdout, stderr) = run(cubenet().args(["export", "--model-dir"]).arg(&first));
    assert!(output.status.success(), "{stderr}");
    let export = first.join("export");
    assert!(stdout.contains("model.safetensors"), "{stdout}");
    let sidecar: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(export.join("model.json")).unwrap()).unwrap();
    assert_eq!(sidecar["format"], "cubenet-export/1");
    assert_eq!(sidecar["layers"][0]["layer"], "Linear");

    // The export evaluates and predicts as the run does (an export records no backend).
    let rows = dir.path().join("xor.csv");
    std::fs::write(&rows, "x1,x2,y\n0,0,0\n0,1,1\n1,0,1\n1,1,0\n").unwrap();
    let eval = |model_dir: &Path| {
        let (output, stdout, stderr) = run(cubenet()
            .args(["eval", "--backend", "ndarray", "--model-dir"])
            .arg(model_dir)
            .arg("--csv")
            .arg(&rows));
        assert!(output.status.success(), "{stderr}");
        stdout
    };
    assert_eq!(eval(&first), eval(&export));
    let predict = |model_dir: &Path, name: &str| {
        let predictions = dir.path().join(name);
        let (output, _, stderr) = run(cubenet()
            .args(["predict", "--backend", "ndarray", "--model-dir"])
            .arg(model_dir)
            .arg(&rows)
            .arg("--output")
            .arg(&predictions));
        assert!(output.status.success(), "{stderr}");
        std::fs::read_to_string(predictions).unwrap()
    };
    assert_eq!(predict(&first, "run.csv"), predict(&export, "export.csv"));

    // Exporting again replaces cubenet's own export; a file of the user's is kept.
    let (output, _, stderr) = run(cubenet().args(["export", "--model-dir"]).arg(&first));
    assert!(output.status.success(), "{stderr}");
    let theirs = dir.path().join("theirs.safetensors");
    std::fs::write(&theirs, "the user's file").unwrap();
    assert_user_error(
        cubenet()
            .args(["export", "--model-dir"])
            .arg(&first)
            .arg("--output")
            .arg(&theirs),
        "is not a cubenet export",
    );
    assert_eq!(std::fs::read_to_string(&theirs).unwrap(), "the user's file");

    // Fine-tuning starts from the export; weights of another network are one line.
    train(
        "tuned",
        &[
            "--init-from",
            export.join("model.safetensors").to_str().unwrap(),
        ],
    );
    let mut other = cubenet();
    other
        .args(["train", "--config"])
        .arg(crate::common::configs().join("xor.toml"))
        .args(["--set", "model.hidden=[5]", "--init-from"])
        .arg(export.join("model.safetensors"))
        .arg("--artifact-dir")
        .arg(dir.path().join("other"));
    assert_user_error(&mut other, "`0.weight` (layer 0, Linear)");
}

/// The hand-written residual run file trained by `cubenet train` for one epoch of 10,000
/// MNIST images learns the digits, and its export gives PyTorch the logits cubenet computes.
#[test]
fn a_residual_network_trained_from_its_run_file_learns_and_loads_in_pytorch() {
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let run_file = crate::common::configs().join("mnist_resnet.toml");
    let sets = ["data.limit_train=10000", "data.limit_test=2000"];
    let mut command = crate::common::train_mnist_on_cpu("mnist_resnet.toml", &sets, 1, &run_dir);
    let (output, stdout, stderr) = run(&mut command);
    assert!(output.status.success(), "{stderr}");
    let accuracy: f64 = stdout
        .lines()
        .find_map(|line| line.strip_prefix("test accuracy: ")?.strip_suffix('%'))
        .unwrap_or_else(|| panic!("no accuracy line in {stdout}"))
        .parse()
        .unwrap();
    assert!(accuracy >= 95.0, "test accuracy {accuracy}%");
    assert!(stdout.contains("add the option_a shortcut"), "{stdout}");

    let (output, _, stderr) = run(cubenet().args(["export", "--model-dir"]).arg(&run_dir));
    assert!(output.status.success(), "{stderr}");
    let Some(python) = python_with_torch() else {
        return;
    };
    let table: toml::Table = toml::from_str(&std::fs::read_to_string(&run_file).unwrap()).unwrap();
    let layers: LayerSpecs = table["model"]["layers"].clone().try_into().unwrap();
    let config = CnnConfig::new([1, 28, 28], 10, layers);
    let weights = run_dir.join("export/model.safetensors");
    let model = ImageModelConfig::Cnn(config.clone())
        .init::<B>(&Default::default())
        .unwrap();
    let model = read_weights(model, &config.sequential().unwrap(), &weights).unwrap();
    let inputs = dir.path().join("inputs.f32");
    let outputs = dir.path().join("outputs.f32");
    let images = test_images();
    write_f32(&inputs, images.clone());
    load_in_pytorch(
        &python,
        &[
            sidecar_path(&weights).as_os_str(),
            "--inputs".as_ref(),
            inputs.as_os_str(),
            "--outputs".as_ref(),
            outputs.as_os_str(),
        ],
    );
    assert_close(
        model.forward(images),
        &read_f32(&outputs),
        "trained residual network",
    );
}
