//! A trained run read back from its artifact directory, on the backend `eval` or `predict`
//! runs on.

use std::path::{Path, PathBuf};

use burn::prelude::Backend;
use cubenet::backend::{BackendKind, BackendTask, run_on};
use cubenet::data::{ImageSource, MnistSource};
use cubenet::model::ImageModel;
use cubenet::run_config::{DataSection, Job, RUN_FILE, RunConfig};
use cubenet::train::tabular::{PREPROCESSING_FILE, TabularModel};
use cubenet::train::{
    CONFIG_FILE, Export, ExportedRun, SavedImageConfig, load_model, read_weights,
};
use cubenet_kernels::{AutodiffKernelBackend, KernelBackend};

/// A trained model of either kind, with the run file it was trained from when there is one.
pub enum SavedRun<B: Backend> {
    Image {
        model: Box<ImageModel<B>>,
        /// Its settings, classes, image shape and normalization.
        saved: Box<SavedImageConfig>,
        run: Option<RunConfig>,
    },
    Tabular {
        model: Box<TabularModel<B>>,
        run: Option<RunConfig>,
    },
}

impl<B: KernelBackend> SavedRun<B> {
    /// Loads the model in `dir` onto `device`: a run's artifact directory (a tabular run
    /// has `preprocessing.json`), or what `cubenet export` wrote.
    pub fn load(dir: &Path, device: &B::Device) -> anyhow::Result<Self> {
        if let Some(export) = Export::find(dir)? {
            return Self::from_export(&export, device);
        }
        let run_path = dir.join(RUN_FILE);
        let run = run_path
            .is_file()
            .then(|| RunConfig::load(&run_path, &[]))
            .transpose()?;
        if is_tabular(dir)? {
            return Ok(SavedRun::Tabular {
                model: Box::new(TabularModel::load(dir, device)?),
                run,
            });
        }
        let saved = SavedImageConfig::load(dir)?;
        let model = saved.config.model.init::<B>(device)?;
        let model = load_model(dir, model, device)?;
        Ok(SavedRun::Image {
            model: Box::new(model),
            saved: Box::new(saved),
            run,
        })
    }
}

impl<B: KernelBackend> SavedRun<B> {
    /// The network of an export, rebuilt from its sidecar with the exported weights.
    fn from_export(export: &Export, device: &B::Device) -> anyhow::Result<Self> {
        let saved = match &export.sidecar.cubenet {
            ExportedRun::Tabular(config) => {
                return Ok(SavedRun::Tabular {
                    model: Box::new(export.tabular_model(config, device)?),
                    run: None,
                });
            }
            ExportedRun::Image(saved) => saved,
        };
        let model = saved.config.model.init::<B>(device)?;
        let model = read_weights(model, &saved.config.model.sequential()?, &export.weights)?;
        Ok(SavedRun::Image {
            model: Box::new(model),
            saved: Box::new(saved.clone()),
            run: None,
        })
    }
}

/// Whether `dir` holds a tabular run (it has `preprocessing.json`) rather than an image run;
/// an error if it holds neither.
fn is_tabular(dir: &Path) -> anyhow::Result<bool> {
    if let Some(export) = Export::find(dir)? {
        return Ok(matches!(export.sidecar.cubenet, ExportedRun::Tabular(_)));
    }
    if dir.join(PREPROCESSING_FILE).is_file() {
        return Ok(true);
    }
    anyhow::ensure!(
        dir.join(CONFIG_FILE).is_file(),
        "{} holds no trained run (no {CONFIG_FILE}); pass the artifact directory of a finished \
         `cubenet train`, or what `cubenet export` wrote",
        dir.display()
    );
    Ok(false)
}

/// Work on a trained run (`eval`, `predict`), generic over the backend it runs on.
pub trait SavedRunWork {
    fn run<B: KernelBackend>(self, device: &B::Device) -> anyhow::Result<()>;
}

/// Runs `work` on `backend`, without autodiff; by default on the backend the run in
/// `model_dir` trained on (its run.toml), else on `train`'s default.
pub fn run_on_backend<W: SavedRunWork>(
    backend: Option<BackendKind>,
    model_dir: &Path,
    work: W,
) -> anyhow::Result<()> {
    struct Task<W>(W);
    impl<W: SavedRunWork> BackendTask for Task<W> {
        type Output = anyhow::Result<()>;

        fn run<B: AutodiffKernelBackend>(self, device: B::Device, _: BackendKind) -> Self::Output {
            self.0.run::<B::InnerBackend>(&device)
        }
    }
    // A directory without a run is the error to report, before any device is opened.
    is_tabular(model_dir)?;
    let trained_on = || {
        RunConfig::load(&model_dir.join(RUN_FILE), &[])
            .ok()
            .and_then(|run| run.backend)
    };
    let backend = backend
        .or_else(trained_on)
        .unwrap_or_else(BackendKind::default_for_build);
    run_on(backend, Task(work))?
}

/// The images of an image run: MNIST from the flag's directory, else the run file's, else
/// downloaded; other sources as the run file gives them.
pub fn image_source(flag: Option<PathBuf>, run: Option<&RunConfig>) -> anyhow::Result<ImageSource> {
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
