//! TensorBoard's event files: TensorBoard's own reader finds in them every scalar of the
//! run's metric logs, per iteration and per epoch, with the same values, and the run's
//! settings as hparams; a run killed mid-epoch leaves files it reads, and the resumed run
//! shows each step once.
//!
//! The reader is `read_tensorboard.py` beside this file, run by a Python with `tensorboard`
//! (`$CUBENET_PYTHON`; .ci/run makes one). Without one these tests are skipped, unless
//! `CUBENET_REQUIRE_PYTHON_TOOLS=1`, which CI sets.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::cli::{cubenet, run};
use crate::common::{configs, python_with, run_python, train_mnist_on_cpu};

fn python() -> Option<PathBuf> {
    python_with(&["tensorboard"], "CUBENET_REQUIRE_PYTHON_TOOLS")
}

/// What TensorBoard reads in `folder`: each scalar tag's `(step, value)`s, and the hparams.
fn read_events(python: &Path, folder: &Path) -> (BTreeMap<String, Vec<(i64, f64)>>, Value) {
    let stdout = run_python(python, "tests/suite/read_tensorboard.py", &[folder]);
    let read: Value = serde_json::from_slice(&stdout).expect("JSON");
    let scalars = read["scalars"]
        .as_object()
        .unwrap()
        .iter()
        .map(|(tag, points)| {
            let points = points
                .as_array()
                .unwrap()
                .iter()
                .map(|p| (p[0].as_i64().unwrap(), p[1].as_f64().unwrap()))
                .collect();
            (tag.clone(), points)
        })
        .collect();
    (scalars, read["hparams"].clone())
}

/// Each `(metric, split)`'s logged `(value, count)`s, epoch by epoch.
type MetricLogs = BTreeMap<(String, String), Vec<Vec<(f64, f64)>>>;

/// The entries of burn-train's metric logs in `run_dir`.
fn metric_logs(run_dir: &Path) -> MetricLogs {
    let mut logs = MetricLogs::new();
    for split in ["train", "valid"] {
        for epoch in 1.. {
            let dir = run_dir.join(split).join(format!("epoch-{epoch}"));
            if !dir.is_dir() {
                break;
            }
            for entry in std::fs::read_dir(&dir).unwrap() {
                let path = entry.unwrap().path();
                let metric = path
                    .file_stem()
                    .unwrap()
                    .to_str()
                    .unwrap()
                    .replace('_', " ");
                // The watch's own entry (is this step's loss finite), not a numeric metric.
                if metric == cubenet::train::WATCH_METRIC {
                    continue;
                }
                let entries = std::fs::read_to_string(&path)
                    .unwrap()
                    .lines()
                    .map(|line| {
                        let mut parts = line.split(',').map(|p| p.parse::<f64>().unwrap());
                        (parts.next().unwrap(), parts.next().unwrap_or(1.0))
                    })
                    .collect();
                let epochs = logs.entry((metric, split.to_string())).or_default();
                epochs.resize(epoch - 1, Vec::new());
                epochs.push(entries);
            }
        }
    }
    logs
}

fn assert_same(value: f64, expected: f64, what: &str) {
    // Event scalars are float32.
    let tolerance = 1e-6 * expected.abs().max(1.0);
    assert!(
        (value - expected).abs() <= tolerance,
        "{what}: TensorBoard reads {value}, the metric logs say {expected}"
    );
}

/// Every metric log entry is a scalar TensorBoard reads, per iteration and as its epoch's
/// mean (weighted by the entries' counts, as burn-train's summary takes it), each step once.
fn assert_events_hold_the_metric_logs(run_dir: &Path, scalars: &BTreeMap<String, Vec<(i64, f64)>>) {
    let logs = metric_logs(run_dir);
    assert!(!logs.is_empty(), "no metric logs in {}", run_dir.display());
    for ((metric, split), epochs) in &logs {
        let per_epoch = &scalars[&format!("{metric}/{split}")];
        let steps: Vec<i64> = per_epoch.iter().map(|&(step, _)| step).collect();
        let expected: Vec<i64> = (1..=epochs.len() as i64).collect();
        assert_eq!(steps, expected, "{metric}/{split}: one value per epoch");
        for (epoch, entries) in epochs.iter().enumerate() {
            let sum: f64 = entries.iter().map(|(v, n)| v * n).sum();
            let count: f64 = entries.iter().map(|(_, n)| n).sum();
            let what = format!("{metric}/{split}, epoch {}", epoch + 1);
            assert_same(per_epoch[epoch].1, sum / count, &what);
        }
        let tag = format!("{metric}/{split}/iteration");
        let iterations = &scalars[&tag];
        assert!(
            iterations.windows(2).all(|pair| pair[0].0 < pair[1].0),
            "{tag}: steps rise, each once"
        );
        let logged: Vec<f64> = epochs.iter().flatten().map(|&(v, _)| v).collect();
        assert_eq!(
            iterations.len(),
            logged.len(),
            "{tag}: one value per logged iteration"
        );
        for (index, (&(_, value), expected)) in iterations.iter().zip(&logged).enumerate() {
            assert_same(value, *expected, &format!("{tag}, entry {index}"));
        }
    }
}

