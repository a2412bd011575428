//! Weights under PyTorch's names: the renaming between cubenet's tensor paths and an
//! `nn.Sequential`'s, and a run's `init_from` (an export's safetensors, or a PyTorch `.pt`
//! state dict) read into a new network. burn-store reads and writes the files; this module
//! only names the tensors.

use std::path::Path;

use burn::prelude::*;
use burn_store::{
    ApplyError, ApplyResult, KeyRemapper, ModuleSnapshot, ModuleStore, PytorchStore,
    SafetensorsStore,
};

use crate::model::{Sequential, TorchLayer, TorchWeights};
use crate::train::TrainError;

/// Which way [`names`] renames.
#[derive(Clone, Copy)]
pub(crate) enum Direction {
    ToPyTorch,
    FromPyTorch,
}

/// Renames cubenet's tensor paths (`features.0.conv.weight`, `head.2.gamma`) to the
/// `nn.Sequential`'s (`0.weight`, `8.weight`), or back: the module path becomes the layer's
/// index, and batch norm's `gamma` and `beta` become PyTorch's `weight` and `bias`. Every
/// pattern is anchored and ends at a dot or the end, so `head.1` never renames `head.10`,
/// and a renamed path matches no later pattern.
pub(crate) fn names(sequential: &Sequential, direction: Direction) -> KeyRemapper {
    let escape = |path: &str| path.replace('.', "\\.");
    let mut patterns = Vec::new();
    for TorchWeights { module, torch } in &sequential.weights {
        let renamed: &[(&str, &str)] = match sequential.layer_at(torch) {
            Some(TorchLayer::BatchNorm1d { .. } | TorchLayer::BatchNorm2d { .. }) => {
                &[("gamma", "weight"), ("beta", "bias")]
            }
            _ => &[],
        };
        for (burn, pytorch) in renamed {
            patterns.push(match direction {
                Direction::ToPyTorch => (
                    format!("^{}\\.{burn}$", escape(module)),
                    format!("{torch}.{pytorch}"),
                ),
                Direction::FromPyTorch => (
                    format!("^{}\\.{pytorch}$", escape(torch)),
                    format!("{module}.{burn}"),
                ),
            });
        }
        patterns.push(match direction {
            Direction::ToPyTorch => (format!("^{}\\.", escape(module)), format!("{torch}.")),
            Direction::FromPyTorch => (format!("^{}\\.", escape(torch)), format!("{module}.")),
        });
    }
    KeyRemapper::from_pattern_iter(patterns).expect("escaped paths are valid patterns")
}

/// `model` with the weights of `path`: safetensors, or a PyTorch state dict (`.pt`,
/// `.pth`), named as the `nn.Sequential` of `sequential` names them. Every tensor's shape is
/// checked; the first that is missing, misshapen or has no place in the network is named.
pub fn read_weights<B: Backend, M: Module<B>>(
    mut model: M,
    sequential: &Sequential,
    path: &Path,
) -> Result<M, TrainError> {
    let load = |reason: String| TrainError::Load {
        path: path.to_path_buf(),
        reason,
    };
    if path.is_dir() {
        return Err(load(
            "it is a folder; name the weights file in it: an export's `.safetensors` (what \
             `cubenet export` writes) or a PyTorch `.pt`"
                .into(),
        ));
    }
    if !path.is_file() {
        return Err(load("no such file".into()));
    }
    let remap = names(sequential, Direction::FromPyTorch);
    let pytorch = path
        .extension()
        .is_some_and(|ext| ext == "pt" || ext == "pth");
    let result = if pytorch {
        let mut store = PytorchStore::from_file(path)
            .map_indices_contiguous(false)
            .validate(false)
            .allow_partial(true)
            .remap(remap);
        apply(&mut model, &mut store)
    } else {
        let mut store = SafetensorsStore::from_file(path)
            .skip_enum_variants(true)
            .map_indices_contiguous(false)
            .validate(false)
            .allow_partial(true)
            .remap(remap);
        apply(&mut model, &mut store)
    };
    check_applied(&result.map_err(load)?, sequential).map_err(load)?;
    check_finite(&model, sequential).map_err(load)?;
    Ok(model)
}

