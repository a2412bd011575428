//! XOR: a 2-4-1 sigmoid net learns the four points exactly.
//!
//! ```text
//! cargo run --release --example xor
//! ```
//! The four points are the training, validation and test set at once (there is nothing to
//! hold out), so this example builds its splits in code instead of reading a CSV. It prints
//! each point's prediction and fails unless all four are right.

mod common;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use anyhow::ensure;
use clap::Parser;
use cubenet::data::synthetic;
use cubenet::device::BackendKind;
use cubenet::model::{Activation, Task};
use cubenet::train::tabular::{OptimizerConfig, Rows, TabularConfig, TabularReport, TabularSplits};
use cubenet::train::{RunError, train_splits};

#[derive(Debug, Parser)]
#[command(about = "Train a 2-4-1 net on XOR (on the CPU: four points need no GPU)")]
struct Args {
    #[arg(long, default_value = "artifacts/xor")]
    artifact_dir: PathBuf,
}

/// The XOR net: one hidden layer of 4 sigmoids, plain SGD with momentum, full batch.
fn xor_config() -> TabularConfig {
    TabularConfig::new(
        vec!["x1".into(), "x2".into()],
        vec!["y".into()],
        Task::Binary,
    )
    .with_hidden(vec![4])
    .with_activation(Activation::Sigmoid)
    .with_optimizer(OptimizerConfig::Sgd {
        learning_rate: 0.5,
        momentum: 0.9,
        nesterov: false,
        l2: 0.0,
    })
    .with_epochs(1000)
    .with_patience(1000)
    .with_standardize(false)
}

/// Trains on all four points (they are the train, valid and test sets at once); returns the
/// report and, per point, (x1, x2, predicted class, probability of class 1).
fn train_xor(artifact_dir: &Path) -> Result<(TabularReport, Vec<[f32; 4]>), RunError> {
    let (inputs, targets) = synthetic::xor().split_columns(2);
    let points = Rows { inputs, targets };
    let splits = TabularSplits::all_in_one(points.clone(), 2);
    let (model, report) = train_splits(&xor_config(), &splits, artifact_dir, BackendKind::Ndarray)?;
    let predicted = model.predict(&points.inputs);
    let rows = (0..4)
        .map(|i| {
            let (x, p) = (points.inputs.row(i), predicted.row(i));
            [x[0], x[1], p[0], p[1]]
        })
        .collect();
    Ok((report, rows))
}

fn run(args: Args) -> anyhow::Result<()> {
    let (report, rows) = train_xor(&args.artifact_dir)?;
    let mut correct = 0;
    for [x1, x2, class, p] in rows {
        println!("{x1} xor {x2} = {class} (p = {p:.3})");
        correct += usize::from(class == f32::from((x1 != x2) as u8));
    }
    println!("{report}");
    ensure!(correct == 4, "only {correct} of the 4 XOR points are right");
    Ok(())
}

fn main() -> ExitCode {
    common::exit_code(run(Args::parse()))
}
