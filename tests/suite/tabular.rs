//! Tabular runs: convergence on the built-in tabular problems, the SGD update against a
//! hand-computed one, every CSV error case, and save → load → predict.

use std::path::Path;

use burn::backend::{Autodiff, NdArray};
use burn::nn::{Linear, LinearConfig};
use burn::optim::{GradientsParams, Optimizer};
use burn::prelude::*;
use cubenet::data::{DataError, SplitRatios, Table, TableSource, synthetic};
use cubenet::device::BackendKind;
use cubenet::model::{Activation, MlpConfig, ModelError, TabularNet, Task};
use cubenet::train::tabular::{OptimizerConfig, Rows, TabularConfig, TabularSplits, TestMetrics};
use cubenet::train::{
    RowModel, RunDir, SavedModel, TrainError, load_model, save_model, train_splits,
};

use crate::cli::{cubenet, run};
use crate::common::configs;

type Cpu = Autodiff<NdArray>;

fn strings(names: &[&str]) -> Vec<String> {
    names.iter().map(|n| n.to_string()).collect()
}

#[test]
fn xor_net_gets_all_four_points() {
    let dir = tempfile::tempdir().unwrap();
    let (inputs, targets) = synthetic::xor().split_columns(2);
    let points = Rows { inputs, targets };
    let splits = TabularSplits::all_in_one(points.clone(), 2);
    let config = TabularConfig::new(strings(&["x1", "x2"]), strings(&["y"]), Task::Binary)
        .with_hidden(vec![4])
        .with_optimizer(OptimizerConfig::Sgd {
            learning_rate: 0.5,
            momentum: 0.9,
            nesterov: false,
            l2: 0.0,
        })
        .with_epochs(600)
        .with_patience(600)
        .with_standardize(false);
    let (model, report) = train_splits(&config, &splits, dir.path(), BackendKind::Ndarray).unwrap();
    assert_eq!(
        report.test,
        Some(TestMetrics::Classification { accuracy: 1.0 })
    );
    let predicted = model.predict(&points.inputs);
    for i in 0..4 {
        let [class, p] = [predicted.row(i)[0], predicted.row(i)[1]];
        assert_eq!(class, points.targets.row(i)[0]);
        assert!(
            (class == 1.0 && p > 0.9) || (class == 0.0 && p < 0.1),
            "point {i}: p = {p}"
        );
    }
}

/// The quadrant classifier of `configs/quadrants.toml`.
fn quadrant_config() -> TabularConfig {
    crate::common::tabular_run_file("quadrants.toml", &["training.seed=3"])
}

