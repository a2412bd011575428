//! Linear regression as a net without hidden layers: y = w·x + b + noise,
//! fitted with SGD and momentum, and the learned weights compared with the true ones.
//!
//! ```text
//! cargo run --release --example linear_regression
//! ```

mod common;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::ensure;
use clap::Parser;
use cubenet::data::synthetic::{self, LINEAR_BIAS, LINEAR_WEIGHTS};
use cubenet::device::BackendKind;
use cubenet::model::Task;
use cubenet::train::tabular::{OptimizerConfig, TabularConfig, TestMetrics};
use cubenet::train::{DenseValues, SavedModel};

#[derive(Debug, Parser)]
#[command(about = "Fit a linear model with a no-hidden-layer net")]
struct Args {
    #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    #[arg(long, default_value_t = 5_000)]
    rows: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value = "artifacts/linear_regression")]
    artifact_dir: PathBuf,
}

fn run(args: Args) -> anyhow::Result<()> {
    let features = ["x1", "x2", "x3"].map(String::from).to_vec();
    // Raw features, so that the learned weights are directly comparable to the true ones.
    let config = TabularConfig::new(features, vec!["y".into()], Task::Regression)
        .with_optimizer(OptimizerConfig::Sgd {
            learning_rate: 0.01,
            momentum: 0.9,
            nesterov: false,
            l2: 0.0,
        })
        .with_batch_size(Some(32))
        .with_epochs(20)
        .with_standardize(false)
        .with_seed(args.seed);
    let report = common::train_on_csv(
        synthetic::linear(args.rows, args.seed),
        "linear.csv",
        config,
        args.backend,
        &args.artifact_dir,
    )?;

    let model = SavedModel::load_tabular(&args.artifact_dir, Some(args.backend))?;
    let DenseValues {
        weight: weights,
        bias,
    } = model.dense_layers().remove(0);
    println!(
        "learned w = {weights:.3?}, b = {:.3} (true w = {LINEAR_WEIGHTS:?}, b = {LINEAR_BIAS})",
        bias[0]
    );
    let worst = weights
        .iter()
        .chain(&bias)
        .zip(LINEAR_WEIGHTS.iter().chain(&[LINEAR_BIAS]))
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    ensure!(
        worst < 0.05,
        "a learned parameter is {worst:.3} away from the true one"
    );
    if let Some(TestMetrics::Regression(m)) = report.test {
        ensure!(m.r2 > 0.99, "R² {:.4} is below 0.99", m.r2);
    }
    Ok(())
}

fn main() -> ExitCode {
    common::exit_code(run(Args::parse()))
}
