//! An export as an ONNX graph: the safetensors export's weights by name, and the graph's
//! input and output as the sidecar's preprocessing and the run's task make them.

use std::collections::HashMap;

use safetensors::{Dtype, SafeTensors};

use super::onnx_graph::{
    GraphInput, GraphOutput, Normalize, OnnxError, Squash, Weight, onnx_model,
};
use super::sidecar::{ExportSidecar, ExportedRun, ONNX_EXPORT_FORMAT, OnnxSidecar, Preprocessing};
use crate::model::{Sequential, Task, TorchLayer};

/// The tensors of safetensors `bytes` by name, as the ONNX graph takes them.
pub(super) fn onnx_weights(bytes: &[u8]) -> Result<HashMap<String, Weight>, String> {
    let tensors = SafeTensors::deserialize(bytes).map_err(|e| e.to_string())?;
    tensors
        .tensors()
        .into_iter()
        .map(|(name, view)| match view.dtype() {
            Dtype::F32 => Ok((
                name,
                Weight {
                    dims: view.shape().to_vec(),
                    bytes: view.data().to_vec(),
                },
            )),
            other => Err(format!("its tensor `{name}` is {other:?}, not f32")),
        })
        .collect()
}

/// The ONNX model of the network `sidecar` describes, with `weights`, and its sidecar (but
/// the model's checksum).
pub(super) fn onnx_export(
    sidecar: &ExportSidecar,
    sequential: &Sequential,
    weights: &HashMap<String, Weight>,
    with_preprocessing: bool,
) -> Result<(Vec<u8>, OnnxSidecar), OnnxError> {
    let width = sequential
        .layers
        .iter()
        .rev()
        .find_map(|layer| match layer {
            TorchLayer::Linear { out_features, .. } => Some(*out_features),
            _ => None,
        })
        .unwrap_or_else(|| sidecar.input.iter().product());
    let task = match &sidecar.cubenet {
        ExportedRun::Image(_) => Task::Multiclass,
        ExportedRun::Tabular(config) => config.task,
    };
    let (output, outputs, squash) = match (task, with_preprocessing) {
        (Task::Regression, _) => ("values", "values", Squash::None),
        (Task::Binary, true) => ("probability", "probability of class 1", Squash::Sigmoid),
        (Task::Binary, false) => ("logit", "logit of class 1", Squash::None),
        (Task::Multiclass, true) => ("probabilities", "class probabilities", Squash::Softmax),
        (Task::Multiclass, false) => ("logits", "logits", Squash::None),
    };
    let normalize = match &sidecar.preprocessing {
        _ if !with_preprocessing => None,
        Preprocessing::Images { scale, mean, std } => Some(Normalize {
            scale: *scale,
            mean: mean.clone(),
            std: std.clone(),
            dims: vec![mean.len(), 1, 1],
        }),
        Preprocessing::Table { standardize, .. } => standardize.as_ref().map(|s| Normalize {
            scale: 1.0,
            mean: s.mean.clone(),
            std: s.std.clone(),
            dims: vec![s.mean.len()],
        }),
    };
    let input = match (&sidecar.preprocessing, with_preprocessing) {
        (_, false) => "input",
        (Preprocessing::Images { .. }, true) => "pixels",
        (Preprocessing::Table { .. }, true) => "features",
    };
    let graph_input = GraphInput {
        name: input.into(),
        sample: sidecar.input.clone(),
        normalize,
    };
    let graph_output = GraphOutput {
        name: output.into(),
        width,
        squash,
    };
    let classes = serde_json::to_string(&sidecar.classes).expect("serializes");
    let metadata = vec![
        ("classes".to_string(), classes),
        ("outputs".into(), outputs.into()),
    ];
    let model = onnx_model(sequential, weights, &graph_input, &graph_output, metadata)?;
    let onnx_sidecar = OnnxSidecar {
        format: ONNX_EXPORT_FORMAT.into(),
        model: sidecar.weights.clone(),
        model_sha256: String::new(),
        input: input.into(),
        input_shape: sidecar.input.clone(),
        output: output.into(),
        outputs: outputs.into(),
        preprocessing_included: with_preprocessing,
        preprocessing: sidecar.preprocessing.clone(),
        classes: sidecar.classes.clone(),
    };
    Ok((model, onnx_sidecar))
}
