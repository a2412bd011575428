//! What a run leaves in its artifact directory: `config.json`, the final model record
//! `model.mpk`, Burn's metric logs and checkpoints, and `curves.png`. Files are written to
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
        .save_file(
            &tmp_stem,
            &NamedMpkFileRecorder::<FullPrecisionSettings>::new(),
        )
        .map_err(|e| record_err(e.to_string()))?;
    fs::rename(tmp_stem.with_extension("mpk"), &path).map_err(|e| record_err(e.to_string()))?;
    Ok(path)
}

/// Draws train/valid loss and accuracy per epoch from Burn's metric logs in `dir`.
pub fn plot_learning_curves(dir: &Path) -> Result<PathBuf, TrainError> {
    let summary =
        LearnerSummary::new(dir, &["Loss", "Accuracy"]).map_err(|reason| TrainError::Logs {
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
    plot_panels(
        &path,
        &[panel("Loss", "cross-entropy"), panel("Accuracy", "%")],
    )?;
    Ok(path)
}
