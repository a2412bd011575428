//! What a run leaves in its artifact directory: `config.json`, the final model record
//! `model.mpk`, Burn's metric logs and per-epoch checkpoints, and `curves.png`. Files are written to
//! a temporary name and renamed into place, so an interrupted run never leaves a torn one.

use std::fs;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::train::LearnerSummary;

use super::TrainError;
use super::recorder::ModelRecorder;
use super::resume::CHECKPOINT_DIR;
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
    model
        .save_file(&path, &ModelRecorder::new())
        .map_err(|e| TrainError::Record {
            path: path.clone(),
            reason: e.to_string(),
        })?;
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
    let losses = valid_losses(dir)?;
    let epoch = losses
        .iter()
        .filter(|(_, loss)| loss.is_finite())
        .min_by(|a, b| a.1.total_cmp(&b.1))
        .map(|&(epoch, _)| epoch)
        .ok_or_else(|| TrainError::Logs {
            dir: dir.to_path_buf(),
            reason: "no finite validation loss was logged".into(),
        })?;
    let last = losses.iter().map(|&(e, _)| e).max().unwrap_or(epoch);
    let checkpoints = dir.join(CHECKPOINT_DIR);
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

/// `(epoch, mean validation loss)` of every epoch in the metric logs of `dir`.
pub fn valid_losses(dir: &Path) -> Result<Vec<(usize, f64)>, TrainError> {
    let summary = LearnerSummary::new(dir, &["Loss"]).map_err(|reason| TrainError::Logs {
        dir: dir.to_path_buf(),
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

/// Loads the record at `path` into `model`, refusing one whose parameters have other shapes
/// (Burn would take them silently and build another network).
pub(crate) fn load_record<B: Backend, M: Module<B>>(
    path: &Path,
    model: M,
    device: &B::Device,
) -> Result<M, TrainError> {
    let load_err = |reason: String| TrainError::Load {
        path: path.to_path_buf(),
        reason,
    };
    if !path.is_file() {
        return Err(load_err("no such file".into()));
    }
    let expected = ParamShapes::of(&model);
    let loaded = model
        .load_file(path.to_path_buf(), &ModelRecorder::new(), device)
        .map_err(|e| load_err(e.to_string()))?;
    let found = ParamShapes::of(&loaded);
    if let Some(((name, want), (_, got))) = expected
        .0
        .iter()
        .zip(&found.0)
        .find(|(want, got)| want != got)
    {
        return Err(load_err(format!(
            "it holds another network: `{name}` is {got:?} there, {want:?} in this config"
        )));
    }
    if expected.0.len() != found.0.len() {
        return Err(load_err(format!(
            "it holds another network: {} parameters there, {} in this config",
            found.0.len(),
            expected.0.len()
        )));
    }
    Ok(loaded)
}

/// Each float parameter of a module as (path, shape), in visiting order.
struct ParamShapes(Vec<(String, Vec<usize>)>);

impl ParamShapes {
    fn of<B: Backend, M: Module<B>>(module: &M) -> Self {
        let mut collector = ShapeCollector {
            path: Vec::new(),
            shapes: Vec::new(),
        };
        module.visit(&mut collector);
        ParamShapes(collector.shapes)
    }
}

struct ShapeCollector {
    path: Vec<String>,
    shapes: Vec<(String, Vec<usize>)>,
}

impl<B: Backend> ModuleVisitor<B> for ShapeCollector {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.path.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.path.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<B, D>>) {
        let path = self.path.iter().filter(|p| !p.is_empty()).cloned();
        self.shapes.push((
            path.collect::<Vec<_>>().join("."),
            param.val().dims().to_vec(),
        ));
    }
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
