//! `cubenet train`: a run file (or the default MNIST run), flag overrides, then training.

use std::path::PathBuf;

use cubenet::atomic_file::write_atomically;
use cubenet::backend::BackendKind;
use cubenet::run_config::{DataSection, Job, RunConfig};
use cubenet::train::tabular::{OptimizerConfig, TabularRun};
use cubenet::train::{ImageRun, accuracy_line, claim_artifact_dir};

/// The resolved run file saved in the artifact directory, for `eval` and `predict`.
pub const RUN_FILE: &str = "run.toml";

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run file (TOML; see configs/) [default: the single-conv CNN on MNIST]
    #[arg(long)]
    config: Option<PathBuf>,
    /// Set a key of the run file, e.g. `--set training.epochs=5` (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
    #[arg(long)]
    epochs: Option<usize>,
    #[arg(long)]
    batch_size: Option<usize>,
    /// Learning rate of the configured optimizer
    #[arg(long)]
    lr: Option<f64>,
    #[arg(long)]
    seed: Option<u64>,
    /// Device indices to train on, data-parallel, e.g. `0,1` (image runs; batch size is per
    /// device)
    #[arg(long, value_delimiter = ',')]
    devices: Option<Vec<usize>>,
    /// MNIST IDX directory (image runs; downloads when neither this nor the file gives one)
    #[arg(long)]
    data_dir: Option<PathBuf>,
    #[arg(long)]
    artifact_dir: Option<PathBuf>,
    /// Continue from the last complete checkpoint in the artifact directory
    #[arg(long)]
    resume: bool,
    /// Print the resolved run file (every default filled in) and exit
    #[arg(long)]
    print_config: bool,
}

impl Args {
    /// The run file with the flags applied.
    fn config(&self) -> anyhow::Result<RunConfig> {
        let mut config = match &self.config {
            Some(path) => RunConfig::load(path, &self.set)?,
            None => RunConfig::load_str(DEFAULT_RUN, &self.set)?,
        };
        config.backend = self.backend.or(config.backend);
        config.artifact_dir = self.artifact_dir.clone().unwrap_or(config.artifact_dir);
        let training = &mut config.training;
        training.epochs = self.epochs.or(training.epochs);
        training.batch_size = self.batch_size.or(training.batch_size);
        training.seed = self.seed.or(training.seed);
        training.devices = self.devices.clone().or(training.devices.take());
        if let Some(dir) = &self.data_dir {
            let DataSection::Mnist { dir: data_dir, .. } = &mut config.data else {
                anyhow::bail!(
                    "--data-dir is for MNIST runs; set the [data] paths of other runs with --set"
                );
            };
            *data_dir = Some(dir.clone());
        }
        if let Some(lr) = self.lr {
            let optimizer = config.optimizer.get_or_insert(match config.data {
                DataSection::Mnist { .. } | DataSection::Images { .. } => OptimizerConfig::Adam {
                    learning_rate: lr,
                    l2: 0.0,
                },
                _ => OptimizerConfig::default(),
            });
            match optimizer {
                OptimizerConfig::Sgd { learning_rate, .. }
                | OptimizerConfig::Adam { learning_rate, .. } => *learning_rate = lr,
            }
        }
        Ok(config)
    }
}

/// What `cubenet train` runs without `--config`.
const DEFAULT_RUN: &str = "artifact_dir = \"artifacts/mnist_cnn\"\n\
                           [data]\nkind = \"mnist\"\n[model]\nkind = \"simple\"\n";

pub fn run(args: Args) -> anyhow::Result<()> {
    let (resolved, job) = args.config()?.resolve()?;
    if args.print_config {
        print!("{}", resolved.to_toml());
        return Ok(());
    }
    let backend = resolved
        .backend
        .unwrap_or_else(BackendKind::default_for_build);
    let dir = resolved.artifact_dir.clone();
    let inputs = match &job {
        Job::Image { source, .. } => source.inputs(),
        Job::Tabular { data, .. } => Vec::from_iter(data.input()),
    };
    claim_artifact_dir(&dir, &inputs)?;
    write_atomically(&dir.join(RUN_FILE), resolved.to_toml().as_bytes())?;
    match job {
        Job::Image { config, source } => {
            let run = ImageRun {
                config,
                source,
                artifact_dir: dir.clone(),
                resume: args.resume,
            };
            let confusion = run.launch(backend)?;
            print!("{confusion}");
            println!("{}", accuracy_line(confusion.accuracy()));
        }
        Job::Tabular { config, data } => {
            let run = TabularRun {
                config,
                data,
                artifact_dir: dir.clone(),
                resume: args.resume,
            };
            println!("{}", run.launch(backend)?);
        }
    }
    eprintln!("artifacts in {}", dir.display());
    Ok(())
}
