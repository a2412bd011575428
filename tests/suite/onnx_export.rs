//! `cubenet export --format onnx`: every kind of network cubenet trains becomes a graph that
//! onnx's checker accepts and ONNX Runtime runs to cubenet's outputs, at batch 1 and 64, with
//! the preprocessing in the graph or left to the caller.
//!
//! The ONNX side is `onnx_runtime.py` beside this file, run by a Python with `onnx` and
//! `onnxruntime` (`$CUBENET_PYTHON`; .ci/run makes one). Without one these tests are skipped,
//! unless `CUBENET_REQUIRE_PYTHON_TOOLS=1`, which CI sets.

use std::path::{Path, PathBuf};

use burn::prelude::*;
use burn::tensor::activation::softmax;
use cubenet::data::{MnistSplit, Table, TableSource, synthetic};
use cubenet::device::BackendKind;
use cubenet::model::{Activation, Task};
use cubenet::train::tabular::{OptimizerConfig, TabularConfig, TabularSplits};
use cubenet::train::train_splits;
use cubenet::train::{
    ExportFormat, OnnxSidecar, Preprocessing, export_image_model, onnx_sidecar_path,
};

use crate::cli::{cubenet, run};
use crate::common::{mnist_source, python_with, run_python, train_mnist_on_cpu};
use crate::torch_weights::{IMAGES, networks, saved, test_images, trained_like};

/// The largest difference allowed between cubenet's outputs and ONNX Runtime's.
const TOLERANCE: f32 = 1e-4;

fn python() -> Option<PathBuf> {
    python_with(&["onnx", "onnxruntime"], "CUBENET_REQUIRE_PYTHON_TOOLS")
}

/// ONNX Runtime's outputs of `model` for `inputs` (examples one after another), `batch` at a
/// time, and the model's metadata.
fn onnx_runtime(
    python: &Path,
    model: &Path,
    inputs: &[f32],
    batch: usize,
) -> (Vec<f32>, serde_json::Value) {
    let dir = tempfile::tempdir().unwrap();
    let (inputs_file, outputs_file) = (dir.path().join("in.f32"), dir.path().join("out.f32"));
    let bytes: Vec<u8> = inputs.iter().flat_map(|v| v.to_le_bytes()).collect();
    std::fs::write(&inputs_file, bytes).unwrap();
    let batch = batch.to_string();
    let args = [
        model.as_os_str(),
        inputs_file.as_os_str(),
        outputs_file.as_os_str(),
        batch.as_ref(),
    ];
    let stdout = run_python(python, "tests/suite/onnx_runtime.py", &args);
    let outputs = std::fs::read(&outputs_file)
        .unwrap()
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect();
    let metadata = serde_json::from_slice(&stdout).expect("metadata JSON");
    (outputs, metadata)
}

/// The largest difference of `ours` from `theirs`, which must be as long.
fn worst_difference(ours: &[f32], theirs: &[f32], what: &str) -> f32 {
    assert_eq!(ours.len(), theirs.len(), "{what}: output counts");
    ours.iter()
        .zip(theirs)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0, f32::max)
}

/// The index of the largest value of each row of `width` values.
fn argmax_rows(values: &[f32], width: usize) -> Vec<usize> {
    values
        .chunks_exact(width)
        .map(|row| {
            (0..width)
                .max_by(|&a, &b| row[a].total_cmp(&row[b]))
                .unwrap()
        })
        .collect()
}

