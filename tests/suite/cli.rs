//! The `cubenet` command: run files, user errors, resuming after SIGKILL, the NaN guard,
//! eval and predict.

use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use burn::backend::NdArray;
use cubenet::device::BackendKind;
use cubenet::model::{ImageModel, SimpleCnnConfig};
use cubenet::run_file::RunConfig;
use cubenet::train::{RunDir, SavedModel, load_model};

use crate::common::{configs, parameter_bits, parameter_values};

pub(crate) fn cubenet() -> Command {
    Command::new(env!("CARGO_BIN_EXE_cubenet"))
}

pub(crate) fn run(command: &mut Command) -> (Output, String, String) {
    let output = command.output().expect("cubenet runs");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output, stdout, stderr)
}

/// A user error: exit code 2 and one line on stderr naming `named`.
pub(crate) fn assert_user_error(command: &mut Command, named: &str) {
    let (output, _, stderr) = run(command);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(named),
        "{stderr}"
    );
}

#[test]
fn every_shipped_config_resolves_and_prints_back_to_itself() {
    let mut count = 0;
    for entry in std::fs::read_dir(configs()).unwrap() {
        let path = entry.unwrap().path();
        let config = RunConfig::load(&path, &[]).unwrap();
        let (resolved, _) = config
            .resolve()
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        let (output, stdout, stderr) = run(cubenet()
            .args(["train", "--print-config", "--config"])
            .arg(&path));
        assert!(output.status.success(), "{stderr}");
        let printed = RunConfig::load_str(&stdout, &[]).unwrap();
        assert_eq!(printed, resolved, "{}", path.display());
        count += 1;
    }
    assert!(count >= 7, "configs/ has {count} files");
}

#[test]
fn bad_run_files_and_flags_are_one_line_and_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let typo = dir.path().join("typo.toml");
    std::fs::write(&typo, "[data]\nkind = \"mnist\"\n[training]\nepohcs = 3\n").unwrap();
    assert_user_error(
        cubenet().args(["train", "--config"]).arg(&typo),
        "unknown field `epohcs`",
    );
    assert_user_error(
        cubenet()
            .args(["train", "--config"])
            .arg(configs().join("xor.toml"))
            .args(["--set", "model.hiden=[3]"]),
        "unknown field `hiden`",
    );
    assert_user_error(
        cubenet().args(["train", "--config", "/nonexistent/run.toml"]),
        "/nonexistent/run.toml",
    );
    let broken = dir.path().join("broken.toml");
    std::fs::write(&broken, "[data\nkind = 1\n").unwrap();
    assert_user_error(
        cubenet().args(["train", "--config"]).arg(&broken),
        "broken.toml",
    );
    assert_user_error(
        cubenet()
            .args(["train", "--config"])
            .arg(configs().join("xor.toml"))
            .args(["--set", "model.hidden=[0]"]),
        "hidden",
    );
    assert_user_error(
        cubenet().args(["eval", "--model-dir", "/nonexistent/run"]),
        "/nonexistent/run",
    );
}

/// With every backend compiled in (CI), CUDA without a GPU must be one line too.
#[test]
fn cuda_without_a_gpu_is_one_line_and_exit_code_2() {
    if cubenet::device::check_device(cubenet::device::BackendKind::Cuda).is_ok() {
        return; // this machine has a GPU: there is no error to see
    }
    let dir = tempfile::tempdir().unwrap();
    assert_user_error(
        cubenet()
            .args(["train", "--backend", "cuda", "--config"])
            .arg(configs().join("xor.toml"))
            .arg("--artifact-dir")
            .arg(dir.path()),
        "cuda",
    );
}

#[test]
fn info_lists_every_backend() {
    let (output, stdout, stderr) = run(cubenet().arg("info"));
    assert!(output.status.success(), "{stderr}");
    for backend in ["ndarray", "cuda", "wgpu"] {
        assert!(stdout.contains(backend), "{stdout}");
    }
    assert!(
        stdout.contains("ndarray  compiled in, device found"),
        "{stdout}"
    );
    // NCCL's line: its version and path, or (as on CI machines) one line on how to get it.
    let nccl = stdout
        .lines()
        .find(|line| line.starts_with("nccl "))
        .unwrap_or_else(|| panic!("no nccl line in {stdout}"));
    assert!(
        nccl.contains("libnccl.so.2") && (nccl.contains(" at /") || nccl.contains("install")),
        "{nccl}"
    );
}

