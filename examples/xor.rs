//! Seed 003's XOR: a 2-4-1 sigmoid net learns the four points exactly.
//!
//! ```text
//! cargo run --release --example xor
//! ```
//! The four points are the training, validation and test set at once (there is nothing to
//! hold out), so this example builds its splits in code instead of reading a CSV. It prints
//! each point's prediction and fails unless all four are right.

mod common;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::ensure;
use clap::Parser;
use cubenet::backend::{BackendKind, BackendTask, run_on};
use cubenet::data::synthetic;
use cubenet::model::{Activation, Task};
use cubenet::train::TrainError;
use cubenet::train::tabular::{
    OptimizerConfig, Rows, TabularConfig, TabularReport, TabularSplits, train,
};
use cubenet_kernels::AutodiffKernelBackend;

#[derive(Debug, Parser)]
#[command(about = "Train a 2-4-1 net on XOR")]
struct Args {
    #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    #[arg(long, default_value = "artifacts/xor")]
    artifact_dir: PathBuf,
}

/// Seed 003's net: one hidden layer of 4 sigmoids, plain SGD with momentum, full batch.
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
        l2: 0.0,
    })
    .with_epochs(1000)
    .with_patience(1000)
    .with_standardize(false)
}

struct XorRun {
    artifact_dir: PathBuf,
}

impl BackendTask for XorRun {
    /// The report and, per point, (x1, x2, predicted class, probability of class 1).
    type Output = Result<(TabularReport, Vec<[f32; 4]>), TrainError>;

    fn run<B: AutodiffKernelBackend>(self, device: B::Device, kind: BackendKind) -> Self::Output {
        let (inputs, targets) = synthetic::xor().split_columns(2);
        let points = Rows { inputs, targets };
        let splits = TabularSplits {
            train: points.clone(),
            valid: points.clone(),
            test: points.clone(),
            standardizer: None,
            classes: 2,
        };
        let (model, report) =
            train::<B>(&xor_config(), &splits, &self.artifact_dir, kind, &device)?;
        let predicted = model.predict(&points.inputs, &device);
        let rows = (0..4)
            .map(|i| {
                let (x, p) = (points.inputs.row(i), predicted.row(i));
                [x[0], x[1], p[0], p[1]]
            })
            .collect();
        Ok((report, rows))
    }
}

fn run(args: Args) -> anyhow::Result<()> {
    let task = XorRun {
        artifact_dir: args.artifact_dir,
    };
    let (report, rows) = run_on(args.backend, task)??;
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
