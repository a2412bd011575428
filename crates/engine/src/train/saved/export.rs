//! `cubenet export`: a trained network as safetensors laid out for the `nn.Sequential` of the
//! same layers ([`crate::model::Sequential`]), with a JSON sidecar that describes that
//! network, so the file is usable without cubenet, or as one ONNX graph; and such a
//! safetensors export found and read back, its weights checked against the SHA-256 that the
//! sidecar records of them (safetensors has no checksum of its own, and a flipped byte in a
//! weight reads as another weight).

use std::path::{Path, PathBuf};

use burn::prelude::*;
use burn_store::{ModuleSnapshot, SafetensorsStore};
use cubenet_kernels::KernelBackend;
use sha2::{Digest, Sha256};

use super::onnx_export::{onnx_export, onnx_weights};
use super::sidecar::{
    ExportSidecar, ExportedRun, OnnxSidecar, Preprocessing, onnx_sidecar_path, sidecar_path,
};
use super::torch_names::{Direction, names, read_weights};
use crate::atomic_file::write_atomically;
use crate::model::{ImageModel, TabularNet};
use crate::train::jobs::images::SavedImageConfig;
use crate::train::jobs::tabular::{TabularConfig, TabularModel};
use crate::train::run_dir::RunDir;
use crate::train::{RecordError, TrainError};

/// The file name of the weights in [`RunDir::export`]; the sidecar is the same name in
/// `.json`.
pub const EXPORT_WEIGHTS: &str = "model.safetensors";

/// What `cubenet export` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExportFormat {
    /// The weights under PyTorch's names, for the `nn.Sequential` the sidecar describes.
    Safetensors,
    /// One ONNX graph ([`super::onnx_graph`]); with the input normalization and the output's
    /// softmax or sigmoid as nodes when `with_preprocessing`.
    Onnx { with_preprocessing: bool },
}

/// Writes an image model to `output` in `format`, and its sidecar beside it.
pub fn export_image_model<B: Backend>(
    model: &ImageModel<B>,
    saved: &SavedImageConfig,
    output: &Path,
    format: ExportFormat,
) -> Result<(), TrainError> {
    let run = ExportedRun::Image(saved.clone());
    export(model, run.sidecar(file_name(output), None), output, format)
}

/// Writes a tabular model to `output` in `format`, and its sidecar beside it.
pub fn export_tabular_model<B: Backend>(
    model: &TabularModel<B>,
    output: &Path,
    format: ExportFormat,
) -> Result<(), TrainError> {
    let run = ExportedRun::Tabular(model.config.clone());
    let sidecar = run.sidecar(file_name(output), model.standardizer.as_ref());
    export(&model.net, sidecar, output, format)
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

fn refuse(path: &Path, reason: impl ToString) -> TrainError {
    TrainError::Record {
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn export<B: Backend, M: Module<B>>(
    model: &M,
    mut sidecar: ExportSidecar,
    output: &Path,
    format: ExportFormat,
) -> Result<(), TrainError> {
    let (extension, sidecar_file) = match format {
        ExportFormat::Safetensors => ("safetensors", sidecar_path(output)),
        ExportFormat::Onnx { .. } => ("onnx", onnx_sidecar_path(output)),
    };
    if output.extension().is_none_or(|ext| ext != extension) {
        return Err(refuse(
            output,
            format!("name the output `<name>.{extension}`"),
        ));
    }
    // cubenet replaces only an export of its own: both files, the sidecar marked as ours.
    let ours = match format {
        ExportFormat::Safetensors => ExportSidecar::read(&sidecar_file).is_ok(),
        ExportFormat::Onnx { .. } => OnnxSidecar::read(&sidecar_file).is_ok(),
    };
    for path in [output, sidecar_file.as_path()] {
        if path.exists() && !ours {
            return Err(refuse(
                path,
                "it exists and is not a cubenet export, which cubenet never replaces; choose \
                 another --output",
            ));
        }
    }
    if let Some(dir) = output.parent().filter(|dir| !dir.as_os_str().is_empty()) {
        std::fs::create_dir_all(dir).map_err(TrainError::io(dir))?;
    }
    let sequential = sidecar.cubenet.sequential()?;
    let mut store = SafetensorsStore::from_bytes(None)
        .skip_enum_variants(true)
        .map_indices_contiguous(false)
        .remap(names(&sequential, Direction::ToPyTorch))
        .metadata("producer", "cubenet");
    let record = |e: burn_store::SafetensorsStoreError| refuse(output, e);
    model.save_into(&mut store).map_err(record)?;
    let weights = store.get_bytes().map_err(record)?;
    let (bytes, json) = match format {
        ExportFormat::Safetensors => {
            sidecar.weights_sha256 = Some(sha256(&weights));
            (weights, serde_json::to_string_pretty(&sidecar))
        }
        ExportFormat::Onnx { with_preprocessing } => {
            let weights = onnx_weights(&weights).map_err(|e| refuse(output, e))?;
            let (model, onnx_sidecar) =
                onnx_export(&sidecar, &sequential, &weights, with_preprocessing)
                    .map_err(|e| refuse(output, e))?;
            let json = serde_json::to_string_pretty(&OnnxSidecar {
                model_sha256: sha256(&model),
                ..onnx_sidecar
            });
            (model, json)
        }
    };
    write_atomically(output, &bytes)?;
    write_atomically(&sidecar_file, json.expect("serializes").as_bytes())?;
    Ok(())
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