#[test]
fn every_image_network_runs_in_onnx_runtime_as_in_cubenet() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let images = test_images();
    let normalized = images.clone().into_data().to_vec::<f32>().unwrap();
    let test = mnist_source().load(MnistSplit::Test).unwrap();
    let pixels: Vec<f32> = test.pixels()[..IMAGES * 784]
        .iter()
        .map(|&p| f32::from(p))
        .collect();
    for (name, config) in networks() {
        let model = trained_like(&config);
        let logits = model.forward(images.clone());
        let probabilities = softmax(logits.clone(), 1)
            .into_data()
            .to_vec::<f32>()
            .unwrap();
        let logits = logits.into_data().to_vec::<f32>().unwrap();
        for with_preprocessing in [false, true] {
            let output = dir.path().join(format!("{name}-{with_preprocessing}.onnx"));
            let format = ExportFormat::Onnx { with_preprocessing };
            export_image_model(&model, &saved(config.clone()), &output, format).unwrap();
            let sidecar = OnnxSidecar::read(&onnx_sidecar_path(&output)).unwrap();
            assert_eq!(sidecar.input_shape, [1, 28, 28]);
            let (inputs, expected) = match with_preprocessing {
                true => (&pixels, &probabilities),
                false => (&normalized, &logits),
            };
            for batch in [1, 64] {
                let what = format!("{name}, preprocessing {with_preprocessing}, batch {batch}");
                let (outputs, metadata) = onnx_runtime(&python, &output, inputs, batch);
                let worst = worst_difference(expected, &outputs, &what);
                assert!(worst <= TOLERANCE, "{what}: outputs differ by {worst}");
                assert_eq!(
                    argmax_rows(expected, 10),
                    argmax_rows(&outputs, 10),
                    "{what}"
                );
                let classes: Vec<String> =
                    serde_json::from_str(metadata["classes"].as_str().unwrap()).unwrap();
                assert_eq!(
                    classes, sidecar.classes,
                    "{what}: the classes in the metadata"
                );
            }
        }
    }
}

/// A table of `rows` random rows of `x`, `y`, `z` with targets for `task`, off-centre and
/// wide so that the standardization matters.
fn table_for(task: Task, rows: usize) -> Table {
    let base = synthetic::quadrants(rows, 11);
    let mut values = Vec::with_capacity(rows * 4);
    for row in base.values.chunks_exact(3) {
        let (x, y) = (row[0] * 40.0 + 100.0, row[1] * 0.05 - 3.0);
        let z = x * 0.01 + y;
        let target = match task {
            Task::Binary => row[2],
            Task::Multiclass => f32::from(row[0] > 0.0) + 2.0 * f32::from(row[1] > 0.0),
            Task::Regression => (row[0] * 2.0).sin() + row[1],
        };
        values.extend([x, y, z, target]);
    }
    Table {
        columns: ["x", "y", "z", "target"].map(String::from).to_vec(),
        values,
    }
}

#[test]
fn every_kind_of_mlp_runs_in_onnx_runtime_as_in_cubenet() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let activations = [
        (
            Task::Binary,
            vec![Activation::Tanh, Activation::SigmoidGain { gain: 2.0 }],
        ),
        (
            Task::Multiclass,
            vec![Activation::ScaledSigmoid, Activation::Gelu],
        ),
        (
            Task::Regression,
            vec![Activation::Sigmoid, Activation::Silu],
        ),
    ];
    for (task, activations) in activations {
        let what = format!("{task:?}");
        let csv = dir.path().join(format!("{what}.csv"));
        table_for(task, 600).write_csv(&csv).unwrap();
        let features = ["x", "y", "z"].map(String::from).to_vec();
        let config = TabularConfig::new(features, vec!["target".into()], task)
            .with_hidden(vec![8, 6])
            .with_layer_activations(activations)
            .with_optimizer(OptimizerConfig::Adam {
                learning_rate: 0.01,
                l2: 0.0,
            })
            .with_batch_size(Some(32))
            .with_epochs(3);
        let splits = TabularSplits::load(&TableSource::Csv(csv), &config).unwrap();
        let run = dir.path().join(format!("{what}-run"));
        let (model, _) = train_splits(&config, &splits, &run, BackendKind::Ndarray).unwrap();
        let raw = &splits.test.inputs;
        let predicted = model.predict(raw).values;
        for with_preprocessing in [true, false] {
            let output = dir.path().join(format!("{what}-{with_preprocessing}.onnx"));
            model
                .export(&output, ExportFormat::Onnx { with_preprocessing })
                .unwrap();
            let sidecar = OnnxSidecar::read(&onnx_sidecar_path(&output)).unwrap();
            let inputs = match (&sidecar.preprocessing, with_preprocessing) {
                (_, true) => raw.values.clone(),
                (Preprocessing::Table { standardize, .. }, false) => {
                    let s = standardize.as_ref().expect("the run standardized");
                    raw.values
                        .chunks_exact(3)
                        .flat_map(|row| (0..3).map(|i| (row[i] - s.mean[i]) / s.std[i]))
                        .collect()
                }
                (Preprocessing::Images { .. }, false) => unreachable!("a table's export"),
            };
            for batch in [1, 64] {
                let what = format!("{what}, preprocessing {with_preprocessing}, batch {batch}");
                let (outputs, _) = onnx_runtime(&python, &output, &inputs, batch);
                // What `cubenet predict` writes: the value, or the class and its probability.
                let squashed: Vec<f32> = match (task, with_preprocessing) {
                    (Task::Binary, false) => {
                        outputs.iter().map(|l| 1.0 / (1.0 + (-l).exp())).collect()
                    }
                    (Task::Multiclass, false) => {
                        let logits = Tensor::<burn::backend::NdArray, 1>::from_floats(
                            outputs.as_slice(),
                            &Default::default(),
                        );
                        let rows = outputs.len() / 4;
                        softmax(logits.reshape([rows, 4]), 1)
                            .into_data()
                            .to_vec()
                            .unwrap()
                    }
                    _ => outputs,
                };
                let ours: Vec<f32> = match task {
                    Task::Regression => squashed,
                    Task::Binary => squashed
                        .iter()
                        .flat_map(|&p| [f32::from(p > 0.5), p])
                        .collect(),
                    Task::Multiclass => squashed
                        .chunks_exact(4)
                        .zip(argmax_rows(&squashed, 4))
                        .flat_map(|(row, class)| [class as f32, row[class]])
                        .collect(),
                };
                let worst = worst_difference(&predicted, &ours, &what);
                assert!(worst <= TOLERANCE, "{what}: outputs differ by {worst}");
            }
        }
    }
}

