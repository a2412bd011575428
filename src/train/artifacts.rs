//! What a run leaves in its artifact directory: `config.json`, the final model record
//! `model.mpk`, Burn's metric logs and per-epoch checkpoints, and `curves.png`. Files are written to
//! a temporary name and renamed into place, so an interrupted run never leaves a torn one.

use std::fs;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::prelude::*;
use burn::record::{FullPrecisionSettings, NamedMpkFileRecorder};
use burn::train::LearnerSummary;

use super::TrainError;
use crate::plot::{Axis, Panel, Scale, Series, plot_panels};

/// File name of the final model record.
pub const MODEL_FILE: &str = "model.mpk";
/// File name of the run's settings.
pub const CONFIG_FILE: &str = "config.json";
/// File name of the loss/accuracy figure.
pub const CURVES_FILE: &str = "curves.png";

/// The recorder of the final model and of the per-epoch checkpoints: full precision, so
/// that restoring the best epoch gives back exactly its weights.
pub type ModelRecorder = NamedMpkFileRecorder<FullPrecisionSettings>;

/// Creates `dir` and clears what an earlier run left there, so that the metric logs, the
/// curves and the checkpoints describe this run only. Other files are left alone.
pub(crate) fn prepare_artifact_dir(dir: &Path) -> Result<(), TrainError> {
    let io_err = |source| TrainError::Io {
        path: dir.to_path_buf(),
        source,
    };
    for stale in ["train", "valid", "checkpoint"] {
        let path = dir.join(stale);
        if path.exists() {
            std::fs::remove_dir_all(&path).map_err(io_err)?;
        }
    }
    std::fs::create_dir_all(dir).map_err(io_err)
}

/// Writes `bytes` to `path` through a temporary file and a rename.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<(), TrainError> {
    let tmp = path.with_extension("partial");
    let io_err = |source| TrainError::Io {
        path: path.to_path_buf(),
        source,
    };
    fs::write(&tmp, bytes).map_err(io_err)?;
    fs::rename(&tmp, path).map_err(io_err)
}

/// Saves `config` as pretty JSON in `dir`.
pub fn save_config<C: serde::Serialize>(dir: &Path, config: &C) -> Result<PathBuf, TrainError> {
    let path = dir.join(CONFIG_FILE);
    let json = serde_json::to_string_pretty(config).expect("configs serialize to JSON");
    write_atomically(&path, json.as_bytes())?;
    Ok(path)
}

/// Saves the weights of `model` in full precision as `dir/model.mpk`.
pub fn save_model<B: Backend, M: Module<B>>(dir: &Path, model: M) -> Result<PathBuf, TrainError> {
    let path = dir.join(MODEL_FILE);
    // The recorder sets the ".mpk" extension itself.
    let tmp_stem = dir.join("model-partial");
    let record_err = |reason: String| TrainError::Record {
        path: path.clone(),
        reason,
    };
    model
        .save_file(&tmp_stem, &ModelRecorder::new())
        .map_err(|e| record_err(e.to_string()))?;
    fs::rename(tmp_stem.with_extension("mpk"), &path).map_err(|e| record_err(e.to_string()))?;
    Ok(path)
}

/// Loads the weights saved by [`save_model`] in `dir` into `model`.
pub fn load_model<B: Backend, M: Module<B>>(
    dir: &Path,
    model: M,
    device: &B::Device,
) -> Result<M, TrainError> {
    load_record(&dir.join(MODEL_FILE), model, device)
}

/// A model restored from its best epoch's checkpoint.
#[derive(Debug)]
pub struct BestEpoch<M> {
    pub model: M,
    /// The epoch (from 1) with the lowest mean validation loss.
    pub epoch: usize,
    /// Epochs the run finished.
    pub epochs: usize,
}

