//! `cubenet`: train, evaluate and run small networks from one command.
//!
//! ```text
//! cubenet train --config configs/mnist_cnn.toml --data-dir path/to/mnist
//! cubenet train --config configs/quadrants.toml --set training.epochs=20 --resume
//! cubenet eval --model-dir artifacts/mnist_cnn
//! cubenet predict --model-dir artifacts/mnist_cnn digit.png
//! cubenet export --model-dir artifacts/mnist_cnn
//! cubenet bench --variants ndarray,cuda-cubenet
//! cubenet studio --runs artifacts
//! cubenet info
//! ```
//! Every user error (a missing file, a bad config key, a backend not compiled in, no GPU)
//! is one line on stderr and exit code 2; a training run stopped on request (Ctrl-C, SIGTERM,
//! SIGHUP, the dashboard's keys) is one line and exit code 130.

mod bench;
mod eval;
mod export;
mod info;
mod predict;
mod studio;
mod train;

use std::io::Write;
use std::process::ExitCode;

use std::path::Path;

use clap::{Parser, Subcommand};

use cubenet_engine::device::BackendKind;
use cubenet_engine::error_line::error_line;
use cubenet_engine::train::SavedModel;
use cubenet_run_file::RunConfig;

#[derive(Debug, Parser)]
#[command(
    name = "cubenet",
    version,
    about = "Train small CNNs and MLPs with Burn"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Train an image or tabular run from a TOML run file plus flag overrides
    Train(train::Args),
    /// Measure a trained model on test data
    Eval(eval::Args),
    /// Write a trained model's weights as safetensors with PyTorch's names, and a sidecar
    Export(export::Args),
    /// Predict a PNG or IDX image (image runs) or the rows of a CSV file (tabular runs)
    Predict(predict::Args),
    /// The backend benchmark: one training step on every backend
    Bench(bench::Args),
    /// A local web application: the runs of a folder, their curves and results, live
    Studio(studio::Args),
    /// The backends compiled into this build and whether each finds a device
    Info,
}

/// Runs the `cubenet` command on this process's arguments: what `src/bin/cubenet.rs` and the
/// data-parallel build's `main` do.
pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(error) => return flag_error(error),
    };
    let result = match cli.command {
        Command::Train(args) => train::run(args),
        Command::Eval(args) => eval::run(args),
        Command::Predict(args) => predict::run(args),
        Command::Export(args) => export::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Studio(args) => studio::run(args),
        Command::Info => info::run(),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => match train::stop_point(&error) {
            // A stop on request is not an error of the user's, nor a success.
            Some(point) => {
                // Not `eprintln!`: after a SIGHUP the terminal may be gone.
                let _ = writeln!(std::io::stderr(), "{point}");
                ExitCode::from(train::STOPPED_EXIT_CODE)
            }
            None => {
                eprintln!("error: {}", error_line(error.as_ref()));
                ExitCode::from(2)
            }
        },
    }
}

/// A command line clap refused, as every user error is: one line (clap's first, which names
/// the flag and the problem; `--help` says the rest), exit code 2. `--help`, `--version` and a
/// command without its subcommand print what clap prints for them.
fn flag_error(error: clap::Error) -> ExitCode {
    use clap::error::ErrorKind;
    match error.kind() {
        ErrorKind::DisplayHelp
        | ErrorKind::DisplayVersion
        | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand => error.exit(),
        _ => {
            let rendered = error.render().to_string();
            let line = rendered.lines().next().unwrap_or("error: bad arguments");
            eprintln!("{line}");
            ExitCode::from(2)
        }
    }
}

/// The trained run in `dir` on `backend`, by default the one its run file names, with that
/// run file where it has one.
fn load_saved_run(
    dir: &Path,
    backend: Option<BackendKind>,
) -> anyhow::Result<(SavedModel, Option<RunConfig>)> {
    let run = SavedModel::run_file(dir)?
        .map(|path| RunConfig::load(&path, &[]))
        .transpose()?;
    let backend = backend.or_else(|| run.as_ref().and_then(|run| run.backend));
    Ok((SavedModel::load(dir, backend)?, run))
}
