//! `cubenet eval`: a trained model's test metrics, on the chosen backend.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use cubenet_engine::data::{ImageSource, MnistSource, Table};
use cubenet_engine::device::BackendKind;
use cubenet_engine::train::tabular::TabularSplits;
use cubenet_engine::train::{ImageSplits, RunDir, SavedModel, accuracy_line};
use cubenet_run_file::{DataSection, Job, RunConfig};

#[derive(Debug, clap::Args)]
pub struct Args {
    /// Artifact directory of a finished `cubenet train`, or what `cubenet export` wrote
    #[arg(long)]
    model_dir: PathBuf,
    /// MNIST runs: IDX directory [default: the run's, else download]
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Tabular runs: measure on every row of this CSV [default: the run's test split]
    #[arg(long)]
    csv: Option<PathBuf>,
    /// [default: the backend the run trained on]
    #[arg(long, value_enum)]
    backend: Option<BackendKind>,
}

pub fn run(args: Args) -> anyhow::Result<()> {
    let (model, run) = super::load_saved_run(&args.model_dir, args.backend)?;
    match model {
        SavedModel::Image(model) => {
            let saved = model.saved();
            // The run's own test split (its validation split where the data has none).
            let source = image_source(args.data_dir, run.as_ref())?;
            let images = source.load(Some(&RunDir::open(&args.model_dir).image_cache()))?;
            let splits = ImageSplits::cut(&source, images, &saved.config);
            anyhow::ensure!(
                splits.classes() == saved.classes,
                "the images have the classes {:?} but the model was trained on {:?}",
                splits.classes(),
                saved.classes
            );
            let test = splits
                .test
                .with_normalization(Arc::new(saved.normalization.clone()));
            let confusion = model.evaluate(&test);
            print!("{confusion}");
            println!("{}", accuracy_line(confusion.accuracy()));
        }
        SavedModel::Tabular(model) => {
            let (inputs, targets) = match args.csv {
                Some(csv) => {
                    let config = model.config();
                    Table::read_csv(&csv, &config.columns())?.split_columns(config.features.len())
                }
                None => {
                    let source = run
                        .and_then(|run| run.resolve().ok())
                        .and_then(|(_, job)| match job {
                            Job::Tabular(job) => Some(job.data),
                            _ => None,
                        })
                        .context(
                            "this run has no run.toml naming its data; pass --csv with rows to \
                             measure on",
                        )?;
                    let splits = TabularSplits::load(&source, model.config())?;
                    anyhow::ensure!(
                        splits.test.inputs.rows() > 0,
                        "the run's split has no test rows; pass --csv"
                    );
                    (splits.test.inputs, splits.test.targets)
                }
            };
            println!("rows: {}", inputs.rows());
            println!("{}", model.evaluate(&inputs, &targets));
        }
    }
    Ok(())
}

/// The images of an image run: MNIST from the flag's directory, else the run file's, else
/// downloaded; other sources as the run file gives them.
fn image_source(flag: Option<PathBuf>, run: Option<&RunConfig>) -> anyhow::Result<ImageSource> {
    let source = run
        .and_then(|run| run.resolve().ok())
        .and_then(|(_, job)| match job {
            Job::Image(job) => Some(job.source),
            Job::Tabular(_) => None,
        });
    match (source, flag) {
        (Some(ImageSource::Mnist(_)) | None, Some(dir)) => {
            Ok(ImageSource::Mnist(MnistSource::Dir(dir)))
        }
        (Some(_), Some(_)) => {
            anyhow::bail!(
                "--data-dir is for MNIST runs; this run reads the data its run.toml names"
            )
        }
        (Some(source), None) => Ok(source),
        (None, None) => Ok(ImageSource::Mnist(
            mnist_dir(run).map_or(MnistSource::Download, MnistSource::Dir),
        )),
    }
}

/// The MNIST directory of a run file's `[data]`, if it names one.
fn mnist_dir(run: Option<&RunConfig>) -> Option<PathBuf> {
    match run.map(|r| &r.data) {
        Some(DataSection::Mnist { dir, .. }) => dir.clone(),
        _ => None,
    }
}
