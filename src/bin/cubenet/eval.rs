//! `cubenet eval`: a trained model's test metrics, on the chosen backend.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use cubenet::backend::BackendKind;
use cubenet::data::Table;
use cubenet::train::tabular::TabularSplits;
use cubenet::train::{IMAGE_CACHE_DIR, ImageSplits, accuracy_line, evaluate};
use cubenet_kernels::KernelBackend;

use super::saved::{SavedRun, SavedRunWork, image_source, run_on_backend};

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
    run_on_backend(args.backend, &args.model_dir.clone(), args)
}

impl SavedRunWork for Args {
    fn run<B: KernelBackend>(self, device: &B::Device) -> anyhow::Result<()> {
        eval::<B>(self, device)
    }
}

fn eval<B: KernelBackend>(args: Args, device: &B::Device) -> anyhow::Result<()> {
    match SavedRun::<B>::load(&args.model_dir, device)? {
        SavedRun::Image { model, saved, run } => {
            // The run's own test split (its validation split where the data has none).
            let source = image_source(args.data_dir, run.as_ref())?;
            let images = source.load(Some(&args.model_dir.join(IMAGE_CACHE_DIR)))?;
            let splits = ImageSplits::cut(&source, images, &saved.config);
            anyhow::ensure!(
                splits.classes() == saved.classes,
                "the images have the classes {:?} but the model was trained on {:?}",
                splits.classes(),
                saved.classes
            );
            let test = splits
                .test
                .with_normalization(Arc::new(saved.normalization));
            let confusion = evaluate(&model, &test, device);
            print!("{confusion}");
            println!("{}", accuracy_line(confusion.accuracy()));
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
                            cubenet::run_config::Job::Tabular(job) => Some(job.data),
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
            println!("{}", model.evaluate(&inputs, &targets, device));
        }
    }
    Ok(())
}
