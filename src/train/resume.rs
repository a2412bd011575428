//! Starting a run in its artifact directory: fresh (earlier logs and checkpoints cleared), or
//! resumed from the newest epoch whose model, optimizer and scheduler checkpoints are all
//! complete. The run's settings are saved next to the checkpoints so that a resume with
//! different settings is refused instead of silently mixing two runs.

use std::fs;
use std::path::{Path, PathBuf};

use serde::Serialize;
use serde_json::Value;

use burn::module::Module;
use burn::prelude::Backend;

use super::TrainError;
use super::artifacts::load_record;
use super::recorder::PARTIAL_PREFIX;

/// Subdirectory of the artifact directory holding burn-train's checkpoints.
pub const CHECKPOINT_DIR: &str = "checkpoint";
/// The settings a run was started with, inside [`CHECKPOINT_DIR`].
const RUN_SETTINGS: &str = "run-settings.json";
/// Files burn-train's checkpointer writes for each epoch.
const CHECKPOINT_PARTS: [&str; 3] = ["model", "optim", "scheduler"];
/// Settings that may change between a run and its resume: how long it trains and the step
/// size (lowering the learning rate is the usual answer to a diverged run).
const MAY_CHANGE: [&str; 3] = ["epochs", "patience", "learning_rate"];

/// Prepares `dir` for a run with `settings` and returns the epoch training continues after:
/// `None` for a fresh start (also when `resume` finds no complete checkpoint), `Some(k)`
/// when resuming after epoch `k`.
pub fn begin_run<S: Serialize>(
    dir: &Path,
    settings: &S,
    resume: bool,
) -> Result<Option<usize>, TrainError> {
    let settings = serde_json::to_value(settings).expect("settings serialize to JSON");
    let checkpoints = dir.join(CHECKPOINT_DIR);
    let resume_after = match resume {
        true => last_complete_checkpoint(dir)?,
        false => None,
    };
    let Some(epoch) = resume_after else {
        for stale in ["train", "valid", CHECKPOINT_DIR] {
            remove_dir(&dir.join(stale))?;
        }
        fs::create_dir_all(&checkpoints).map_err(io_err(&checkpoints))?;
        let json = serde_json::to_string_pretty(&settings).expect("JSON values print");
        super::write_atomically(&checkpoints.join(RUN_SETTINGS), json.as_bytes())?;
        return Ok(None);
    };

    let saved_path = checkpoints.join(RUN_SETTINGS);
    let saved: Value = fs::read_to_string(&saved_path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .ok_or_else(|| TrainError::Resume {
            dir: dir.to_path_buf(),
            reason: format!("{} is missing or unreadable", saved_path.display()),
        })?;
    let changed = differences(&saved, &settings, "");
    if !changed.is_empty() {
        return Err(TrainError::Resume {
            dir: dir.to_path_buf(),
            reason: format!(
                "its checkpoints were trained with other settings ({}); only {} may change \
                 on a resume — start a fresh run in another directory instead",
                changed.join(", "),
                MAY_CHANGE.join(", ")
            ),
        });
    }
    // Later epochs' checkpoints are incomplete, their metric logs belong to the lost work.
    for entry in fs::read_dir(&checkpoints).map_err(io_err(&checkpoints))? {
        let path = entry.map_err(io_err(&checkpoints))?.path();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        let later = checkpoint_epoch(name).is_some_and(|(_, e)| e > epoch);
        if name.starts_with(PARTIAL_PREFIX) || later {
            fs::remove_file(&path).map_err(io_err(&path))?;
        }
    }
    for split in ["train", "valid"] {
        let split_dir = dir.join(split);
        let Ok(entries) = fs::read_dir(&split_dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.map_err(io_err(&split_dir))?.path();
            let logged_epoch = path
                .file_name()
                .and_then(|n| n.to_str())
                .and_then(|n| n.strip_prefix("epoch-"))
                .and_then(|e| e.parse::<usize>().ok());
            if logged_epoch.is_some_and(|e| e > epoch) {
                remove_dir(&path)?;
            }
        }
    }
    let json = serde_json::to_string_pretty(&settings).expect("JSON values print");
    super::write_atomically(&saved_path, json.as_bytes())?;
    Ok(Some(epoch))
}

/// Refuses to resume into `model` from a checkpoint of epoch `epoch` that holds another
/// network (burn-train would load it without looking).
pub fn check_checkpoint_fits<B: Backend, M: Module<B>>(
    dir: &Path,
    epoch: usize,
    model: &M,
    device: &B::Device,
) -> Result<(), TrainError> {
    let path = dir.join(CHECKPOINT_DIR).join(format!("model-{epoch}.mpk"));
    load_record(&path, model.clone(), device).map(|_| ())
}

/// The newest epoch in `dir` with all of its checkpoint files, if any.
pub fn last_complete_checkpoint(dir: &Path) -> Result<Option<usize>, TrainError> {
    let checkpoints = dir.join(CHECKPOINT_DIR);
    let Ok(entries) = fs::read_dir(&checkpoints) else {
        return Ok(None);
    };
    let mut found: Vec<(String, usize)> = Vec::new();
    for entry in entries {
        let path = entry.map_err(io_err(&checkpoints))?.path();
        if let Some((part, epoch)) = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(checkpoint_epoch)
        {
            found.push((part.to_string(), epoch));
        }
    }
    let complete = |epoch: usize| {
        CHECKPOINT_PARTS
            .iter()
            .all(|part| found.contains(&(part.to_string(), epoch)))
    };
    Ok(found
        .iter()
        .map(|&(_, epoch)| epoch)
        .filter(|&epoch| complete(epoch))
        .max())
}

/// `("model", 3)` for `model-3.mpk`.
fn checkpoint_epoch(file_name: &str) -> Option<(&str, usize)> {
    let stem = file_name.strip_suffix(".mpk")?;
    let (part, epoch) = stem.rsplit_once('-')?;
    CHECKPOINT_PARTS
        .contains(&part)
        .then_some(())
        .and(epoch.parse().ok().map(|e| (part, e)))
}

/// Paths (`optimizer.momentum`) where `old` and `new` differ, ignoring [`MAY_CHANGE`].
fn differences(old: &Value, new: &Value, path: &str) -> Vec<String> {
    match (old, new) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            keys.into_iter()
                .filter(|key| !MAY_CHANGE.contains(&key.as_str()))
                .flat_map(|key| {
                    let child = if path.is_empty() {
                        key.clone()
                    } else {
                        format!("{path}.{key}")
                    };
                    let null = Value::Null;
                    differences(
                        a.get(key).unwrap_or(&null),
                        b.get(key).unwrap_or(&null),
                        &child,
                    )
                })
                .collect()
        }
        _ if old == new => Vec::new(),
        _ => vec![path.to_string()],
    }
}