/// Trains the quadrant classifier from a CSV beside the artifact directory `dir`; returns
/// the model and its test rows.
fn train_quadrants(dir: &Path) -> (Box<dyn RowModel>, Rows, TestMetrics) {
    let csv = dir.with_extension("csv");
    synthetic::quadrants(8000, 3).write_csv(&csv).unwrap();
    let config = quadrant_config();
    let splits = TabularSplits::load(&TableSource::Csv(csv.clone()), &config).unwrap();
    let (model, report) = train_splits(&config, &splits, dir, BackendKind::Ndarray).unwrap();
    assert_eq!(report.rows, [5600, 1200, 1200]);
    assert!(report.best_epoch >= 1 && report.best_epoch <= report.epochs);
    // Only the best and the last epoch's checkpoints stay.
    let mut kept: Vec<String> = std::fs::read_dir(dir.join("checkpoint"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with("model-"))
        .collect();
    kept.sort();
    let mut expected = vec![
        format!("model-{}.mpk", report.best_epoch),
        format!("model-{}.mpk", report.epochs),
    ];
    expected.sort();
    expected.dedup();
    assert_eq!(kept, expected);
    (model, splits.test, report.test.unwrap())
}

#[test]
fn quadrant_classifier_reaches_99_percent_and_reloads_identically() {
    let root = tempfile::tempdir().unwrap();
    let dir = root.path().join("run");
    let (model, test, metrics) = train_quadrants(&dir);
    let TestMetrics::Classification { accuracy } = metrics else {
        panic!("classification metrics expected, got {metrics:?}");
    };
    assert!(accuracy >= 0.99, "test accuracy {accuracy}");
    for file in [
        "config.json",
        "preprocessing.json",
        "model.mpk",
        "curves.png",
    ] {
        assert!(dir.join(file).is_file(), "{file} missing");
    }

    // save → load → predict gives the same numbers, in memory and through CSV files.
    let loaded = SavedModel::load_tabular(&dir, Some(BackendKind::Ndarray)).unwrap();
    let before = model.predict(&test.inputs);
    let after = loaded.predict(&test.inputs);
    assert_eq!(before, after);
    // The same weights layer by layer, each `[outputs, inputs]` (a binary task has one output).
    let layers = model.dense_layers();
    assert_eq!(layers, loaded.dense_layers());
    let config = model.config();
    let widths: Vec<usize> = std::iter::once(config.features.len())
        .chain(config.hidden.iter().copied())
        .chain([1])
        .collect();
    assert_eq!(layers.len(), widths.len() - 1);
    for (layer, io) in layers.iter().zip(widths.windows(2)) {
        assert_eq!(
            (layer.weight.len(), layer.bias.len()),
            (io[0] * io[1], io[1])
        );
    }

    let input = root.path().join("new.csv");
    let output = root.path().join("predicted.csv");
    let mut rows = test.inputs.clone();
    rows.columns = strings(&["x", "y"]);
    rows.write_csv(&input).unwrap();
    assert_eq!(
        loaded.predict_csv(&input, &output).unwrap(),
        test.inputs.rows()
    );
    let written =
        Table::read_csv(&output, &strings(&["label_predicted", "label_probability"])).unwrap();
    assert_eq!(written.values.len(), before.values.len());
    for (w, b) in written.values.iter().zip(&before.values) {
        assert!((w - b).abs() <= 1e-6 * b.abs().max(1.0), "{w} vs {b}");
    }
}

/// The weights of the tabular run in `dir`, layer by layer, as bits.
fn saved_weight_bits(dir: &Path) -> Vec<Vec<u32>> {
    let model = SavedModel::load_tabular(dir, Some(BackendKind::Ndarray)).unwrap();
    let values: Vec<Vec<f32>> = model
        .dense_layers()
        .into_iter()
        .flat_map(|layer| [layer.weight, layer.bias])
        .collect();
    crate::common::parameter_bits(&values)
}

/// Two runs of `configs/quadrants.toml` with one seed end with the same weights, to the bit:
/// nothing in a CPU step depends on which thread finishes first.
#[test]
fn seeded_quadrant_runs_end_with_the_same_weights_to_the_bit() {
    let root = tempfile::tempdir().unwrap();
    let train = |name: &str| {
        let dir = root.path().join(name);
        let (output, _, stderr) = run(cubenet()
            .args(["train", "--config"])
            .arg(configs().join("quadrants.toml"))
            .args(["--epochs", "10", "--seed", "5", "--artifact-dir"])
            .arg(&dir));
        assert!(output.status.success(), "{stderr}");
        saved_weight_bits(&dir)
    };
    assert_eq!(train("first"), train("second"), "the weights differ");
}

#[test]
fn multiclass_finds_its_classes_and_learns() {
    let dir = tempfile::tempdir().unwrap();
    // Quadrant index 0..4 as the class.
    let mut table = synthetic::quadrants(4000, 5);
    for row in table.values.chunks_exact_mut(3) {
        row[2] = match (row[0] > 0.0, row[1] > 0.0) {
            (true, true) => 0.0,
            (false, true) => 1.0,
            (false, false) => 2.0,
            (true, false) => 3.0,
        };
    }
    let csv = dir.path().join("four.csv");
    table.write_csv(&csv).unwrap();
    let config = TabularConfig::new(strings(&["x", "y"]), strings(&["label"]), Task::Multiclass)
        .with_hidden(vec![16])
        .with_activation(Activation::Relu)
        .with_optimizer(OptimizerConfig::Adam {
            learning_rate: 0.02,
            l2: 0.0,
        })
        .with_batch_size(Some(64))
        .with_epochs(15);
    let splits = TabularSplits::load(&TableSource::Csv(csv.clone()), &config).unwrap();
    assert_eq!(splits.classes, 4);
    let run = dir.path().join("run");
    let (model, report) = train_splits(&config, &splits, &run, BackendKind::Ndarray).unwrap();
    assert_eq!(model.config().classes, Some(4));
    let Some(TestMetrics::Classification { accuracy }) = report.test else {
        panic!("no test accuracy");
    };
    assert!(accuracy > 0.97, "test accuracy {accuracy}");
}

/// Two SGD steps with momentum α and L2 λ against the update formula written out by hand:
/// Δw(t+1) = −η ∂E/∂w + α Δw(t) − η λ w(t).
#[test]
fn sgd_momentum_l2_matches_the_hand_computed_update() {
    let (eta, alpha, lambda) = (0.1f64, 0.9f64, 0.01f64);
    let device = Default::default();
    let net = TabularNet::<Cpu> {
        mlp: MlpConfig::new(2, vec![], 1).init(&device).unwrap(),
        task: Task::Regression,
    };
    let x = [[1.0f64, 2.0], [-1.0, 0.5], [0.5, -1.5]];
    let y = [1.0f64, -2.0, 0.25];
    let batch = || cubenet::data::RowBatch::<Cpu> {
        inputs: Tensor::from_floats([[1.0, 2.0], [-1.0, 0.5], [0.5, -1.5]], &device),
        targets: Tensor::from_floats([[1.0], [-2.0], [0.25]], &device),
    };
    let params = |net: &TabularNet<Cpu>| -> [f64; 3] {
        let layer = &net.mlp.layers()[0];
        let w = layer.weight().into_data().into_vec::<f32>().unwrap();
        let b = layer.bias().into_data().into_vec::<f32>().unwrap();
        [w[0].into(), w[1].into(), b[0].into()]
    };
    // ∂E/∂(w1, w2, b) of the mean squared error, in f64.
    let gradient = |p: [f64; 3]| -> [f64; 3] {
        let mut g = [0.0; 3];
        for (xi, yi) in x.iter().zip(y) {
            let err = p[0] * xi[0] + p[1] * xi[1] + p[2] - yi;
            let scale = 2.0 * err / x.len() as f64;
            g[0] += scale * xi[0];
            g[1] += scale * xi[1];
            g[2] += scale;
        }
        g
    };

    let mut optimizer = OptimizerConfig::sgd(alpha, false, lambda).init::<Cpu>();
    let mut net = net;
    let mut w = params(&net);
    let mut delta = [0.0f64; 3];
    for step in 0..2 {
        let loss = net.forward_loss(batch()).loss;
        let grads = GradientsParams::from_grads(loss.backward(), &net);
        net = optimizer.step(eta, net, grads);
        let g = gradient(w);
        for i in 0..3 {
            delta[i] = -eta * g[i] + alpha * delta[i] - eta * lambda * w[i];
            w[i] += delta[i];
        }
        let got = params(&net);
        for i in 0..3 {
            assert!(
                (got[i] - w[i]).abs() < 1e-5,
                "step {step}, parameter {i}: {} vs {}",
                got[i],
                w[i]
            );
        }
    }
}

/// Until the MLP ran on cubenet's dense layers, its layers were Burn `Linear`s with weights
/// stored `[inputs, outputs]`. A model saved then is refused, even one whose weights are all
/// square (so that every shape matches) rather than loaded transposed.
#[test]
fn models_saved_with_linear_layers_are_refused() {
    #[derive(Module, Debug)]
    struct LinearMlp<B: Backend> {
        layers: Vec<Linear<B>>,
    }
    #[derive(Module, Debug)]
    struct LinearTabularNet<B: Backend> {
        mlp: LinearMlp<B>,
    }
    let dir = tempfile::tempdir().unwrap();
    let device = Default::default();
    let square = || LinearConfig::new(2, 2).init::<NdArray>(&device);
    let saved = LinearTabularNet {
        mlp: LinearMlp {
            layers: vec![square(), square()],
        },
    };
    save_model(&RunDir::open(dir.path()), saved).unwrap();
    let net = TabularNet::<NdArray> {
        mlp: MlpConfig::new(2, vec![2], 2).init(&device).unwrap(),
        task: Task::Regression,
    };
    let err = load_model(&RunDir::open(dir.path()), net, &device)
        .unwrap_err()
        .to_string();
    assert!(err.contains("missing field `dense`"), "{err}");
}

fn parse(csv: &str, columns: &[&str]) -> Result<Table, DataError> {
    Table::parse_csv(csv.as_bytes(), Path::new("data.csv"), &strings(columns))
}

#[test]
fn csv_errors_name_the_file_row_and_column() {
    let ok = parse("id,a, b ,y\nx,1,2,3\nz,4,5,6\n", &["a", "b", "y"]).unwrap();
    assert_eq!((ok.rows(), ok.width()), (2, 3));
    assert_eq!(ok.values, vec![1., 2., 3., 4., 5., 6.]);

    let message = |csv: &str| parse(csv, &["a", "y"]).unwrap_err().to_string();
    assert_eq!(
        message("a,b\n1,2\n"),
        "data.csv has no column `y` (its columns: a, b)"
    );
    assert_eq!(
        message("a,y\n1,2\n3,abc\n"),
        "data.csv line 3, column `y`: `abc` is not a number"
    );
    assert_eq!(
        message("a,y\n1,2\n,4\n"),
        "data.csv line 3, column `a`: missing value"
    );
    assert_eq!(
        message("a,y\n1,2\n3,inf\n"),
        "data.csv line 3, column `y`: `inf` is not a finite number"
    );
    assert_eq!(
        message("a,y\n1,NaN\n"),
        "data.csv line 2, column `y`: `NaN` is not a finite number"
    );
    assert_eq!(message("a,y\n"), "data.csv has no data rows");
    let ragged = message("a,y\n1,2\n3,4,5\n");
    assert!(
        ragged.starts_with("data.csv: ") && ragged.contains("line: 3"),
        "{ragged}"
    );
    assert_eq!(message(""), "data.csv has no data rows");

    let missing = Table::read_csv(Path::new("/no/such.csv"), &strings(&["a"])).unwrap_err();
    assert!(
        missing.to_string().starts_with("cannot read /no/such.csv"),
        "{missing}"
    );
}

#[test]
fn targets_must_fit_the_task() {
    let dir = tempfile::tempdir().unwrap();
    let csv = dir.path().join("t.csv");
    std::fs::write(&csv, "a,y\n1,0\n2,1\n3,2\n4,1\n5,0\n6,1\n7,0\n").unwrap();
    let config = |task| TabularConfig::new(strings(&["a"]), strings(&["y"]), task);
    let err =
        TabularSplits::load(&TableSource::Csv(csv.clone()), &config(Task::Binary)).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("t.csv data row 3, column `y`: binary targets are 0 or 1, got 2"),
        "{err}"
    );
    let err = TabularSplits::load(
        &TableSource::Csv(csv.clone()),
        &config(Task::Multiclass).with_classes(Some(2)),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("data row 3") && err.contains("label 2"),
        "{err}"
    );
    std::fs::write(&csv, "a,y\n1,0\n2,1.5\n3,1\n").unwrap();
    let err = TabularSplits::load(&TableSource::Csv(csv.clone()), &config(Task::Multiclass))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("data row 2") && err.contains("got 1.5"),
        "{err}"
    );
}

