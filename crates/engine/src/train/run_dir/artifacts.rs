//! What a run leaves in its artifact directory: `config.json`, the final model record
//! `model.mpk`, Burn's metric logs and per-epoch checkpoints (see [`super::checkpoints`]),
//! and `curves.png`. Every file is written through [`crate::atomic_file`], so an
//! interrupted run never leaves a torn one.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use burn::module::Module;
use burn::prelude::*;
use burn::train::LearnerSummary;

use super::RunDir;
use super::recorder::{load_record, write_record};
use crate::atomic_file::write_atomically;
use crate::plot::{Axis, Panel, Scale, Series, plot_panels};
use crate::train::TrainError;

/// Saves `config` as pretty JSON in `dir`.
pub fn save_config<C: serde::Serialize>(dir: &RunDir, config: &C) -> Result<PathBuf, TrainError> {
    let path = dir.config();
    let json = serde_json::to_string_pretty(config).expect("configs serialize to JSON");
    write_atomically(&path, json.as_bytes())?;
    Ok(path)
}

/// The largest settings file ([`save_config`]'s `config.json`, a table's
/// `preprocessing.json`) read back: cubenet writes a few kilobytes (a thousand layers or class
/// names at most), and a larger one, edited or replaced, is refused before it is read.
const MAX_SETTINGS_BYTES: u64 = 4 << 20;

/// Reads back a JSON settings file of a run, at most [`MAX_SETTINGS_BYTES`] long.
pub fn load_settings<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, TrainError> {
    let refuse = |reason: String| TrainError::Load {
        path: path.to_path_buf(),
        reason,
    };
    let file = File::open(path).map_err(|e| refuse(e.to_string()))?;
    let mut text = String::new();
    file.take(MAX_SETTINGS_BYTES + 1)
        .read_to_string(&mut text)
        .map_err(|e| refuse(e.to_string()))?;
    if text.len() as u64 > MAX_SETTINGS_BYTES {
        return Err(refuse(format!(
            "it is longer than {} MiB, far more than the settings cubenet writes: it was edited \
             or replaced",
            MAX_SETTINGS_BYTES >> 20
        )));
    }
    serde_json::from_str(&text).map_err(|e| refuse(e.to_string()))
}

/// Saves the weights of `model` in full precision as `dir/model.mpk`.
pub fn save_model<B: Backend, M: Module<B>>(dir: &RunDir, model: M) -> Result<PathBuf, TrainError> {
    let path = dir.model();
    write_record::<B, _>(&path, model.into_record())?;
    Ok(path)
}

/// Loads the weights saved by [`save_model`] in `dir` into `model`.
pub fn load_model<B: Backend, M: Module<B>>(
    dir: &RunDir,
    model: M,
    device: &B::Device,
) -> Result<M, TrainError> {
    load_record(&dir.model(), model, device)
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
    dir: &RunDir,
    model: M,
    device: &B::Device,
) -> Result<BestEpoch<M>, TrainError> {
    let losses = valid_losses(dir)?;
    let epoch = losses
        .iter()
        .filter(|(_, loss)| loss.is_finite())
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|&(epoch, _)| epoch)
        .ok_or_else(|| TrainError::Logs {
            dir: dir.root().to_path_buf(),
            reason: "no finite validation loss was logged".into(),
        })?;
    let last = losses.iter().map(|&(e, _)| e).max().unwrap_or(epoch);
    let checkpoints = dir.checkpoints();
    let model = checkpoints.load_model(epoch, model, device)?;
    checkpoints.prune(&[epoch, last])?;
    Ok(BestEpoch {
        model,
        epoch,
        epochs: last,
    })
}

/// `(epoch, mean validation loss)` of every epoch in the metric logs of `dir`.
pub fn valid_losses(dir: &RunDir) -> Result<Vec<(usize, f64)>, TrainError> {
    let summary =
        LearnerSummary::new(dir.root(), &["Loss"]).map_err(|reason| TrainError::Logs {
            dir: dir.root().to_path_buf(),
            reason,
        })?;
    Ok(summary
        .metrics
        .valid
        .iter()
        .find(|m| m.name == "Loss")
        .map(|loss| loss.entries.iter().map(|e| (e.step, e.value)).collect())
        .unwrap_or_default())
}

/// Draws one panel per `(metric, y-axis label)` with the train and valid values per epoch,
/// from Burn's metric logs in `dir`.
pub fn plot_learning_curves(dir: &RunDir, panels: &[(&str, &str)]) -> Result<PathBuf, TrainError> {
    let names: Vec<&str> = panels.iter().map(|(name, _)| *name).collect();
    let summary = LearnerSummary::new(dir.root(), &names).map_err(|reason| TrainError::Logs {
        dir: dir.root().to_path_buf(),
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
    let path = dir.curves();
    let panels: Vec<Panel> = panels
        .iter()
        .map(|(name, y_label)| panel(name, y_label))
        .collect();
    plot_panels(&path, &panels)?;
    Ok(path)
}
