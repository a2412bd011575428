//! The JSON files beside an export: for safetensors, the network as PyTorch's `nn.Sequential`
//! and the run it came from; for ONNX, the graph's input and output and the classes.

use std::path::{Path, PathBuf};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use crate::data::Standardizer;
use crate::model::{ModelError, Sequential, Task, TorchLayer};
use crate::train::TrainError;
use crate::train::jobs::images::SavedImageConfig;
use crate::train::jobs::tabular::TabularConfig;

/// The `format` of every sidecar cubenet writes; how it knows an export it may replace.
pub const EXPORT_FORMAT: &str = "cubenet-export/1";

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
    pub(super) fn sidecar(
        &self,
        weights: String,
        standardizer: Option<&Standardizer>,
    ) -> ExportSidecar {
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

impl ExportSidecar {
    /// Reads a sidecar written by `cubenet export`.
    pub fn read(path: &Path) -> Result<Self, TrainError> {
        read_sidecar(path, EXPORT_FORMAT, |sidecar: &Self| &sidecar.format)
    }
}

/// The sidecar at `path`, refused unless its `format` (what `format_of` reads) is `expected`.
fn read_sidecar<T: DeserializeOwned>(
    path: &Path,
    expected: &str,
    format_of: impl Fn(&T) -> &str,
) -> Result<T, TrainError> {
    let load = |reason: String| TrainError::Load {
        path: path.to_path_buf(),
        reason,
    };
    let text = std::fs::read_to_string(path).map_err(|e| load(e.to_string()))?;
    let sidecar: T = serde_json::from_str(&text).map_err(|e| load(e.to_string()))?;
    let format = format_of(&sidecar);
    if format != expected {
        return Err(load(format!("its format is `{format}`, not `{expected}`")));
    }
    Ok(sidecar)
}

/// The sidecar of the weights file `weights`: the same name in `.json`.
pub fn sidecar_path(weights: &Path) -> PathBuf {
    weights.with_extension("json")
}

/// The format of the sidecar beside an ONNX export.
pub const ONNX_EXPORT_FORMAT: &str = "cubenet-onnx/1";

/// The JSON file beside an ONNX model: what goes in and comes out, and the run's classes.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OnnxSidecar {
    /// [`ONNX_EXPORT_FORMAT`].
    pub format: String,
    /// The model file, in the sidecar's directory, and its SHA-256.
    pub model: String,
    pub model_sha256: String,
    /// The graph's input: its name and one example's shape (the batch comes first, of any
    /// size).
    pub input: String,
    pub input_shape: Vec<usize>,
    /// The graph's output and what it holds.
    pub output: String,
    pub outputs: String,
    /// Whether `preprocessing` is in the graph (raw pixels or feature values go in) or
    /// still the caller's to apply.
    pub preprocessing_included: bool,
    pub preprocessing: Preprocessing,
    /// Class names in output order; empty for regression.
    pub classes: Vec<String>,
}

impl OnnxSidecar {
    /// Reads a sidecar written by `cubenet export --format onnx`.
    pub fn read(path: &Path) -> Result<Self, TrainError> {
        read_sidecar(path, ONNX_EXPORT_FORMAT, |sidecar: &Self| &sidecar.format)
    }
}

/// The sidecar of the ONNX model `model`: its name with `.json` added (`model.onnx.json`), so
/// that it is not the safetensors export's.
pub fn onnx_sidecar_path(model: &Path) -> PathBuf {
    let mut name = model.as_os_str().to_os_string();
    name.push(".json");
    PathBuf::from(name)
}
