//! How a run's model, optimizer and scheduler records are stored: Burn's named MessagePack
//! in full precision (restoring an epoch gives back exactly its weights), encoded in memory
//! and written through [`crate::atomic_file`], so that a failed or killed write leaves no
//! file but at most a `.partial-*` one (Burn's own file recorder writes through a buffer
//! whose last flush errors are lost: a full disk left a zero-byte record), each behind a
//! checksummed frame ([`super::record_frame`]); and loading a record back, telling a damaged
//! file from one of another network.

use std::fs;
use std::path::{Path, PathBuf};

use burn::module::{Module, ModuleVisitor, Param};
use burn::prelude::*;
use burn::record::{
    FileRecorder, FullPrecisionSettings, NamedMpkBytesRecorder, Record, Recorder, RecorderError,
};
use serde::Serialize;
use serde::de::{DeserializeOwned, IgnoredAny};

use super::record_frame::{FrameError, frame_record, unframe};
use crate::atomic_file::write_atomically;
use crate::quiet_panic::catch_quietly;
use crate::train::TrainError;
use crate::train::fit::watch::TrainingWatch;

/// Extension of every record file (Burn's named MessagePack).
pub(crate) const RECORD_EXTENSION: &str = "mpk";

/// Full-precision named MessagePack files, written atomically. The checkpointer's recorder
/// ([`ModelRecorder::stopping`]) does not hand a failed write back to burn-train, whose
/// checkpoint thread panics on it: it stops the run through the watch, which keeps the error.
#[derive(Default, Clone)]
pub struct ModelRecorder {
    bytes: NamedMpkBytesRecorder<FullPrecisionSettings>,
    stop_on_failure: Option<TrainingWatch>,
}

impl ModelRecorder {
    /// A recorder whose failed writes stop training through `watch`.
    pub fn stopping(watch: TrainingWatch) -> Self {
        Self {
            stop_on_failure: Some(watch),
            ..Self::default()
        }
    }
}

impl std::fmt::Debug for ModelRecorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelRecorder")
            .field("stops_on_failure", &self.stop_on_failure.is_some())
            .finish()
    }
}

impl<B: Backend> Recorder<B> for ModelRecorder {
    type Settings = FullPrecisionSettings;
    type RecordArgs = PathBuf;
    type RecordOutput = ();
    type LoadArgs = PathBuf;

    fn save_item<I: Serialize>(&self, item: I, file: PathBuf) -> Result<(), RecorderError> {
        let bytes = Recorder::<B>::save_item(&self.bytes, item, ())?;
        let written = write_atomically(
            &file.with_extension(RECORD_EXTENSION),
            &frame_record(&bytes),
        );
        match (written, &self.stop_on_failure) {
            (Err(error), Some(watch)) => {
                watch.write_failed(error);
                Ok(())
            }
            (written, _) => written.map_err(|e| RecorderError::Unknown(e.to_string())),
        }
    }

    fn load_item<I: DeserializeOwned>(&self, file: &mut PathBuf) -> Result<I, RecorderError> {
        let path = file.with_extension(RECORD_EXTENSION);
        let bytes = fs::read(&path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => RecorderError::FileNotFound(path.display().to_string()),
            _ => RecorderError::Unknown(e.to_string()),
        })?;
        let payload = unframe(&bytes).map_err(|e| {
            RecorderError::Unknown(format!("{}: {}", path.display(), RecordError::from(e)))
        })?;
        Recorder::<B>::load_item(&self.bytes, &mut payload.to_vec())
    }
}

impl<B: Backend> FileRecorder<B> for ModelRecorder {
    fn file_extension() -> &'static str {
        RECORD_EXTENSION
    }
}

/// Writes `record` to the record file at `path` as [`ModelRecorder`] does, atomically; a
/// failed write names the path and the OS's reason.
pub(crate) fn write_record<B: Backend, R: Record<B>>(
    path: &Path,
    record: R,
) -> Result<(), TrainError> {
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::default();
    let bytes = Recorder::<B>::record(&recorder, record, ()).map_err(|e| TrainError::Record {
        path: path.to_path_buf(),
        reason: e.to_string(),
    })?;
    write_atomically(path, &frame_record(&bytes))?;
    Ok(())
}