fn remove_dir(path: &Path) -> Result<(), TrainError> {
    match fs::remove_dir_all(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io_err(path)(e)),
        _ => Ok(()),
    }
}

fn io_err(path: &Path) -> impl Fn(std::io::Error) -> TrainError + '_ {
    let path: PathBuf = path.to_path_buf();
    move |source| TrainError::Io {
        path: path.clone(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn checkpoint_names() {
        assert_eq!(checkpoint_epoch("model-12.mpk"), Some(("model", 12)));
        assert_eq!(checkpoint_epoch("optim-1.mpk"), Some(("optim", 1)));
        assert_eq!(checkpoint_epoch(".partial-model-3.mpk"), None);
        assert_eq!(checkpoint_epoch("model-x.mpk"), None);
        assert_eq!(checkpoint_epoch("run-settings.json"), None);
    }

    #[test]
    fn only_fixed_settings_count_as_differences() {
        let old = json!({"epochs": 5, "optimizer": {"learning_rate": 0.1, "momentum": 0.9},
                         "hidden": [16, 8]});
        let new = json!({"epochs": 9, "optimizer": {"learning_rate": 0.01, "momentum": 0.5},
                         "hidden": [16]});
        assert_eq!(
            differences(&old, &new, ""),
            ["hidden", "optimizer.momentum"]
        );
        assert!(differences(&old, &old, "").is_empty());
    }

    #[test]
    fn last_complete_checkpoint_needs_every_part() {
        let dir = tempfile::tempdir().unwrap();
        let checkpoints = dir.path().join(CHECKPOINT_DIR);
        fs::create_dir_all(&checkpoints).unwrap();
        assert_eq!(last_complete_checkpoint(dir.path()).unwrap(), None);
        for name in ["model-1", "optim-1", "scheduler-1", "model-2", "optim-2"] {
            fs::write(checkpoints.join(format!("{name}.mpk")), b"x").unwrap();
        }
        fs::write(checkpoints.join(".partial-scheduler-2.mpk"), b"x").unwrap();
        assert_eq!(last_complete_checkpoint(dir.path()).unwrap(), Some(1));
    }
}