#[test]
fn a_trained_run_exports_from_the_command_line_and_classifies_as_cubenet_eval_does() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("lenet");
    let sets = ["data.limit_train=2000", "data.limit_test=500"];
    let (output, _, stderr) = run(&mut train_mnist_on_cpu("lenet.toml", &sets, 1, &run_dir));
    assert!(output.status.success(), "{stderr}");

    let export = |extra: &[&str]| {
        let mut command = cubenet();
        command
            .args(["export", "--format", "onnx", "--model-dir"])
            .arg(&run_dir)
            .args(extra);
        run(&mut command)
    };
    let (output, stdout, stderr) = export(&["--with-preprocessing"]);
    assert!(output.status.success(), "{stderr}");
    let model = run_dir.join("export/model.onnx");
    assert!(stdout.contains("model.onnx.json"), "{stdout}");
    // Written again over its own export; the safetensors export beside it is another file.
    assert!(export(&["--with-preprocessing"]).0.status.success());

    let mut eval = cubenet();
    eval.args(["eval", "--model-dir"]).arg(&run_dir);
    crate::common::with_mnist_dir(&mut eval);
    let (output, stdout, stderr) = run(&mut eval);
    assert!(output.status.success(), "{stderr}");
    let accuracy_line = stdout
        .lines()
        .find(|line| line.starts_with("test accuracy: "))
        .unwrap_or_else(|| panic!("no accuracy in {stdout}"))
        .to_string();

    let test = mnist_source().load(MnistSplit::Test).unwrap();
    let images = 500;
    let pixels: Vec<f32> = test.pixels()[..images * 784]
        .iter()
        .map(|&p| f32::from(p))
        .collect();
    let (probabilities, _) = onnx_runtime(&python, &model, &pixels, 64);
    let correct = argmax_rows(&probabilities, 10)
        .iter()
        .zip(test.labels())
        .filter(|(predicted, label)| **predicted == **label as usize)
        .count();
    let ours = cubenet::train::accuracy_line(correct as f64 / images as f64);
    assert_eq!(
        ours, accuracy_line,
        "ONNX Runtime's accuracy against cubenet eval's"
    );

    // A file of another program's at the output is never replaced.
    let foreign = dir.path().join("theirs.onnx");
    std::fs::write(&foreign, "not ours").unwrap();
    let (output, _, stderr) = export(&["--output", foreign.to_str().unwrap()]);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("not a cubenet export"), "{stderr}");
    assert_eq!(std::fs::read_to_string(&foreign).unwrap(), "not ours");
    let (output, _, stderr) = export(&[
        "--output",
        dir.path().join("m.safetensors").to_str().unwrap(),
    ]);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("<name>.onnx"), "{stderr}");
}
