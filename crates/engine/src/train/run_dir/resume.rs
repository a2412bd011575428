//! Starting a run in its artifact directory: fresh (what earlier runs wrote there cleared), or
//! resumed from the newest epoch whose model, optimizer and scheduler checkpoints all load.
//! The run's settings and the identity of its data are saved next to the checkpoints so that
//! a resume with different settings or other data is refused instead of silently mixing two
//! runs.

use std::fs;
use std::path::Path;

use serde::Serialize;
use serde_json::Value;

use burn::lr_scheduler::LrScheduler;
use burn::module::AutodiffModule;
use burn::optim::Optimizer;
use burn::tensor::backend::AutodiffBackend;

use super::RunDir;
use super::checkpoints::Checkpoints;
use super::data_identity::DataIdentity;
use super::recorder::RecordError;
use crate::atomic_file::write_atomically;
use crate::train::TrainError;

/// Settings that may change between a run and its resume: how long it trains, the step
/// size (lowering the learning rate is the usual answer to a diverged run), and where
/// batches are assembled (which does not change them).
const MAY_CHANGE: [&str; 5] = [
    "epochs",
    "patience",
    "learning_rate",
    "workers",
    "device_data_mb",
];

/// The key of the run's settings file under which the data's identity is kept.
const DATA_KEY: &str = "data";

/// What the run's settings file holds: the job's settings and, under [`DATA_KEY`], its data.
#[derive(Serialize)]
struct SavedSettings<'a, T> {
    #[serde(flatten)]
    settings: &'a T,
    data: &'a DataIdentity,
}

/// Prepares `dir` for a run with `settings` on `data` and returns the epoch training
/// continues after: `None` for a fresh start (also when `resume` finds no complete
/// checkpoint), `Some(k)` when resuming after epoch `k`, the newest epoch whose checkpoint
/// loads into `model` (and whose optimizer and scheduler records load as `O`'s and `S`'s)
/// (a damaged newer one is reported and set aside). Either way, what later epochs or an
/// earlier run left in the checkpoint and metric-log folders is cleared, file by file.
pub(crate) fn begin_run<B, M, O, S, T>(
    run_dir: &RunDir,
    settings: &T,
    data: &DataIdentity,
    resume: bool,
    model: &M,
    device: &B::Device,
) -> Result<Option<usize>, TrainError>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: Optimizer<M, B>,
    S: LrScheduler,
    T: Serialize,
{
    let dir = run_dir.root();
    let saved = SavedSettings { settings, data };
    let settings_json = serde_json::to_string_pretty(&saved).expect("settings serialize to JSON");
    let settings = serde_json::to_value(settings).expect("settings serialize to JSON");
    let checkpoints = run_dir.checkpoints();
    let resume_after = match resume {
        true => resume_point::<B, M, O, S>(dir, &settings, data, &checkpoints, model, device)?,
        false => None,
    };
    let keep = resume_after.unwrap_or(0);
    // Later epochs' checkpoints are incomplete or damaged, their metric logs belong to the
    // lost work; a fresh run keeps none of either.
    checkpoints.discard_after(keep)?;
    for split_dir in run_dir.metric_log_dirs() {
        discard_logs_after(&split_dir, keep)?;
    }
    fs::create_dir_all(checkpoints.dir()).map_err(TrainError::io(checkpoints.dir()))?;
    write_atomically(&checkpoints.run_settings(), settings_json.as_bytes())?;
    Ok(resume_after)
}