/// Why a record file's bytes give no record.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// A frame whose checksum or length does not match its bytes, or not whole
    /// MessagePack, or a tensor whose bytes do not fit its shape: a torn or
    /// overwritten file.
    #[error("the file is damaged or truncated ({0})")]
    Damaged(String),
    /// Whole, but not a record of the type asked for.
    #[error(
        "it is not a record of this kind ({0}); a model saved before the `simple` and `lenet` \
         models became presets of `cnn` cannot be read: retrain it"
    )]
    OtherKind(String),
    /// A model record whose parameters have other shapes than the network's.
    #[error("it holds another network: {0}")]
    OtherNetwork(String),
    /// A record without a checksum, written by a cubenet from before records had one.
    #[error(
        "it has no checksum, so damage to it could not be found: an earlier cubenet wrote it; \
         retrain to write a checked one"
    )]
    Unframed,
}

impl From<FrameError> for RecordError {
    fn from(error: FrameError) -> Self {
        match error {
            FrameError::Unframed => RecordError::Unframed,
            FrameError::Damaged(reason) => RecordError::Damaged(reason),
        }
    }
}

/// Loads the record of type `R` at `path` (see [`decode_record`]).
pub(crate) fn load_checked<B: Backend, R: Record<B>>(
    path: &Path,
    device: &B::Device,
) -> Result<R, TrainError> {
    let bytes = fs::read(path).map_err(TrainError::read(path))?;
    decode_record(&bytes, device).map_err(TrainError::record(path))
}

/// The record of type `R` in the bytes of a record file (its frame checked first), or why
/// there is none. A panic inside Burn's decoding (a tensor whose bytes do not fit its shape)
/// counts as damage.
pub fn decode_record<B: Backend, R: Record<B>>(
    bytes: &[u8],
    device: &B::Device,
) -> Result<R, RecordError> {
    decode_payload(unframe(bytes)?, device)
}

/// The record of type `R` in a frame's payload, Burn's named MessagePack.
fn decode_payload<B: Backend, R: Record<B>>(
    bytes: &[u8],
    device: &B::Device,
) -> Result<R, RecordError> {
    let recorder = NamedMpkBytesRecorder::<FullPrecisionSettings>::default();
    if let Err(e) = Recorder::<B>::load_item::<IgnoredAny>(&recorder, &mut bytes.to_vec()) {
        return Err(RecordError::Damaged(e.to_string()));
    }
    catch_quietly(|| Recorder::<B>::load::<R>(&recorder, bytes.to_vec(), device))
        .map_err(RecordError::Damaged)?
        .map_err(|e| {
            let reason = e.to_string();
            RecordError::OtherKind(reason.lines().next().unwrap_or_default().to_string())
        })
}

/// Loads the record at `path` into `model` (see [`decode_model_record`]).
pub(crate) fn load_record<B: Backend, M: Module<B>>(
    path: &Path,
    model: M,
    device: &B::Device,
) -> Result<M, TrainError> {
    let bytes = fs::read(path).map_err(TrainError::read(path))?;
    decode_model_record(&bytes, model, device).map_err(TrainError::record(path))
}

/// `model` with the weights of a model record file's `bytes`, refusing damaged bytes (see
/// [`decode_record`]) and a record whose parameters have other shapes (Burn would take them
/// silently and build another network).
pub fn decode_model_record<B: Backend, M: Module<B>>(
    bytes: &[u8],
    model: M,
    device: &B::Device,
) -> Result<M, RecordError> {
    let expected = ParamShapes::of(&model);
    let record = decode_record::<B, M::Record>(bytes, device)?;
    let (loaded, found) = catch_quietly(|| {
        let loaded = model.load_record(record);
        let found = ParamShapes::of(&loaded);
        (loaded, found)
    })
    .map_err(RecordError::Damaged)?;
    if let Some(((name, want), (_, got))) = expected
        .0
        .iter()
        .zip(&found.0)
        .find(|(want, got)| want != got)
    {
        return Err(RecordError::OtherNetwork(format!(
            "`{name}` is {got:?} there, {want:?} in this config"
        )));
    }
    if expected.0.len() != found.0.len() {
        return Err(RecordError::OtherNetwork(format!(
            "{} parameters there, {} in this config",
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