/// A regression run big enough that killing it mid-epoch is easy to time.
fn resumable_run(dir: &Path) -> Command {
    let mut command = cubenet();
    command
        .args(["train", "--config"])
        .arg(configs().join("linear_regression.toml"))
        .args([
            "--set",
            "data.rows=40000",
            "--epochs",
            "6",
            "--batch-size",
            "16",
        ])
        .arg("--artifact-dir")
        .arg(dir);
    command
}

/// The test metrics line of a tabular run's output.
fn test_line(stdout: &str) -> String {
    stdout
        .lines()
        .find(|l| l.starts_with("test "))
        .unwrap_or_else(|| panic!("no test line in {stdout}"))
        .to_string()
}

#[test]
fn a_run_killed_mid_epoch_resumes_to_the_same_weights_and_metrics() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    let (output, whole_out, stderr) = run(&mut resumable_run(&whole));
    assert!(output.status.success(), "{stderr}");

    let killed = dir.path().join("killed");
    kill_after_epoch(resumable_run(&killed), &killed, 2);

    // A copy whose newest checkpoint is damaged resumes from the one before it.
    let damaged = dir.path().join("damaged");
    copy_dir(&killed, &damaged);
    let optim = damaged.join("checkpoint/optim-2.mpk");
    let bytes = std::fs::read(&optim).unwrap();
    std::fs::write(&optim, &bytes[..bytes.len() / 3]).unwrap();

    let (output, resumed_out, stderr) = run(resumable_run(&killed).arg("--resume"));
    assert!(output.status.success(), "{stderr}");
    assert!(
        resumed_out.contains("resuming after epoch"),
        "{resumed_out}"
    );
    assert_eq!(test_line(&resumed_out), test_line(&whole_out));
    let (output, fallback_out, stderr) = run(resumable_run(&damaged).arg("--resume"));
    assert!(output.status.success(), "{stderr}");
    assert!(
        fallback_out.contains("optim-2.mpk: the file is damaged or truncated")
            && fallback_out.contains("resuming after epoch 1"),
        "{fallback_out}"
    );
    assert_eq!(test_line(&fallback_out), test_line(&whole_out));
    // The same weights: bit-identical predictions on fresh rows.
    let rows = cubenet::data::synthetic::linear(200, 7).split_columns(3).0;
    let predict = |dir: &Path| {
        let model = SavedModel::load_tabular(dir, Some(BackendKind::Ndarray)).unwrap();
        model.predict(&rows).values
    };
    assert_eq!(predict(&killed), predict(&whole), "final weights differ");
    assert_eq!(predict(&damaged), predict(&whole), "final weights differ");
    let no_partials = std::fs::read_dir(killed.join("checkpoint"))
        .unwrap()
        .all(|e| {
            !e.unwrap()
                .file_name()
                .to_string_lossy()
                .starts_with(".partial")
        });
    assert!(no_partials);
}

/// Starts `command`, a run into `dir`, and kills it (SIGKILL) at the start of the epoch
/// after `epoch`, once that epoch's checkpoint is whole.
fn kill_after_epoch(mut command: Command, dir: &Path, epoch: usize) {
    let mut child = command
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let checkpoint = dir.join(format!("checkpoint/scheduler-{epoch}.mpk"));
    let start = Instant::now();
    while !checkpoint.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(300),
            "no checkpoint {epoch}"
        );
        assert!(
            child.try_wait().unwrap().is_none(),
            "the run ended before it was killed"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    std::thread::sleep(Duration::from_millis(20));
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    assert!(
        !dir.join("model.mpk").exists(),
        "the run finished before the kill"
    );
}

/// An MNIST run of the single-conv CNN on the CPU, its images held on the device (the
/// default): small enough for a test, long enough that a kill lands inside an epoch.
fn resumable_image_run(dir: &Path) -> Command {
    let sets = [
        "model.filters=4",
        "data.limit_train=24000",
        "data.limit_test=500",
    ];
    crate::common::train_mnist_on_cpu("mnist_cnn.toml", &sets, 4, dir)
}

