//! The recorder of every model, optimizer and checkpoint file a run writes: Burn's named
//! MessagePack format in full precision (restoring an epoch gives back exactly its weights),
//! written so that a file appears whole or not at all. Each file goes to a temporary name,
//! is flushed to disk, then renamed into place; a run killed mid-write leaves only a
//! `.partial-*` file that [`super::resume`] ignores and clears.

use std::fs::File;
use std::path::PathBuf;

use burn::prelude::*;
use burn::record::{
    FileRecorder, FullPrecisionSettings, NamedMpkFileRecorder, Recorder, RecorderError,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// Prefix of a file still being written.
pub(crate) const PARTIAL_PREFIX: &str = ".partial-";

/// Full-precision named MessagePack, written atomically.
#[derive(Debug, Default, Clone)]
pub struct ModelRecorder(NamedMpkFileRecorder<FullPrecisionSettings>);

impl ModelRecorder {
    pub fn new() -> Self {
        Self::default()
    }
}

/// The path a file recorder writes for `stem` (it sets its own extension).
fn with_extension<B: Backend>(mut stem: PathBuf) -> PathBuf {
    stem.set_extension(<ModelRecorder as FileRecorder<B>>::file_extension());
    stem
}

impl<B: Backend> Recorder<B> for ModelRecorder {
    type Settings = FullPrecisionSettings;
    type RecordArgs = PathBuf;
    type RecordOutput = ();
    type LoadArgs = PathBuf;

    fn save_item<I: Serialize>(&self, item: I, file: PathBuf) -> Result<(), RecorderError> {
        let target = with_extension::<B>(file);
        let name = target
            .file_stem()
            .and_then(|s| s.to_str())
            .ok_or_else(|| RecorderError::Unknown(format!("bad file name {}", target.display())))?;
        let partial_stem = target.with_file_name(format!("{PARTIAL_PREFIX}{name}"));
        let partial = with_extension::<B>(partial_stem.clone());
        Recorder::<B>::save_item(&self.0, item, partial_stem)?;
        let io = |e: std::io::Error| RecorderError::Unknown(format!("{}: {e}", target.display()));
        File::open(&partial)
            .and_then(|f| f.sync_all())
            .map_err(io)?;
        std::fs::rename(&partial, &target).map_err(io)
    }

    fn load_item<I: DeserializeOwned>(&self, file: &mut PathBuf) -> Result<I, RecorderError> {
        Recorder::<B>::load_item(&self.0, file)
    }
}

impl<B: Backend> FileRecorder<B> for ModelRecorder {
    fn file_extension() -> &'static str {
        <NamedMpkFileRecorder<FullPrecisionSettings> as FileRecorder<B>>::file_extension()
    }
}