/// Loads the checkpoint of the epoch with the lowest mean validation loss in the metric
/// logs of `dir` into `model`, then deletes the other epochs' checkpoints except the last
/// (the one a resumed run would continue from).
pub fn restore_best_epoch<B: Backend, M: Module<B>>(
    dir: &Path,
    model: M,
    device: &B::Device,
) -> Result<BestEpoch<M>, TrainError> {
    let logs_err = |reason: String| TrainError::Logs {
        dir: dir.to_path_buf(),
        reason,
    };
    let summary = LearnerSummary::new(dir, &["Loss"]).map_err(logs_err)?;
    let entries = summary
        .metrics
        .valid
        .iter()
        .find(|m| m.name == "Loss")
        .map_or(&[][..], |loss| &loss.entries[..]);
    let epoch = entries
        .iter()
        .filter(|e| e.value.is_finite())
        .min_by(|a, b| a.value.total_cmp(&b.value))
        .map(|e| e.step)
        .ok_or_else(|| logs_err("no finite validation loss was logged".into()))?;
    let last = entries.iter().map(|e| e.step).max().unwrap_or(epoch);
    let checkpoints = dir.join("checkpoint");
    let model = load_record(
        &checkpoints.join(format!("model-{epoch}.mpk")),
        model,
        device,
    )?;
    prune_checkpoints(&checkpoints, &[epoch, last])?;
    Ok(BestEpoch {
        model,
        epoch,
        epochs: last,
    })
}

/// Deletes the checkpoint files (`<name>-<epoch>.mpk`) of every epoch not in `keep`.
fn prune_checkpoints(dir: &Path, keep: &[usize]) -> Result<(), TrainError> {
    let io_err = |source| TrainError::Io {
        path: dir.to_path_buf(),
        source,
    };
    for entry in fs::read_dir(dir).map_err(io_err)? {
        let path = entry.map_err(io_err)?.path();
        let epoch = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .and_then(|stem| stem.rsplit_once('-'))
            .and_then(|(_, epoch)| epoch.parse::<usize>().ok());
        if epoch.is_some_and(|e| !keep.contains(&e)) {
            fs::remove_file(&path).map_err(io_err)?;
        }
    }
    Ok(())
}

fn load_record<B: Backend, M: Module<B>>(
    path: &Path,
    model: M,
    device: &B::Device,
) -> Result<M, TrainError> {
    if !path.is_file() {
        return Err(TrainError::Load {
            path: path.to_path_buf(),
            reason: "no such file".into(),
        });
    }
    model
        .load_file(path.to_path_buf(), &ModelRecorder::new(), device)
        .map_err(|e| TrainError::Load {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })
}

/// Draws one panel per `(metric, y-axis label)` with the train and valid values per epoch,
/// from Burn's metric logs in `dir`.
pub fn plot_learning_curves(dir: &Path, panels: &[(&str, &str)]) -> Result<PathBuf, TrainError> {
    let names: Vec<&str> = panels.iter().map(|(name, _)| *name).collect();
    let summary = LearnerSummary::new(dir, &names).map_err(|reason| TrainError::Logs {
        dir: dir.to_path_buf(),
        reason,
    })?;
    let metrics = &summary.metrics;
    let panel = |name: &str, y_label: &str| Panel {
        title: name.to_string(),
        x: Axis::new("epoch", Scale::Integer),
        y: Axis::new(y_label, Scale::Linear),
        series: [("train", &metrics.train), ("valid", &metrics.valid)]
            .into_iter()
            .enumerate()
            .filter_map(|(color, (split, summaries))| {
                let metric = summaries.iter().find(|m| m.name == name)?;
                Some(Series {
                    label: split.to_string(),
                    color,
                    points: metric
                        .entries
                        .iter()
                        .map(|e| (e.step as f64, e.value))
                        .collect(),
                })
            })
            .collect(),
    };
    let path = dir.join(CURVES_FILE);
    let panels: Vec<Panel> = panels
        .iter()
        .map(|(name, y_label)| panel(name, y_label))
        .collect();
    plot_panels(&path, &panels)?;
    Ok(path)
}
