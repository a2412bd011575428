//! `cubenet export`: a trained network as safetensors laid out for the `nn.Sequential` of the
//! same layers ([`Sequential`]), with a JSON sidecar that describes that network, so the file
//! is usable without cubenet; and such an export found and read back, its weights checked
//! against the SHA-256 that the sidecar records of them (safetensors has no checksum of its
//! own, and a flipped byte in a weight reads as another weight).

use std::path::{Path, PathBuf};

use burn::prelude::*;
use burn_store::{ModuleSnapshot, SafetensorsStore};
use cubenet_kernels::KernelBackend;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::torch_names::{Direction, names, read_weights};
use crate::atomic_file::write_atomically;
use crate::data::Standardizer;
use crate::model::{ImageModel, ModelError, Sequential, TabularNet, Task, TorchLayer};
use crate::train::jobs::images::SavedImageConfig;
use crate::train::jobs::tabular::{TabularConfig, TabularModel};
use crate::train::run_dir::RunDir;
use crate::train::{RecordError, TrainError};

/// The `format` of every sidecar cubenet writes; how it knows an export it may replace.
pub const EXPORT_FORMAT: &str = "cubenet-export/1";

/// The file name of the weights in [`RunDir::export`]; the sidecar is the same name in
/// `.json`.
pub const EXPORT_WEIGHTS: &str = "model.safetensors";

/// The JSON file beside exported weights: enough to rebuild the network in PyTorch
/// (`layers`, `input`, `preprocessing`, `classes`) and, under `cubenet`, the run's own
/// settings, from which `cubenet predict` and `eval` rebuild it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExportSidecar {
    /// [`EXPORT_FORMAT`].
    pub format: String,
    /// The weights file, in the sidecar's directory.
    pub weights: String,
    /// The SHA-256 of the weights file, checked when cubenet reads the export back (absent
    /// in sidecars of earlier cubenets, whose exports are refused).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub weights_sha256: Option<String>,
    /// One input: `[channels, height, width]` of an image, `[features]` of a table row.
    pub input: Vec<usize>,
    /// The `nn.Sequential`; a layer's weights are named by its index (`0.weight`).
    pub layers: Vec<TorchLayer>,
    /// What the last layer outputs.
    pub outputs: String,
    pub preprocessing: Preprocessing,
    /// Class names in output order; empty for regression.
    pub classes: Vec<String>,
    pub cubenet: ExportedRun,
}

/// How raw inputs become the network's inputs.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Preprocessing {
    /// Pixels (0..255, channels first) times `scale`, then `(x − mean[c]) / std[c]`.
    Images {
        scale: f32,
        mean: Vec<f32>,
        std: Vec<f32>,
    },
    /// The `features` columns, each as `(x − mean[i]) / std[i]` when the run standardized.
    Table {
        features: Vec<String>,
        standardize: Option<Standardizer>,
    },
}

/// The trained run an export came from, as cubenet saved it.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExportedRun {
    Image(SavedImageConfig),
    Tabular(TabularConfig),
}

impl ExportedRun {
    /// The network as an `nn.Sequential`.
    pub fn sequential(&self) -> Result<Sequential, ModelError> {
        match self {
            ExportedRun::Image(saved) => saved.config.model.sequential(),
            ExportedRun::Tabular(config) => config
                .mlp(config.classes.unwrap_or(0))
                .sequential("mlp.dense", false),
        }
    }