#[test]
fn impossible_settings_are_refused() {
    let base = || TabularConfig::new(strings(&["a", "b"]), strings(&["y"]), Task::Regression);
    let refused = |config: TabularConfig| config.validate().unwrap_err().to_string();
    let no_features = TabularConfig::new(vec![], strings(&["y"]), Task::Regression);
    assert!(refused(no_features).contains("feature"));
    let overlap = TabularConfig::new(strings(&["a"]), strings(&["a"]), Task::Regression);
    assert!(refused(overlap).contains("`a` is both"));
    assert!(
        refused(TabularConfig::new(
            strings(&["a"]),
            strings(&["y", "z"]),
            Task::Binary
        ))
        .contains("exactly one target")
    );
    assert!(refused(base().with_batch_size(Some(0))).contains("batch-size"));
    let sgd = |learning_rate, momentum, l2| OptimizerConfig::Sgd {
        learning_rate,
        momentum,
        nesterov: false,
        l2,
    };
    assert!(refused(base().with_optimizer(sgd(0.0, 0.9, 0.0))).contains("learning rate"));
    assert!(refused(base().with_optimizer(sgd(0.1, 1.0, 0.0))).contains("momentum"));
    assert!(refused(base().with_optimizer(sgd(0.1, 0.5, -1.0))).contains("l2"));
    let err = base()
        .with_hidden(vec![4, 4])
        .with_layer_activations(vec![Activation::Tanh])
        .validate()
        .unwrap_err();
    assert!(
        matches!(
            err,
            TrainError::Model(ModelError::ActivationCount {
                given: 1,
                hidden: 2
            })
        ),
        "{err}"
    );
    assert!("0.5:0.5".parse::<SplitRatios>().is_err());
}