#[test]
fn an_image_runs_events_hold_its_metric_logs_speed_and_settings() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let sets = ["data.limit_train=1500", "data.limit_test=100"];
    let (output, _, stderr) = run(&mut train_mnist_on_cpu(
        "mnist_cnn.toml",
        &sets,
        2,
        &run_dir,
    ));
    assert!(output.status.success(), "{stderr}");
    let (scalars, hparams) = read_events(&python, &run_dir.join("tensorboard"));
    assert_events_hold_the_metric_logs(&run_dir, &scalars);
    for tag in ["Loss/valid", "Accuracy/train", "Learning Rate/train"] {
        assert!(
            scalars.contains_key(tag),
            "no {tag} in {:?}",
            scalars.keys()
        );
    }
    let speed = &scalars["Speed/images_per_second"];
    assert_eq!(speed.len(), 2, "one speed per epoch");
    assert!(speed.iter().all(|&(_, images)| images > 0.0), "{speed:?}");
    assert_eq!(hparams["epochs"], 2.0, "{hparams}");
    assert_eq!(hparams["batch_size"], 64.0, "{hparams}");
    assert!(hparams["learning_rate"].as_f64().is_some(), "{hparams}");

    // `tensorboard = false` writes none, and a fresh run clears the earlier run's.
    let sets = [
        "data.limit_train=500",
        "data.limit_test=100",
        "training.tensorboard=false",
    ];
    let (output, _, stderr) = run(&mut train_mnist_on_cpu(
        "mnist_cnn.toml",
        &sets,
        1,
        &run_dir,
    ));
    assert!(output.status.success(), "{stderr}");
    let left = std::fs::read_dir(run_dir.join("tensorboard"))
        .unwrap()
        .count();
    assert_eq!(left, 0, "event files after a run without them");
}

#[test]
fn a_run_killed_mid_epoch_leaves_readable_events_and_its_resume_shows_each_step_once() {
    let Some(python) = python() else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let run_dir = dir.path().join("run");
    let regression = |epochs: &str| {
        let mut command = cubenet();
        command
            .args(["train", "--config"])
            .arg(configs().join("linear_regression.toml"))
            .args(["--set", "data.rows=40000", "--batch-size", "16"])
            .args(["--epochs", epochs, "--artifact-dir"])
            .arg(&run_dir);
        command
    };
    let mut child = regression("50")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let second = run_dir.join("checkpoint/model-2.mpk");
    let start = Instant::now();
    while !second.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no second epoch"
        );
        assert!(child.try_wait().unwrap().is_none(), "the run ended early");
        std::thread::sleep(Duration::from_millis(5));
    }
    // Into the third epoch, then SIGKILL: no chance to finish a record or flush a buffer.
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    let events = run_dir.join("tensorboard");
    let (scalars, _) = read_events(&python, &events);
    let epochs = &scalars["Loss/train"];
    assert!(
        epochs.len() >= 2,
        "the finished epochs are read: {epochs:?}"
    );

    // A record cut in the middle, as a kill during a write leaves it: read up to before it.
    let files: Vec<PathBuf> = std::fs::read_dir(&events)
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .collect();
    let [file] = files.as_slice() else {
        panic!("one event file per process: {files:?}");
    };
    let cut = dir.path().join("cut");
    std::fs::create_dir(&cut).unwrap();
    let bytes = std::fs::read(file).unwrap();
    // The kill may have left a record's start already; cut into the last whole one.
    let mut whole = 0;
    while let Some(length) = bytes.get(whole..whole + 8) {
        let length = u64::from_le_bytes(length.try_into().unwrap()) as usize;
        match whole + 16 + length {
            end if end <= bytes.len() => whole = end,
            _ => break,
        }
    }
    std::fs::write(cut.join(file.file_name().unwrap()), &bytes[..whole - 5]).unwrap();
    let (cut_scalars, _) = read_events(&python, &cut);
    let count = |scalars: &BTreeMap<String, Vec<(i64, f64)>>| -> usize {
        scalars.values().map(Vec::len).sum()
    };
    assert_eq!(
        count(&cut_scalars),
        count(&scalars) - 1,
        "all but the cut record"
    );

    let (output, _, stderr) = run(regression("4").arg("--resume"));
    assert!(output.status.success(), "{stderr}");
    let (scalars, _) = read_events(&python, &events);
    assert_events_hold_the_metric_logs(&run_dir, &scalars);
    assert_eq!(
        scalars["Loss/train"].len(),
        4,
        "{:?}",
        scalars["Loss/train"]
    );
}
