//! Train a digit classifier on MNIST and report its test accuracy.
//!
//! ```text
//! cargo run --release --example mnist_cnn -- --data-dir path/to/mnist
//! cargo run --release --example mnist_cnn --features cuda -- --model lenet --epochs 10
//! ```
//! On a terminal training shows Burn's dashboard; otherwise one line per epoch. The last line
//! is `test accuracy: NN.NN%`. Artifacts (config, model, metric logs, curves.png) go to
//! `--artifact-dir`.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, ValueEnum};
use cubenet::backend::BackendKind;
use cubenet::data::{ImageSource, MnistSource};
use cubenet::error_line::error_line;
use cubenet::model::{ImageModelConfig, KernelPath, LeNetConfig, Precision, SimpleCnnConfig};
use cubenet::train::{ImageRun, ImageTrainingConfig, accuracy_line};

#[derive(Debug, Clone, Copy, ValueEnum)]
enum ModelKind {
    /// conv 3x3 (1→d) → ReLU → 2x2 max-pool → linear
    Simple,
    /// two conv blocks and two linear layers
    Lenet,
}

// Every default below is read from the configs (`ImageTrainingConfig`, `SimpleCnnConfig`),
// which own them.
#[derive(Debug, Parser)]
#[command(about = "Train a CNN on MNIST and print its test accuracy")]
struct Args {
    /// Backend to train on [default: cuda when compiled in, else ndarray]
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    /// Network architecture
    #[arg(long, value_enum, default_value_t = ModelKind::Simple)]
    model: ModelKind,
    /// Filters of the simple CNN's convolution (d)
    #[arg(long, default_value_t = SimpleCnnConfig::new().filters)]
    filters: usize,
    /// Who runs the conv·ReLU·pool blocks and linear layers: cubenet's kernels or Burn's ops
    #[arg(long, value_enum, default_value_t = SimpleCnnConfig::new().kernels)]
    kernels: KernelPath,
    /// How cubenet's kernels multiply in multi-channel convolutions (LeNet's second): fp32,
    /// or tf32 on the tensor cores (CUDA)
    #[arg(long, default_value_t = SimpleCnnConfig::new().precision)]
    precision: Precision,
    #[arg(long, default_value_t = defaults().epochs)]
    epochs: usize,
    #[arg(long, default_value_t = defaults().batch_size)]
    batch_size: usize,
    /// Adam peak learning rate (cosine-annealed to 0 over the run)
    #[arg(long, default_value_t = defaults().learning_rate)]
    lr: f64,
    #[arg(long, default_value_t = defaults().seed)]
    seed: u64,
    /// Device indices to train on, data-parallel, e.g. `0,1` (the batch size is per device)
    #[arg(long, value_delimiter = ',', default_values_t = defaults().devices)]
    devices: Vec<usize>,
    /// Directory with the four MNIST IDX files (raw or .gz); downloads them when absent
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Where the config, model, metric logs and curves are written
    #[arg(long, default_value = "artifacts/mnist_cnn")]
    artifact_dir: PathBuf,
    /// Use only N images of the training file (split into train and valid)
    #[arg(long, value_name = "N")]
    limit_train: Option<usize>,
    /// Evaluate on only N test images
    #[arg(long, value_name = "N")]
    limit_test: Option<usize>,
}

/// Every training setting at its default.
fn defaults() -> ImageTrainingConfig {
    ImageTrainingConfig::new(ImageModelConfig::Simple(SimpleCnnConfig::new()))
}

impl Args {
    fn config(&self) -> ImageTrainingConfig {
        let model = match self.model {
            ModelKind::Simple => ImageModelConfig::Simple(
                SimpleCnnConfig::new()
                    .with_filters(self.filters)
                    .with_kernels(self.kernels)
                    .with_precision(self.precision),
            ),
            ModelKind::Lenet => ImageModelConfig::Lenet(
                LeNetConfig::new()
                    .with_kernels(self.kernels)
                    .with_precision(self.precision),
            ),
        };
        ImageTrainingConfig::new(model)
            .with_epochs(self.epochs)
            .with_batch_size(self.batch_size)
            .with_learning_rate(self.lr)
            .with_seed(self.seed)
            .with_devices(self.devices.clone())
            .with_limit_train(self.limit_train)
            .with_limit_test(self.limit_test)
    }
}

fn run(args: Args) -> anyhow::Result<f64> {
    let backend = args.backend.unwrap_or_else(BackendKind::default_for_build);
    let source = match &args.data_dir {
        Some(dir) => MnistSource::Dir(dir.clone()),
        None => MnistSource::Download,
    };
    let run = ImageRun {
        config: args.config(),
        source: ImageSource::Mnist(source),
        artifact_dir: args.artifact_dir,
        resume: false,
    };
    Ok(run.launch(backend)?.accuracy())
}

fn main() -> ExitCode {
    match run(Args::parse()) {
        Ok(accuracy) => {
            println!("{}", accuracy_line(accuracy));
            ExitCode::SUCCESS
        }
        Err(error) => {
            eprintln!("error: {}", error_line(error.as_ref()));
            ExitCode::from(2)
        }
    }
}
