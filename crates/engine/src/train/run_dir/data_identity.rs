//! Which data a run trained on, saved with its settings so that `--resume` refuses to continue
//! a run's checkpoints on other data: every input's canonical path, a digest of the contents
//! of every file it holds, and the size of each split.
//!
//! The contents decide, not the paths: a data set moved or copied elsewhere, byte for byte
//! the same, resumes (and the move is reported); one with a file added, removed or changed
//! does not, wherever it lies. Folders count with every file below them, also those the
//! reader skips, since telling those apart is the reader's business.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::train::TrainError;

/// The data of a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataIdentity {
    /// Each file or folder the run reads, in the job's order (none for generated or
    /// downloaded data).
    pub inputs: Vec<InputIdentity>,
    /// Examples in the training, validation and test splits.
    pub split_sizes: [usize; 3],
}

/// One file or folder a run reads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputIdentity {
    /// Where it was, canonicalized.
    pub path: PathBuf,
    /// Files it holds (1 for a file).
    pub files: usize,
    /// Their bytes together.
    pub bytes: u64,
    /// SHA-256 over every file's path below the input, length and contents, in path order.
    pub sha256: String,
}

impl DataIdentity {
    /// The identity of `inputs` (files or folders) whose splits have `split_sizes` examples.
    pub fn of(inputs: &[PathBuf], split_sizes: [usize; 3]) -> Result<Self, TrainError> {
        let inputs = inputs
            .iter()
            .map(|input| InputIdentity::of(input.as_path()))
            .collect::<Result<_, _>>()?;
        Ok(Self {
            inputs,
            split_sizes,
        })
    }

    /// Why `self`, a run's data, is not the data of `now`, if it is not: one clause a
    /// difference.
    pub fn differences(&self, now: &DataIdentity) -> Vec<String> {
        let mut found = Vec::new();
        if self.inputs.len() != now.inputs.len() {
            found.push(format!(
                "it read {} data files or folders, this run reads {}",
                self.inputs.len(),
                now.inputs.len()
            ));
        }
        for (then, now) in self.inputs.iter().zip(&now.inputs) {
            if then.sha256 != now.sha256 {
                found.push(format!(
                    "{} held {} files of {} bytes then, {} holds {} files of {} bytes now{}",
                    then.path.display(),
                    then.files,
                    then.bytes,
                    now.path.display(),
                    now.files,
                    now.bytes,
                    match (then.files, then.bytes) == (now.files, now.bytes) {
                        true => " with other contents",
                        false => "",
                    }
                ));
            }
        }
        if found.is_empty() && self.split_sizes != now.split_sizes {
            let [train, valid, test] = self.split_sizes;
            let [train_now, valid_now, test_now] = now.split_sizes;
            found.push(format!(
                "its splits held {train}/{valid}/{test} (train/valid/test) examples, this \
                 run's hold {train_now}/{valid_now}/{test_now}"
            ));
        }
        found
    }

    /// The inputs whose contents are the same in `now` but lie elsewhere, as (then, now).
    pub fn moved<'a>(&'a self, now: &'a DataIdentity) -> Vec<(&'a Path, &'a Path)> {
        self.inputs
            .iter()
            .zip(&now.inputs)
            .filter(|(then, now)| then.sha256 == now.sha256 && then.path != now.path)
            .map(|(then, now)| (then.path.as_path(), now.path.as_path()))
            .collect()
    }
}

impl InputIdentity {
    fn of(input: &Path) -> Result<Self, TrainError> {
        let path = fs::canonicalize(input).map_err(TrainError::read(input))?;
        let mut files = Vec::new();
        list_files(&path, &mut files)?;
        files.sort();
        let mut digest = Sha256::new();
        let mut bytes = 0;
        for file in &files {
            let below = file.strip_prefix(&path).unwrap_or(file);
            let length = fs::metadata(file).map_err(TrainError::read(file))?.len();
            digest.update(below.to_string_lossy().as_bytes());
            digest.update([0]);
            digest.update(length.to_le_bytes());
            let mut reader = File::open(file).map_err(TrainError::read(file))?;
            io::copy(&mut reader, &mut digest).map_err(TrainError::read(file))?;
            bytes += length;
        }
        Ok(Self {
            path,
            files: files.len(),
            bytes,
            sha256: format!("{:x}", digest.finalize()),
        })
    }
}

/// Every file at or below `path`, following links.
fn list_files(path: &Path, files: &mut Vec<PathBuf>) -> Result<(), TrainError> {
    if !fs::metadata(path).map_err(TrainError::read(path))?.is_dir() {
        files.push(path.to_path_buf());
        return Ok(());
    }
    for entry in fs::read_dir(path).map_err(TrainError::read(path))? {
        list_files(&entry.map_err(TrainError::read(path))?.path(), files)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, files: &[(&str, &str)]) {
        for (name, text) in files {
            let path = dir.join(name);
            fs::create_dir_all(path.parent().unwrap()).unwrap();
            fs::write(path, text).unwrap();
        }
    }

    #[test]
    fn contents_decide_and_a_move_is_no_difference() {
        let root = tempfile::tempdir().unwrap();
        let (a, b) = (root.path().join("a"), root.path().join("b"));
        write(&a, &[("cat/1.png", "x"), ("dog/2.png", "yy")]);
        write(&b, &[("cat/1.png", "x"), ("dog/2.png", "yy")]);
        let then = DataIdentity::of(std::slice::from_ref(&a), [2, 0, 0]).unwrap();
        let moved = DataIdentity::of(std::slice::from_ref(&b), [2, 0, 0]).unwrap();
        assert!(then.differences(&moved).is_empty());
        assert_eq!(then.moved(&moved).len(), 1);

        write(&b, &[("dog/2.png", "yz")]);
        let changed = DataIdentity::of(std::slice::from_ref(&b), [2, 0, 0]).unwrap();
        let found = then.differences(&changed);
        assert!(found[0].ends_with("with other contents"), "{found:?}");
        // A file renamed into another class is other data too.
        write(&b, &[("dog/2.png", "yy")]);
        fs::rename(b.join("cat/1.png"), b.join("dog/1.png")).unwrap();
        let renamed = DataIdentity::of(std::slice::from_ref(&b), [2, 0, 0]).unwrap();
        assert_eq!(then.differences(&renamed).len(), 1);

        let resized = DataIdentity::of(std::slice::from_ref(&a), [1, 1, 0]).unwrap();
        assert!(then.differences(&resized)[0].contains("2/0/0"));
        assert!(then.differences(&DataIdentity::of(&[], [2, 0, 0]).unwrap())[0].contains("1 data"));
    }
}
