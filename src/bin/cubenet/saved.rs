//! A trained run read back from its artifact directory, on the CPU.

use std::path::{Path, PathBuf};

use anyhow::Context;
use burn::backend::NdArray;
use burn::config::Config;
use cubenet::model::MnistModel;
use cubenet::run_config::{DataSection, RunConfig};
use cubenet::train::tabular::{PREPROCESSING_FILE, TabularModel};
use cubenet::train::{CONFIG_FILE, MnistTrainingConfig, load_model};

use crate::train::RUN_FILE;

/// A trained model of either kind, with the run file it was trained from when there is one.
pub enum SavedRun {
    Image {
        model: Box<MnistModel<NdArray>>,
        run: Option<RunConfig>,
    },
    Tabular {
        model: Box<TabularModel<NdArray>>,
        run: Option<RunConfig>,
    },
}

impl SavedRun {
    /// Loads the model in `dir` (a tabular run has `preprocessing.json`).
    pub fn load(dir: &Path) -> anyhow::Result<Self> {
        let device = Default::default();
        let run_path = dir.join(RUN_FILE);
        let run = run_path
            .is_file()
            .then(|| RunConfig::load(&run_path, &[]))
            .transpose()?;
        if dir.join(PREPROCESSING_FILE).is_file() {
            return Ok(SavedRun::Tabular {
                model: Box::new(TabularModel::load(dir, &device)?),
                run,
            });
        }
        let config_path = dir.join(CONFIG_FILE);
        anyhow::ensure!(
            config_path.is_file(),
            "{} holds no trained run (no {CONFIG_FILE}); pass the artifact directory of a \
             finished `cubenet train`",
            dir.display()
        );
        let config = MnistTrainingConfig::load(&config_path)
            .with_context(|| format!("cannot read {}", config_path.display()))?;
        let model = config.model.init::<NdArray>(&device)?;
        let model = load_model(dir, model, &device)?;
        Ok(SavedRun::Image {
            model: Box::new(model),
            run,
        })
    }
}

/// The MNIST directory of an image run: the flag, else the run file's, else none (download).
pub fn mnist_dir(flag: Option<PathBuf>, run: Option<&RunConfig>) -> Option<PathBuf> {
    flag.or_else(|| match run.map(|r| &r.data) {
        Some(DataSection::Mnist { dir, .. }) => dir.clone(),
        _ => None,
    })
}