#[test]
fn an_image_run_on_device_data_killed_mid_epoch_resumes_to_the_same_weights() {
    let dir = tempfile::tempdir().unwrap();
    let whole = dir.path().join("whole");
    let (output, whole_out, stderr) = run(&mut resumable_image_run(&whole));
    assert!(output.status.success(), "{stderr}");
    assert!(
        whole_out.contains("training data on the device"),
        "{whole_out}"
    );
    let killed = dir.path().join("killed");
    kill_after_epoch(resumable_image_run(&killed), &killed, 2);
    let (output, resumed_out, stderr) = run(resumable_image_run(&killed).arg("--resume"));
    assert!(output.status.success(), "{stderr}");
    assert!(
        resumed_out.contains("resuming after epoch 2"),
        "{resumed_out}"
    );
    // The same weights to the bit, so the same test accuracy: the CPU kernels add a batch's
    // gradients in the same order on every run (the files still differ, by their
    // per-process parameter ids).
    let accuracy = |out: &str| out.lines().last().unwrap_or_default().to_string();
    assert!(
        accuracy(&whole_out).starts_with("test accuracy: "),
        "{whole_out}"
    );
    assert_eq!(accuracy(&resumed_out), accuracy(&whole_out));
    let weights = |dir: &Path| {
        let device = Default::default();
        let skeleton = SimpleCnnConfig::new()
            .with_filters(4)
            .init::<NdArray>(&device);
        let model = ImageModel::Cnn(skeleton.unwrap());
        parameter_values(&load_model(&RunDir::open(dir), model, &device).unwrap())
    };
    assert_eq!(
        parameter_bits(&weights(&killed)),
        parameter_bits(&weights(&whole)),
        "the resumed run's weights differ"
    );
}

/// Copies the folder `from` (files and folders, recursively) to `to`.
fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let path = entry.unwrap().path();
        let target = to.join(path.file_name().unwrap());
        match path.is_dir() {
            true => copy_dir(&path, &target),
            false => drop(std::fs::copy(&path, &target).unwrap()),
        }
    }
}

#[test]
fn resume_refuses_other_settings() {
    let dir = tempfile::tempdir().unwrap();
    let xor = |extra: &[&str]| {
        let mut command = cubenet();
        command
            .args(["train", "--config"])
            .arg(configs().join("xor.toml"))
            .args(extra)
            .arg("--artifact-dir")
            .arg(dir.path());
        command
    };
    assert!(run(&mut xor(&["--epochs", "2"])).0.status.success());
    assert_user_error(
        &mut xor(&["--epochs", "2", "--resume", "--set", "model.hidden=[8]"]),
        "other settings (hidden)",
    );
    // More epochs and another learning rate are allowed.
    let (output, stdout, stderr) = run(&mut xor(&["--resume", "--epochs", "4", "--lr", "0.2"]));
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("resuming after epoch 2"), "{stdout}");
    // The resumed epochs are logged under their own numbers, not over epochs 1 and 2.
    for epoch in 1..=4 {
        let log = dir.path().join(format!("valid/epoch-{epoch}/Loss.log"));
        assert!(log.is_file(), "no {}", log.display());
    }
}

#[test]
fn a_diverging_run_stops_at_the_first_non_finite_loss() {
    let dir = tempfile::tempdir().unwrap();
    let linear = |extra: &[&str]| {
        let mut command = cubenet();
        command
            .args(["train", "--config"])
            .arg(configs().join("linear_regression.toml"))
            .args(["--set", "data.rows=2000"])
            .args(extra)
            .arg("--artifact-dir")
            .arg(dir.path());
        command
    };
    assert!(run(&mut linear(&["--epochs", "2"])).0.status.success());
    // Resumed with a learning rate far too high: epoch 3 diverges.
    let (output, stdout, stderr) = run(&mut linear(&["--epochs", "4", "--lr", "1e6", "--resume"]));
    assert_eq!(output.status.code(), Some(2), "{stdout}\n{stderr}");
    let error = stderr.lines().last().unwrap();
    let pattern = regex_lite::Regex::new(
        r"^error: training stopped: the loss became (NaN|inf) at epoch 3, step \d+; .*learning rate.*1000000.*epoch 2\)$",
    )
    .unwrap();
    assert!(pattern.is_match(error), "{error}");
    // Epoch 3 never reached a checkpoint; epoch 2's is whole.
    assert_eq!(
        RunDir::open(dir.path()).last_complete_checkpoint().unwrap(),
        Some(2)
    );
    assert!(!dir.path().join("checkpoint/model-3.mpk").exists());
}

