//! The tabular regression problem, a stock-market stand-in: 800,000 rows × 8 features, a
//! nonlinear target plus noise (see `cubenet::data::synthetic::market`), an 8-16-8-1 net with
//! sigmoid-gain units trained by SGD with momentum and L2, a 70/15/15 split, standardized
//! features, early stopping, an error-vs-epoch plot, and predictions for new rows.
//!
//! ```text
//! cargo run --release --example tabular_regression
//! cargo run --release --example tabular_regression --features cuda -- --backend cuda
//! ```
//! The generated CSV is reused by later runs (`--regenerate` writes it again). Prints the
//! CSV load time, seconds per epoch and rows per second, and the test MSE/RMSE/MAE/R²
//! (the noise alone gives an MSE of 0.01).

mod common;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Instant;

use clap::Parser;
use cubenet::data::{Table, TableSource, synthetic};
use cubenet::device::BackendKind;
use cubenet::model::{Activation, Task};
use cubenet::train::tabular::{OptimizerConfig, TabularConfig, TabularJob};
use cubenet::train::{Run, RunDir, SavedModel};

#[derive(Debug, Parser)]
#[command(about = "Train an MLP on an 800k-row regression CSV")]
struct Args {
    #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    #[arg(long, default_value_t = 800_000)]
    rows: usize,
    #[arg(long, default_value_t = 20)]
    epochs: usize,
    #[arg(long, default_value_t = 1024)]
    batch_size: usize,
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Write the CSV even if it exists
    #[arg(long)]
    regenerate: bool,
    #[arg(long, default_value = "artifacts/tabular_regression")]
    artifact_dir: PathBuf,
}

fn run(args: Args) -> anyhow::Result<()> {
    // The generated table is kept in a folder of the artifact directory (not beside the
    // files runs write there), so later runs reuse it.
    let run_dir = RunDir::claim(&args.artifact_dir, &[])?;
    let data_dir = args.artifact_dir.join("data");
    std::fs::create_dir_all(&data_dir)?;
    let csv = data_dir.join(format!("market-{}.csv", args.rows));
    if args.regenerate || !csv.exists() {
        let start = Instant::now();
        synthetic::market(args.rows, args.seed).write_csv(&csv)?;
        println!(
            "wrote {} in {:.2} s",
            csv.display(),
            start.elapsed().as_secs_f64()
        );
    }
    let features: Vec<String> = (1..=8).map(|i| format!("x{i}")).collect();
    let config = TabularConfig::new(features.clone(), vec!["y".into()], Task::Regression)
        .with_hidden(vec![16, 8])
        .with_activation(Activation::SigmoidGain { gain: 2.0 })
        .with_optimizer(OptimizerConfig::Sgd {
            learning_rate: 0.05,
            momentum: 0.9,
            nesterov: false,
            l2: 1e-5,
        })
        .with_batch_size(Some(args.batch_size))
        .with_epochs(args.epochs)
        .with_patience(3)
        .with_seed(args.seed);

    // The load alone, timed the way a run does it (the run reads the file again).
    let columns: Vec<String> = features.iter().cloned().chain(["y".into()]).collect();
    let start = Instant::now();
    let table = Table::read_csv(&csv, &columns)?;
    println!(
        "loaded {} rows × {} columns in {:.2} s",
        table.rows(),
        table.width(),
        start.elapsed().as_secs_f64()
    );
    drop(table);

    let job = TabularJob {
        config,
        data: TableSource::Csv(csv),
    };
    let report = job.launch(Run::fresh(run_dir), args.backend)?;
    println!("{report}");

    // Predictions for rows the net has never seen.
    let new_rows = args.artifact_dir.join("new-rows.csv");
    synthetic::market(1000, args.seed + 1).write_csv(&new_rows)?;
    let predictions = args.artifact_dir.join("predictions.csv");
    let model = SavedModel::load_tabular(&args.artifact_dir, Some(args.backend))?;
    let rows = model.predict_csv(&new_rows, &predictions)?;
    println!("wrote {rows} predictions to {}", predictions.display());
    Ok(())
}

fn main() -> ExitCode {
    common::exit_code(run(Args::parse()))
}
