//! Train a digit classifier on MNIST and report its test accuracy.
//!
//! ```text
//! cargo run --release --example mnist_cnn -- --data-dir path/to/mnist
//! cargo run --release --example mnist_cnn --features cuda -- --model lenet --epochs 10
//! ```
//! The run is a run file's: `configs/mnist_cnn.toml` (the single-conv CNN) or
//! `configs/lenet.toml` (`--model lenet`), built into the example, with the flags of
//! `cubenet train` on top, so this example and `cubenet train --config` are the same run.
//! On a terminal training shows Burn's dashboard; otherwise one line per epoch. The last
//! line is `test accuracy: NN.NN%`. Artifacts (the run file, model, metric logs, curves.png)
//! go to the artifact directory, where `cubenet eval` and `cubenet predict` find them.

use std::path::Path;
use std::process::ExitCode;

use anyhow::bail;
use clap::{Parser, ValueEnum};
use cubenet::error_line::error_line;
use cubenet::model::{Kernels, Precision};
use cubenet::run_file::RunFlags;
use cubenet::run_file::{DataSection, ModelSection, RunConfig};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModelKind {
    /// The single-conv CNN: conv 3x3 (1→d) → ReLU → 2x2 max-pool → linear (configs/mnist_cnn.toml)
    Simple,
    /// Two conv blocks and two linear layers (configs/lenet.toml)
    Lenet,
}

impl ModelKind {
    /// The run file this network's run starts from: its path (for messages) and its text.
    fn run_file(self) -> (&'static str, &'static str) {
        match self {
            ModelKind::Simple => (
                "configs/mnist_cnn.toml",
                include_str!("../configs/mnist_cnn.toml"),
            ),
            ModelKind::Lenet => ("configs/lenet.toml", include_str!("../configs/lenet.toml")),
        }
    }
}

/// An absent flag keeps the run file's value; each flag names the key it sets.
#[derive(Debug, Parser)]
#[command(about = "Train a CNN on MNIST and print its test accuracy")]
struct Args {
    /// Network architecture, and with it the run file
    #[arg(long, value_enum, default_value_t = ModelKind::Simple)]
    model: ModelKind,
    /// `model.filters`: filters of the single-conv CNN's convolution (d)
    #[arg(long)]
    filters: Option<usize>,
    /// `model.kernels`: cubenet's kernels or Burn's ops for the conv·ReLU·pool blocks and
    /// linear layers
    #[arg(long, value_enum)]
    kernels: Option<Kernels>,
    /// `model.precision`: fp32, or tf32 or bf16 on the tensor cores (CUDA) in multi-channel
    /// convolutions
    #[arg(long)]
    precision: Option<Precision>,
    /// `data.limit_train`: use only N images of the training file (split into train and valid)
    #[arg(long, value_name = "N")]
    limit_train: Option<usize>,
    /// `data.limit_test`: evaluate on only N test images
    #[arg(long, value_name = "N")]
    limit_test: Option<usize>,
    #[command(flatten)]
    flags: RunFlags,
}

impl Args {
    /// The network's run file with the flags applied.
    fn config(&self) -> anyhow::Result<RunConfig> {
        let (path, text) = self.model.run_file();
        let mut config = RunConfig::parse(text, Path::new(path))?;
        self.flags.apply(&mut config)?;
        let (kernels, precision) = match &mut config.model {
            ModelSection::Simple {
                filters,
                kernels,
                precision,
                ..
            } => {
                *filters = self.filters.unwrap_or(*filters);
                (kernels, precision)
            }
            ModelSection::Lenet {
                kernels, precision, ..
            } if self.filters.is_none() => (kernels, precision),
            ModelSection::Lenet { .. } => bail!("--filters is for the single-conv CNN"),
            _ => bail!("{path}: not a CNN run"),
        };
        *kernels = self.kernels.unwrap_or(*kernels);
        *precision = self.precision.or(*precision);
        let DataSection::Mnist { options, .. } = &mut config.data else {
            bail!("{path}: not an MNIST run");
        };
        options.limit_train = self.limit_train.or(options.limit_train);
        options.limit_test = self.limit_test.or(options.limit_test);
        Ok(config)
    }
}

fn main() -> ExitCode {
    let run = Args::parse()
        .config()
        .and_then(|config| Ok(config.train(false)?));
    match run {
        Ok(report) => {
            println!("{report}");
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {}", error_line(error.as_ref()));
            ExitCode::from(2)
        }
    }
}
