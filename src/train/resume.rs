//! Starting a run in its artifact directory: fresh (earlier logs and checkpoints cleared), or
//! resumed from the newest epoch whose model, optimizer and scheduler checkpoints are all
//! complete. The run's settings are saved next to the checkpoints so that a resume with
//! different settings is refused instead of silently mixing two runs.

use std::fs;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use burn::module::Module;
use burn::prelude::Backend;

use super::TrainError;
use super::checkpoints::Checkpoints;
use crate::atomic_file::write_atomically;

/// burn-train's metric logs, one `epoch-<k>` directory per epoch in each.
const METRIC_LOG_DIRS: [&str; 2] = ["train", "valid"];
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
    let settings_json = serde_json::to_string_pretty(&settings).expect("JSON values print");
    let checkpoints = Checkpoints::of(dir);
    let resume_after = match resume {
        true => checkpoints.last_complete()?,
        false => None,
    };
    let Some(epoch) = resume_after else {
        for stale in METRIC_LOG_DIRS.iter().map(|log| dir.join(log)) {
            remove_dir(&stale)?;
        }
        remove_dir(checkpoints.dir())?;
        fs::create_dir_all(checkpoints.dir()).map_err(TrainError::io(checkpoints.dir()))?;
        write_atomically(&checkpoints.run_settings(), settings_json.as_bytes())?;
        return Ok(None);
    };

    let saved_path = checkpoints.run_settings();
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
    checkpoints.discard_after(epoch)?;
    for split_dir in METRIC_LOG_DIRS.iter().map(|log| dir.join(log)) {
        let Ok(entries) = fs::read_dir(&split_dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.map_err(TrainError::io(&split_dir))?.path();
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
    write_atomically(&saved_path, settings_json.as_bytes())?;
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
    Checkpoints::of(dir)
        .load_model(epoch, model.clone(), device)
        .map(|_| ())
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
        Err(source) if source.kind() != std::io::ErrorKind::NotFound => {
            Err(TrainError::io(path)(source))
        }
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
}