/// Where `--resume` continues: the newest complete checkpoint that loads, announced on
/// stdout, passing over damaged newer ones; an error when the saved settings or data differ,
/// a checkpoint holds another network or has no checksum, or every complete checkpoint is
/// damaged.
fn resume_point<B, M, O, S>(
    dir: &Path,
    settings: &Value,
    data: &DataIdentity,
    checkpoints: &Checkpoints,
    model: &M,
    device: &B::Device,
) -> Result<Option<usize>, TrainError>
where
    B: AutodiffBackend,
    M: AutodiffModule<B>,
    O: Optimizer<M, B>,
    S: LrScheduler,
{
    let complete = checkpoints.complete_epochs()?;
    if complete.is_empty() {
        println!(
            "no complete checkpoint in {}; starting from epoch 1",
            dir.display()
        );
        return Ok(None);
    }
    let saved_path = checkpoints.run_settings();
    let mut saved: Value = fs::read_to_string(&saved_path)
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .ok_or_else(|| TrainError::Resume {
            dir: dir.to_path_buf(),
            reason: format!("{} is missing or unreadable", saved_path.display()),
        })?;
    let saved_data = saved.as_object_mut().and_then(|map| map.remove(DATA_KEY));
    let changed = differences(&saved, settings, "");
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
    check_data(dir, saved_data, data)?;
    let mut newest_damage = None;
    for &epoch in complete.iter().rev() {
        match checkpoints.check_epoch::<B, M, O, S>(epoch, model, device) {
            Ok(()) => {
                if let Some(damage) = &newest_damage {
                    println!("{damage}; the newest whole checkpoint is epoch {epoch}");
                }
                println!(
                    "resuming after epoch {epoch} (checkpoints in {})",
                    dir.display()
                );
                return Ok(Some(epoch));
            }
            // A checkpoint is cubenet's own: whole MessagePack of the wrong shape is damage too.
            Err(
                damage @ TrainError::Unreadable {
                    source: RecordError::Damaged(_) | RecordError::OtherKind(_),
                    ..
                },
            ) => {
                newest_damage.get_or_insert(damage);
            }
            Err(other) => return Err(other),
        }
    }
    Err(newest_damage.expect("every complete epoch was checked"))
}

/// Refuses a resume on other data than the checkpoints' (`saved`, the identity kept with their
/// settings), and reports data that moved but is the same.
fn check_data(dir: &Path, saved: Option<Value>, data: &DataIdentity) -> Result<(), TrainError> {
    let refuse = |reason: String| TrainError::Resume {
        dir: dir.to_path_buf(),
        reason,
    };
    let saved: DataIdentity = saved
        .and_then(|value| serde_json::from_value(value).ok())
        .ok_or_else(|| {
            refuse(
                "its settings do not say which data its checkpoints were trained on (an earlier \
                 cubenet wrote them) — start a fresh run in another directory instead"
                    .into(),
            )
        })?;
    let differences = saved.differences(data);
    if !differences.is_empty() {
        return Err(refuse(format!(
            "its checkpoints were trained on other data: {} — point the run at the data they \
             were trained on, or start a fresh run in another directory",
            differences.join("; ")
        )));
    }
    for (then, now) in saved.moved(data) {
        println!(
            "the data moved from {} to {}; its files are the same",
            then.display(),
            now.display()
        );
    }
    Ok(())
}

/// Deletes the `epoch-<k>` folders with `k > epoch` from the metric-log folder `split_dir`,
/// and the folder itself if that leaves it empty.
fn discard_logs_after(split_dir: &Path, epoch: usize) -> Result<(), TrainError> {
    let Ok(entries) = fs::read_dir(split_dir) else {
        return Ok(());
    };
    for entry in entries {
        let path = entry.map_err(TrainError::read(split_dir))?.path();
        let logged_epoch = path
            .file_name()
            .and_then(|n| n.to_str())
            .and_then(RunDir::logged_epoch);
        if logged_epoch.is_some_and(|e| e > epoch) {
            fs::remove_dir_all(&path).map_err(TrainError::io(&path))?;
        }
    }
    // Not empty: it also holds epochs kept for the resume.
    let _ = fs::remove_dir(split_dir);
    Ok(())
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

    #[test]
    fn only_later_epochs_logs_are_discarded() {
        let dir = tempfile::tempdir().unwrap();
        let train = dir.path().join("train");
        for name in ["epoch-1", "epoch-2", "epoch-3", "notes"] {
            fs::create_dir_all(train.join(name)).unwrap();
        }
        discard_logs_after(&train, 1).unwrap();
        let mut left: Vec<_> = fs::read_dir(&train)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["epoch-1", "notes"]);
        discard_logs_after(&train, 0).unwrap();
        assert!(train.join("notes").is_dir());
        fs::remove_dir(train.join("notes")).unwrap();
        discard_logs_after(&train, 0).unwrap();
        assert!(!train.exists());
    }
}
