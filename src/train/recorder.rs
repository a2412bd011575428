//! How a run's model, optimizer and scheduler records are stored: Burn's named MessagePack
//! in full precision (restoring an epoch gives back exactly its weights), each file written
//! through [`crate::atomic_file`], so that a run killed mid-write leaves only a `.partial-*`
//! file; and loading a record back, refusing one of another network.

use std::io;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::record::{
    FileRecorder, FullPrecisionSettings, NamedMpkFileRecorder, Recorder, RecorderError,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::TrainError;
use crate::atomic_file::write_atomically_with;

/// Extension of every record file (Burn's named MessagePack).
pub(super) const RECORD_EXTENSION: &str = "mpk";

/// Full-precision named MessagePack, written atomically.
#[derive(Debug, Default, Clone)]
pub struct ModelRecorder(NamedMpkFileRecorder<FullPrecisionSettings>);

impl ModelRecorder {
    pub fn new() -> Self {
        Self::default()
    }
}

impl<B: Backend> Recorder<B> for ModelRecorder {
    type Settings = FullPrecisionSettings;
    type RecordArgs = PathBuf;
    type RecordOutput = ();
    type LoadArgs = PathBuf;

    fn save_item<I: Serialize>(&self, item: I, file: PathBuf) -> Result<(), RecorderError> {
        let target = file.with_extension(RECORD_EXTENSION);
        write_atomically_with(&target, |partial| {
            Recorder::<B>::save_item(&self.0, item, partial.to_path_buf()).map_err(io::Error::other)
        })
        .map_err(|e| RecorderError::Unknown(e.to_string()))
    }

    fn load_item<I: DeserializeOwned>(&self, file: &mut PathBuf) -> Result<I, RecorderError> {
        Recorder::<B>::load_item(&self.0, file)
    }
}

impl<B: Backend> FileRecorder<B> for ModelRecorder {
    fn file_extension() -> &'static str {
        RECORD_EXTENSION
    }
}

/// Loads the record at `path` into `model`, refusing one whose parameters have other shapes
/// (Burn would take them silently and build another network).
pub(super) fn load_record<B: Backend, M: Module<B>>(
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
        .map_err(|e| {
            load_err(format!(
                "{e} (a model saved before the `simple` and `lenet` models became presets of \
                 `cnn` cannot be read: retrain it)"
            ))
        })?;
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