#[test]
fn eval_and_predict_a_tabular_run() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    let (output, train_out, stderr) = run(cubenet()
        .args(["train", "--config"])
        .arg(configs().join("quadrants.toml"))
        .args(["--set", "data.rows=2000", "--epochs", "5", "--artifact-dir"])
        .arg(&model));
    assert!(output.status.success(), "{stderr}");
    // eval re-creates the run's test split from run.toml: the same accuracy as training's.
    let (output, eval_out, stderr) = run(cubenet().args(["eval", "--model-dir"]).arg(&model));
    assert!(output.status.success(), "{stderr}");
    assert_eq!(test_line(&eval_out), test_line(&train_out));

    let input = dir.path().join("points.csv");
    std::fs::write(&input, "x,y\n0.5,0.5\n-0.5,0.5\n").unwrap();
    let (output, stdout, stderr) = run(cubenet()
        .args(["predict", "--model-dir"])
        .arg(&model)
        .arg(&input));
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("wrote 2 predictions"), "{stdout}");
    let written = std::fs::read_to_string(dir.path().join("points-predictions.csv")).unwrap();
    assert_eq!(written.lines().count(), 3, "{written}");
}

#[test]
fn eval_and_predict_an_image_run() {
    let dir = tempfile::tempdir().unwrap();
    let model = dir.path().join("model");
    let (output, stdout, stderr) = run(crate::common::with_mnist_dir(cubenet().args([
        "train",
        "--backend",
        "ndarray",
        "--epochs",
        "1",
    ]))
    .args(["--set", "model.filters=4", "--set", "data.limit_train=2000"])
    .args(["--set", "data.limit_test=500", "--artifact-dir"])
    .arg(&model));
    assert!(output.status.success(), "{stderr}");
    assert!(stdout.contains("test accuracy"), "{stdout}");
    let (output, stdout, stderr) = run(cubenet().args(["eval", "--model-dir"]).arg(&model));
    assert!(output.status.success(), "{stderr}");
    // The per-class table, then the overall accuracy.
    let accuracy: f64 = stdout
        .lines()
        .last()
        .and_then(|line| line.strip_prefix("test accuracy: "))
        .and_then(|s| s.strip_suffix('%'))
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(accuracy > 50.0, "{stdout}");

    // The first test image as a PNG; the model's answer is a digit with a probability.
    let test = crate::common::mnist_source()
        .load(cubenet::data::MnistSplit::Test)
        .unwrap();
    let png = dir.path().join("digit.png");
    image::GrayImage::from_raw(28, 28, test.image(0).to_vec())
        .unwrap()
        .save(&png)
        .unwrap();
    let (output, stdout, stderr) = run(cubenet()
        .args(["predict", "--model-dir"])
        .arg(&model)
        .arg(&png));
    assert!(output.status.success(), "{stderr}");
    assert!(
        regex_lite::Regex::new(r"^digit \d \(probability [01]\.\d{4}\)$")
            .unwrap()
            .is_match(stdout.trim()),
        "{stdout}"
    );
}

/// Burn loads a record of another network without complaint; cubenet refuses it.
#[test]
fn a_model_or_checkpoint_of_another_network_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let xor = |name: &str, extra: &[&str]| {
        let mut command = cubenet();
        command
            .args(["train", "--config"])
            .arg(configs().join("xor.toml"))
            .args(["--epochs", "2"])
            .args(extra)
            .arg("--artifact-dir")
            .arg(dir.path().join(name));
        command
    };
    assert!(run(&mut xor("four", &[])).0.status.success());
    assert!(
        run(&mut xor("seven", &["--set", "model.hidden=[7]"]))
            .0
            .status
            .success()
    );
    let (four, seven) = (dir.path().join("four"), dir.path().join("seven"));
    for file in ["model.mpk", "checkpoint/model-2.mpk"] {
        std::fs::copy(seven.join(file), four.join(file)).unwrap();
    }
    assert_user_error(
        cubenet().args(["eval", "--model-dir"]).arg(&four),
        "holds another network",
    );
    assert_user_error(
        &mut xor("four", &["--resume", "--set", "training.epochs=3"]),
        "holds another network",
    );
}
