//! Train an MLP on any CSV, or predict with a trained one.
//!
//! ```text
//! cargo run --release --example tabular -- train --csv data.csv --features a,b,c --targets y \
//!     --task regression --hidden 16,8 --activation sigmoid-gain:2 --lr 0.05 --momentum 0.9 --l2 1e-5
//! cargo run --release --example tabular -- predict --model-dir artifacts/tabular \
//!     --csv new.csv --out predictions.csv
//! ```
//! `train` splits the rows (seeded), standardizes features with the training split's
//! statistics, trains with early stopping, keeps the best epoch, saves model, config and
//! preprocessing with `curves.png` in `--artifact-dir`, and prints the test metrics.
//! `predict` copies the CSV and appends the prediction columns.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand, ValueEnum};
use cubenet::backend::{BackendKind, run_on};
use cubenet::data::SplitRatios;
use cubenet::model::{Activation, Task};
use cubenet::train::tabular::{OptimizerConfig, TabularConfig, TabularModel, TabularRun};

#[derive(Debug, Parser)]
#[command(about = "Tabular (CSV) training and prediction")]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Train on a CSV with a header
    Train(TrainArgs),
    /// Append a trained model's predictions to a CSV
    Predict {
        /// The artifact directory of a `train` run
        #[arg(long)]
        model_dir: PathBuf,
        /// Rows to predict (must have the feature columns)
        #[arg(long)]
        csv: PathBuf,
        /// Where to write the input columns plus the predictions
        #[arg(long)]
        out: PathBuf,
    },
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum OptimizerKind {
    /// SGD with momentum and L2, as the seeds
    Sgd,
    Adam,
}

#[derive(Debug, clap::Args)]
struct TrainArgs {
    #[arg(long)]
    csv: PathBuf,
    /// Feature columns, comma-separated
    #[arg(long, value_delimiter = ',', required = true)]
    features: Vec<String>,
    /// Target column(s), comma-separated (one for classification)
    #[arg(long, value_delimiter = ',', required = true)]
    targets: Vec<String>,
    #[arg(long, value_enum)]
    task: Task,
    /// Hidden layer widths, comma-separated (none: a linear/logistic model)
    #[arg(long, value_delimiter = ',')]
    hidden: Vec<usize>,
    /// sigmoid, sigmoid-gain:G, scaled-sigmoid, tanh or relu; one for all hidden layers, or
    /// one per layer, comma-separated
    #[arg(long, value_delimiter = ',', default_value = "sigmoid")]
    activation: Vec<Activation>,
    #[arg(long, value_enum, default_value_t = OptimizerKind::Sgd)]
    optimizer: OptimizerKind,
    #[arg(long, default_value_t = 0.01)]
    lr: f64,
    /// SGD momentum α
    #[arg(long, default_value_t = 0.9)]
    momentum: f64,
    /// L2 penalty λ
    #[arg(long, default_value_t = 0.0)]
    l2: f64,
    #[arg(long, default_value_t = 100)]
    epochs: usize,
    /// Rows per step [default: all training rows, i.e. full batch]
    #[arg(long)]
    batch_size: Option<usize>,
    #[arg(long, default_value_t = 10)]
    patience: usize,
    /// train:valid:test shares
    #[arg(long, default_value_t = SplitRatios::default())]
    split: SplitRatios,
    #[arg(long, default_value_t = 42)]
    seed: u64,
    /// Train on the raw feature values
    #[arg(long)]
    no_standardize: bool,
    #[arg(long, value_enum, default_value_t = BackendKind::default_for_build())]
    backend: BackendKind,
    #[arg(long, default_value = "artifacts/tabular")]
    artifact_dir: PathBuf,
}

impl TrainArgs {
    fn config(&self) -> TabularConfig {
        let optimizer = match self.optimizer {
            OptimizerKind::Sgd => OptimizerConfig::Sgd {
                learning_rate: self.lr,
                momentum: self.momentum,
                l2: self.l2,
            },
            OptimizerKind::Adam => OptimizerConfig::Adam {
                learning_rate: self.lr,
                l2: self.l2,
            },
        };
        let config = TabularConfig::new(self.features.clone(), self.targets.clone(), self.task)
            .with_hidden(self.hidden.clone())
            .with_optimizer(optimizer)
            .with_epochs(self.epochs)
            .with_batch_size(self.batch_size)
            .with_patience(self.patience)
            .with_split(self.split)
            .with_seed(self.seed)
            .with_standardize(!self.no_standardize);
        match self.activation[..] {
            [one] => config.with_activation(one),
            _ => config.with_layer_activations(self.activation.clone()),
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<()> {
    match cli.command {
        Command::Train(args) => {
            let run = TabularRun {
                config: args.config(),
                csv: args.csv.clone(),
                artifact_dir: args.artifact_dir.clone(),
            };
            println!("{}", run_on(args.backend, run)??);
        }
        Command::Predict {
            model_dir,
            csv,
            out,
        } => {
            let device = Default::default();
            let model = TabularModel::<burn::backend::NdArray>::load(&model_dir, &device)?;
            let rows = model.predict_csv(&csv, &out, &device)?;
            println!("wrote {rows} predictions to {}", out.display());
        }
    }
    Ok(())
}

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("error: {error:#}");
            ExitCode::from(2)
        }
    }
}
