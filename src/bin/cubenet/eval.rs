//! `cubenet eval`: a trained model's test metrics, on the CPU.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use cubenet::data::{MnistData, MnistSource, MnistSubset, Split, Table};
use cubenet::train::accuracy_line;
use cubenet::train::tabular::TabularSplits;

use crate::saved::{SavedRun, mnist_dir};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Artifact directory of a finished `cubenet train`
    #[arg(long)]
    model_dir: PathBuf,
    /// Image runs: MNIST IDX directory [default: the run's, else download]
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Tabular runs: measure on every row of this CSV [default: the run's test split]
    #[arg(long)]
    csv: Option<PathBuf>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let device = Default::default();
    match SavedRun::load(&args.model_dir)? {
        SavedRun::Image { model, run, .. } => {
            let source = mnist_dir(args.data_dir, run.as_ref())
                .map_or(MnistSource::Download, MnistSource::Dir);
            let test = MnistSubset::all(Arc::new(MnistData::load(&source, Split::Test)?));
            println!(
                "{}",
                accuracy_line(cubenet::train::evaluate(&model, &test, &device))
            );
        }
        SavedRun::Tabular { model, run } => {
            let (inputs, targets) = match args.csv {
                Some(csv) => {
                    let columns: Vec<String> = model
                        .config
                        .features
                        .iter()
                        .chain(&model.config.targets)
                        .cloned()
                        .collect();
                    Table::read_csv(&csv, &columns)?.split_columns(model.config.features.len())
                }
                None => {
                    let source = run
                        .and_then(|run| run.resolve().ok())
                        .and_then(|(_, job)| match job {
                            cubenet::run_config::Job::Tabular { data, .. } => Some(data),
                            _ => None,
                        })
                        .context(
                            "this run has no run.toml naming its data; pass --csv with rows to \
                             measure on",
                        )?;
                    let splits = TabularSplits::load(&source, &model.config)?;
                    anyhow::ensure!(
                        splits.test.inputs.rows() > 0,
                        "the run's split has no test rows; pass --csv"
                    );
                    (splits.test.inputs, splits.test.targets)
                }
            };
            println!("rows: {}", inputs.rows());
            println!("{}", model.evaluate(&inputs, &targets, &device));
        }
    }
    Ok(())
}
