//! The quadrant classifier: random points in [−1, 1]², labelled 1 in the first and
//! third quadrants, learned by a small tanh net with binary cross-entropy.
//!
//! ```text
//! cargo run --release --example quadrants
//! cargo run --release --example quadrants --features cuda -- --backend cuda
//! ```
//! Writes `quadrants.csv` into the artifact directory, trains on it through the CSV loader,
//! and fails unless the test accuracy reaches 99%.

mod common;

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Parser;
use cubenet::data::synthetic;
use cubenet::device::BackendKind;
use cubenet::run_file::{Job, RunConfig};

#[derive(Debug, Parser)]
#[command(about = "Classify points by quadrant parity")]
struct Args {
    #[arg(long, value_enum, default_value_t = BackendKind::Ndarray)]
    backend: BackendKind,
    /// Points to generate (split 70/15/15)
    #[arg(long, default_value_t = 10_000)]
    rows: usize,
    #[arg(long, default_value_t = 1)]
    seed: u64,
    #[arg(long, default_value = "artifacts/quadrants")]
    artifact_dir: PathBuf,
}

fn run(args: Args) -> anyhow::Result<()> {
    // The network and its training settings are the run file's (`cubenet train --config
    // configs/quadrants.toml` trains the same one on generated rows).
    let path = Path::new("configs/quadrants.toml");
    let run_file = RunConfig::parse(include_str!("../configs/quadrants.toml"), path)?;
    let (_, Job::Tabular(job)) = run_file.resolve()? else {
        anyhow::bail!("{}: not a tabular run", path.display());
    };
    let config = job.config.with_seed(args.seed);
    let report = common::train_on_csv(
        synthetic::quadrants(args.rows, args.seed),
        "quadrants.csv",
        config,
        args.backend,
        &args.artifact_dir,
    )?;
    common::require_accuracy(&report, 0.99)
}

fn main() -> ExitCode {
    common::exit_code(run(Args::parse()))
}
