//! Logistic regression as a net without hidden layers: labels drawn from
//! σ(w·x + b), fitted with sigmoid + binary cross-entropy.
//!
//! ```text
//! cargo run --release --example logistic_regression
//! ```
//! No classifier can beat the rule "1 when w·x + b > 0" on this data; the example prints
//! that rule's test accuracy next to the model's and fails if the model is more than one
//! point behind it.

mod common;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Parser;
use cubenet::data::synthetic::{self, LINEAR_BIAS, LINEAR_WEIGHTS};
use cubenet::data::{SplitRatios, Table};
use cubenet::device::BackendKind;
use cubenet::model::Task;
use cubenet::train::tabular::{OptimizerConfig, TabularConfig};

#[derive(Debug, Parser)]
#[command(about = "Fit a logistic regression with a no-hidden-layer net")]
struct Args {
    #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    #[arg(long, default_value_t = 20_000)]
    rows: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value = "artifacts/logistic_regression")]
    artifact_dir: PathBuf,
}

/// Test accuracy of the true model's decision rule, on the same test rows as the run.
fn bayes_accuracy(table: &Table, split: SplitRatios, seed: u64) -> anyhow::Result<f64> {
    let [_, _, test] = split
        .split(table.rows(), seed)
        .map_err(anyhow::Error::msg)?;
    let correct = test
        .iter()
        .filter(|&&i| {
            let row = table.row(i);
            let z: f32 = LINEAR_WEIGHTS
                .iter()
                .zip(row)
                .map(|(w, x)| w * x)
                .sum::<f32>()
                + LINEAR_BIAS;
            f32::from(z > 0.0) == row[3]
        })
        .count();
    Ok(correct as f64 / test.len() as f64)
}

fn run(args: Args) -> anyhow::Result<()> {
    let table = synthetic::logistic(args.rows, args.seed);
    let features = ["x1", "x2", "x3"].map(String::from).to_vec();
    let config = TabularConfig::new(features, vec!["label".into()], Task::Binary)
        .with_optimizer(OptimizerConfig::Sgd {
            learning_rate: 0.05,
            momentum: 0.9,
            nesterov: false,
            l2: 0.0,
        })
        .with_batch_size(Some(64))
        .with_epochs(20)
        .with_seed(args.seed);
    let bayes = bayes_accuracy(&table, config.split, config.seed)?;
    println!("best possible (the true rule): {:.2}%", bayes * 100.0);
    let report = common::train_on_csv(
        table,
        "logistic.csv",
        config,
        args.backend,
        &args.artifact_dir,
    )?;
    // Within one point of the true rule.
    common::require_accuracy(&report, bayes - 0.01)
}

fn main() -> ExitCode {
    common::exit_code(run(Args::parse()))
}