    /// The sidecar for this run's network.
    fn sidecar(&self, weights: String, standardizer: Option<&Standardizer>) -> ExportSidecar {
        let layers = self
            .sequential()
            .expect("a trained network is valid")
            .layers;
        let (input, outputs, preprocessing, classes) = match self {
            ExportedRun::Image(saved) => {
                let shape = saved.shape;
                let preprocessing = Preprocessing::Images {
                    scale: 1.0 / 255.0,
                    mean: saved.normalization.mean.clone(),
                    std: saved.normalization.std.clone(),
                };
                let input = vec![shape.channels, shape.height, shape.width];
                (input, "logits", preprocessing, saved.classes.clone())
            }
            ExportedRun::Tabular(config) => {
                let preprocessing = Preprocessing::Table {
                    features: config.features.clone(),
                    standardize: standardizer.cloned(),
                };
                let (outputs, classes) = match config.task {
                    Task::Regression => ("values", Vec::new()),
                    Task::Binary => ("logit of class 1", vec!["0".into(), "1".into()]),
                    Task::Multiclass => {
                        let count = config.classes.unwrap_or(0);
                        ("logits", (0..count).map(|c| c.to_string()).collect())
                    }
                };
                (vec![config.features.len()], outputs, preprocessing, classes)
            }
        };
        ExportSidecar {
            format: EXPORT_FORMAT.into(),
            weights,
            weights_sha256: None,
            input,
            layers,
            outputs: outputs.into(),
            preprocessing,
            classes,
            cubenet: self.clone(),
        }
    }
}

/// Writes an image model's weights to `weights` (safetensors) and its sidecar beside it.
pub fn export_image_model<B: Backend>(
    model: &ImageModel<B>,
    saved: &SavedImageConfig,
    weights: &Path,
) -> Result<(), TrainError> {
    let run = ExportedRun::Image(saved.clone());
    export(model, run.sidecar(file_name(weights), None), weights)
}

/// Writes a tabular model's weights to `weights` (safetensors) and its sidecar beside it.
pub fn export_tabular_model<B: Backend>(
    model: &TabularModel<B>,
    weights: &Path,
) -> Result<(), TrainError> {
    let run = ExportedRun::Tabular(model.config.clone());
    let sidecar = run.sidecar(file_name(weights), model.standardizer.as_ref());
    export(&model.net, sidecar, weights)
}

/// The SHA-256 of `bytes` in hex, as sidecars record it.
fn sha256(bytes: &[u8]) -> String {
    format!("{:x}", Sha256::digest(bytes))
}

fn file_name(path: &Path) -> String {
    path.file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default()
}

/// The sidecar of the weights file `weights`: the same name in `.json`.
pub fn sidecar_path(weights: &Path) -> PathBuf {
    weights.with_extension("json")
}

fn export<B: Backend, M: Module<B>>(
    model: &M,
    mut sidecar: ExportSidecar,
    weights: &Path,
) -> Result<(), TrainError> {
    let sidecar_file = sidecar_path(weights);
    let refuse = |path: &Path, reason: &str| TrainError::Record {
        path: path.to_path_buf(),
        reason: reason.into(),
    };
    if weights.extension().is_none_or(|ext| ext != "safetensors") {
        return Err(refuse(weights, "name the output `<name>.safetensors`"));
    }
    // cubenet replaces only an export of its own: both files, the sidecar marked as ours.
    let ours = ExportSidecar::read(&sidecar_file).is_ok();
    for path in [weights, sidecar_file.as_path()] {
        if path.exists() && !ours {
            return Err(refuse(
                path,
                "it exists and is not a cubenet export, which cubenet never replaces; choose \
                 another --output",
            ));
        }
    }
    if let Some(dir) = weights.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(TrainError::io(dir))?;
    }
    let sequential = sidecar.cubenet.sequential()?;
    let mut store = SafetensorsStore::from_bytes(None)
        .skip_enum_variants(true)
        .map_indices_contiguous(false)
        .remap(names(&sequential, Direction::ToPyTorch))
        .metadata("producer", "cubenet");
    let record = |e: burn_store::SafetensorsStoreError| refuse(weights, &e.to_string());
    model.save_into(&mut store).map_err(record)?;
    let bytes = store.get_bytes().map_err(record)?;
    sidecar.weights_sha256 = Some(sha256(&bytes));
    write_atomically(weights, &bytes)?;
    let json = serde_json::to_string_pretty(&sidecar).expect("serializes");
    write_atomically(&sidecar_file, json.as_bytes())?;
    Ok(())
}

