//! Helpers shared by the integration tests.

use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use cubenet::data::MnistSource;
use cubenet::run_file::{Job, RunConfig};
use cubenet::train::tabular::TabularConfig;

/// Real MNIST for tests, found the way the README says: `$CUBENET_MNIST_DIR`, else the IDX
/// files in `shared/datasets/mnist` beside the checkout (CI has them), else burn-dataset's
/// download (a fresh machine online).
pub fn mnist_source() -> MnistSource {
    if let Some(dir) = std::env::var_os("CUBENET_MNIST_DIR") {
        return MnistSource::Dir(PathBuf::from(dir));
    }
    // `cargo test` sets the variable at run time too; prefer it, the checkout may have moved.
    let root = std::env::var_os("CARGO_MANIFEST_DIR")
        .map_or(PathBuf::from(env!("CARGO_MANIFEST_DIR")), PathBuf::from);
    let shared = root.join("../shared/datasets/mnist");
    if shared.is_dir() {
        MnistSource::Dir(shared)
    } else {
        MnistSource::Download
    }
}

/// The run files in `configs/`.
pub fn configs() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("configs")
}

/// The tabular settings of the run file `configs/<name>`, with `overrides` (`--set` style).
pub fn tabular_run_file(name: &str, overrides: &[&str]) -> TabularConfig {
    let overrides: Vec<String> = overrides.iter().map(|s| s.to_string()).collect();
    let run = RunConfig::load(&configs().join(name), &overrides).unwrap();
    let (_, Job::Tabular(job)) = run.resolve().unwrap() else {
        panic!("{name} is not a tabular run");
    };
    job.config
}

/// Points `command` (a `cubenet train` or an example) at MNIST's directory when the files
/// are on disk; without `--data-dir` it downloads MNIST, as a user's first run does.
pub fn with_mnist_dir(command: &mut std::process::Command) -> &mut std::process::Command {
    if let MnistSource::Dir(dir) = mnist_source() {
        command.arg("--data-dir").arg(dir);
    }
    command
}

/// An example binary built by `cargo test` next to the test binaries.
pub fn example_binary(name: &str) -> PathBuf {
    let deps = std::env::current_exe().expect("test binary path");
    let profile_dir = deps
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    profile_dir.join("examples").join(name)
}

/// Every float parameter's values of `model`, in module order.
pub fn parameter_values<B: Backend, M: Module<B>>(model: &M) -> Vec<Vec<f32>> {
    struct Collect(Vec<Vec<f32>>);
    impl<B: Backend> ModuleVisitor<B> for Collect {
        fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
            self.0.push(param.val().into_data().to_vec().unwrap());
        }
    }
    let mut collect = Collect(Vec::new());
    model.visit(&mut collect);
    collect.0
}

/// The bits of each value of [`parameter_values`]' lists: equal exactly when two models hold
/// the same weights to the bit (unlike `==` on floats, which takes −0 for 0).
pub fn parameter_bits(values: &[Vec<f32>]) -> Vec<Vec<u32>> {
    values
        .iter()
        .map(|values| values.iter().map(|v| v.to_bits()).collect())
        .collect()
}

/// Asserts that two models' parameters (as [`parameter_values`] lists them) have the same
/// shapes and differ by less than `tolerance` anywhere.
pub fn assert_parameters_close(a: &[Vec<f32>], b: &[Vec<f32>], tolerance: f32) {
    assert_eq!(a.len(), b.len(), "parameter counts differ");
    for (i, (a, b)) in a.iter().zip(b).enumerate() {
        assert_eq!(a.len(), b.len(), "parameter {i}: sizes differ");
        let worst = a
            .iter()
            .zip(b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, f32::max);
        assert!(worst < tolerance, "parameter {i}: differs by {worst}");
    }
}

/// The first Python that imports every one of `modules`: `$CUBENET_PYTHON` (CI's virtual
/// environment with onnx, onnxruntime and tensorboard), else `python3`, else the system's
/// `/usr/bin/python3` (Debian's python3-torch). `None`, after saying so, only where the test
/// may be skipped: with `required_by` (an environment variable CI sets) set it panics.
pub fn python_with(modules: &[&str], required_by: &str) -> Option<PathBuf> {
    let mut candidates: Vec<PathBuf> = std::env::var_os("CUBENET_PYTHON")
        .map(PathBuf::from)
        .into_iter()
        .collect();
    candidates.extend(["python3", "/usr/bin/python3"].map(PathBuf::from));
    let imports = format!("import {}", modules.join(", "));
    let found = candidates.into_iter().find(|python| {
        std::process::Command::new(python)
            .args(["-c", &imports])
            .output()
            .is_ok_and(|output| output.status.success())
    });
    assert!(
        found.is_some() || std::env::var_os(required_by).is_none(),
        "{required_by} is set but no Python runs `{imports}` (set CUBENET_PYTHON to one that \
         does; .ci/run makes such a virtual environment)"
    );
    if found.is_none() {
        eprintln!("skipped: no Python runs `{imports}`");
    }
    found
}

/// `cubenet train` of the MNIST run file `configs/<config>` on the CPU, with the
/// `--set` assignments `sets`, for `epochs`, into `artifact_dir`.
pub fn train_mnist_on_cpu(
    config: &str,
    sets: &[&str],
    epochs: usize,
    artifact_dir: &Path,
) -> std::process::Command {
    let mut command = crate::cli::cubenet();
    command
        .args(["train", "--backend", "ndarray", "--config"])
        .arg(configs().join(config));
    for set in sets {
        command.args(["--set", set]);
    }
    command
        .args(["--epochs", &epochs.to_string(), "--artifact-dir"])
        .arg(artifact_dir);
    with_mnist_dir(&mut command);
    command
}

/// Runs `python` on the script at `script` (relative to the checkout) with `args`; its
/// stdout, or a panic with its stderr when it fails.
pub fn run_python<S: AsRef<std::ffi::OsStr>>(python: &Path, script: &str, args: &[S]) -> Vec<u8> {
    let output = std::process::Command::new(python)
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join(script))
        .args(args)
        .output()
        .expect("python runs");
    let shown: Vec<_> = args
        .iter()
        .map(|arg| arg.as_ref().to_string_lossy())
        .collect();
    assert!(
        output.status.success(),
        "{script} {shown:?}: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    output.stdout
}
