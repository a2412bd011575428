//! `cubenet train`: a run file (or the default MNIST run), flag overrides, then training.

use std::path::PathBuf;

use crate::run_file::RunConfig;
use crate::run_file::RunFlags;

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Run file (TOML; see configs/) [default: the single-conv CNN on MNIST]
    #[arg(long)]
    config: Option<PathBuf>,
    /// Set a key of the run file, e.g. `--set training.epochs=5` (repeatable)
    #[arg(long = "set", value_name = "KEY=VALUE")]
    set: Vec<String>,
    #[command(flatten)]
    flags: RunFlags,
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
        self.flags.apply(&mut config)?;
        Ok(config)
    }
}

/// What `cubenet train` runs without `--config`.
const DEFAULT_RUN: &str = "artifact_dir = \"artifacts/mnist_cnn\"\n\
                           [data]\nkind = \"mnist\"\n[model]\nkind = \"simple\"\n";

pub fn run(args: Args) -> anyhow::Result<()> {
    let config = args.config()?;
    let (resolved, _) = config.resolve()?;
    if args.print_config {
        print!("{}", resolved.to_toml());
        return Ok(());
    }
    println!("{}", config.train(args.resume)?);
    eprintln!("artifacts in {}", resolved.artifact_dir.display());
    Ok(())
}