/// Refuses weights with a NaN or an infinity, naming the first tensor that holds one by its
/// PyTorch name: training from them would only spread them.
fn check_finite<B: Backend, M: Module<B>>(
    model: &M,
    sequential: &Sequential,
) -> Result<(), String> {
    for snapshot in model.collect(None, None, true) {
        let Ok(data) = snapshot.to_data() else {
            continue;
        };
        if !data.dtype.is_float() {
            continue;
        }
        let values = data.convert::<f32>();
        let Ok(values) = values.as_slice::<f32>() else {
            continue;
        };
        let bad = values.iter().filter(|v| !v.is_finite()).count();
        if bad > 0 {
            let name = pytorch_name(sequential, &snapshot.full_path());
            return Err(format!(
                "`{name}` holds {bad} NaN or infinite values; cubenet starts only from finite \
                 weights"
            ));
        }
    }
    Ok(())
}

fn apply<B: Backend, M: Module<B>, S: ModuleStore>(
    model: &mut M,
    store: &mut S,
) -> Result<ApplyResult, String> {
    model.load_from(store).map_err(|e| e.to_string())
}

/// The first problem of a load, in layer order, as one line naming the tensor by its
/// PyTorch name and its layer.
fn check_applied(result: &ApplyResult, sequential: &Sequential) -> Result<(), String> {
    // Sorted by layer, then in the order PyTorch lists a layer's tensors.
    const TENSORS: [&str; 4] = ["weight", "bias", "running_mean", "running_var"];
    let mut problems: Vec<((usize, usize), String)> = Vec::new();
    let mut note = |path: &str, problem: String| {
        let key = pytorch_name(sequential, path);
        let (index, layer) = match sequential.layer_of(&key) {
            Some((index, layer)) => (index, format!(" (layer {index}, {})", layer_kind(layer))),
            None => (usize::MAX, String::new()),
        };
        let leaf = key.rsplit('.').next().unwrap_or_default();
        let tensor = TENSORS.iter().position(|&name| name == leaf);
        let order = (index, tensor.unwrap_or(TENSORS.len()));
        problems.push((order, format!("`{key}`{layer} {problem}")));
    };
    for error in &result.errors {
        match error {
            ApplyError::ShapeMismatch {
                path,
                expected,
                found,
            } => note(
                path,
                format!(
                    "is {:?} in the file, the network's is {:?}",
                    found.as_slice(),
                    expected.as_slice()
                ),
            ),
            ApplyError::DTypeMismatch { path, found, .. } => note(
                path,
                format!("is {found:?} in the file; cubenet reads float weights"),
            ),
            ApplyError::AdapterError { path, message }
            | ApplyError::LoadError { path, message } => {
                note(path, format!("cannot be read: {message}"))
            }
        }
    }
    for (path, _) in &result.missing {
        note(path, "is missing from the file".into());
    }
    // PyTorch's batch norm counts its batches; the network has no use for the count.
    for path in result
        .unused
        .iter()
        .filter(|path| !path.ends_with(".num_batches_tracked"))
    {
        note(
            path,
            "is in the file, but the network has no such tensor".into(),
        );
    }
    match problems.into_iter().min_by_key(|(order, _)| *order) {
        Some((_, problem)) => Err(problem),
        None => Ok(()),
    }
}

/// A tensor's PyTorch name, from its path in cubenet's network (or as the file named it).
fn pytorch_name(sequential: &Sequential, path: &str) -> String {
    for TorchWeights { module, torch } in &sequential.weights {
        if let Some(rest) = path
            .strip_prefix(module.as_str())
            .and_then(|p| p.strip_prefix('.'))
        {
            let rest = match rest {
                "gamma" => "weight",
                "beta" => "bias",
                other => other,
            };
            return format!("{torch}.{rest}");
        }
    }
    path.to_string()
}

/// The PyTorch class of a layer, for messages.
fn layer_kind(layer: &TorchLayer) -> String {
    serde_json::to_value(layer)
        .ok()
        .and_then(|value| value["layer"].as_str().map(str::to_string))
        .unwrap_or_default()
}