impl ExportSidecar {
    /// Reads a sidecar written by `cubenet export`.
    pub fn read(path: &Path) -> Result<Self, TrainError> {
        let load = |reason: String| TrainError::Load {
            path: path.to_path_buf(),
            reason,
        };
        let text = std::fs::read_to_string(path).map_err(|e| load(e.to_string()))?;
        let sidecar: Self = serde_json::from_str(&text).map_err(|e| load(e.to_string()))?;
        if sidecar.format != EXPORT_FORMAT {
            return Err(load(format!(
                "its format is `{}`, not `{EXPORT_FORMAT}`",
                sidecar.format
            )));
        }
        Ok(sidecar)
    }
}

/// An export found where a trained run was expected.
#[derive(Debug, Clone)]
pub struct Export {
    pub sidecar: ExportSidecar,
    /// The weights file.
    pub weights: PathBuf,
}

impl Export {
    /// The export at `path`: a `.safetensors` file with its sidecar, or a directory that
    /// holds no run (`config.json`) but one export. `None` when `path` holds a run or
    /// nothing exported.
    pub fn find(path: &Path) -> Result<Option<Self>, TrainError> {
        let weights = if path.is_file() {
            path.to_path_buf()
        } else if path.is_dir() && !RunDir::open(path).config().is_file() {
            let entries = std::fs::read_dir(path).map_err(TrainError::read(path))?;
            let mut sidecars = entries
                .filter_map(|entry| entry.ok().map(|entry| entry.path()))
                .filter(|p| p.extension().is_some_and(|ext| ext == "json"))
                .filter(|p| ExportSidecar::read(p).is_ok());
            match (sidecars.next(), sidecars.next()) {
                (Some(sidecar), None) => sidecar.with_extension("safetensors"),
                (None, _) => return Ok(None),
                (Some(_), Some(_)) => {
                    return Err(TrainError::Load {
                        path: path.to_path_buf(),
                        reason: "it holds more than one export: name the .safetensors file".into(),
                    });
                }
            }
        } else {
            return Ok(None);
        };
        let sidecar = ExportSidecar::read(&sidecar_path(&weights))?;
        let weights = weights.with_file_name(&sidecar.weights);
        let export = Self { sidecar, weights };
        export.check_weights()?;
        Ok(Some(export))
    }

    /// Refuses weights whose SHA-256 is not the one the sidecar records, and an export whose
    /// sidecar records none; missing weights are [`read_weights`]'s to name.
    fn check_weights(&self) -> Result<(), TrainError> {
        if !self.weights.is_file() {
            return Ok(());
        }
        let Some(recorded) = &self.sidecar.weights_sha256 else {
            return Err(TrainError::Load {
                path: self.weights.clone(),
                reason: "its sidecar records no checksum of it, so damage to it could not be \
                         found: an earlier cubenet exported it; export the run again"
                    .into(),
            });
        };
        let bytes = std::fs::read(&self.weights).map_err(TrainError::read(&self.weights))?;
        if sha256(&bytes) != *recorded {
            return Err(TrainError::record(&self.weights)(RecordError::Damaged(
                "its SHA-256 is not the one its sidecar records".into(),
            )));
        }
        Ok(())
    }

    /// The tabular model of this export (whose run is `config`), on `device`.
    pub fn tabular_model<B: KernelBackend>(
        &self,
        config: &TabularConfig,
        device: &B::Device,
    ) -> Result<TabularModel<B>, TrainError> {
        let net = TabularNet {
            mlp: config.mlp(config.classes.unwrap_or(0)).init(device)?,
            task: config.task,
        };
        let standardizer = match &self.sidecar.preprocessing {
            Preprocessing::Table { standardize, .. } => standardize.clone(),
            Preprocessing::Images { .. } => None,
        };
        Ok(TabularModel {
            config: config.clone(),
            standardizer,
            net: read_weights(net, &self.sidecar.cubenet.sequential()?, &self.weights)?,
        })
    }
}
