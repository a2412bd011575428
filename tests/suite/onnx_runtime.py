"""The suite's reference for `cubenet export --format onnx`: checks a model with onnx's
checker (shape inference included) and runs it with ONNX Runtime.

usage: onnx_runtime.py MODEL INPUTS OUTPUTS BATCH

INPUTS holds float32 examples one after another, each of the shape the model's input
declares after its batch dimension, which must be dynamic. OUTPUTS gets the model's outputs
as float32, computed BATCH examples at a time. Prints the model's metadata as JSON.
"""

import json
import sys

import numpy as np
import onnx
import onnxruntime

model_path, inputs_path, outputs_path, batch = sys.argv[1:5]
batch = int(batch)

model = onnx.load(model_path)
onnx.checker.check_model(model, full_check=True)
(graph_input,) = model.graph.input
dims = graph_input.type.tensor_type.shape.dim
assert dims[0].dim_param, "the batch dimension is dynamic"
sample = [dim.dim_value for dim in dims[1:]]

inputs = np.fromfile(inputs_path, dtype="<f4").reshape([-1, *sample])
session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
name = session.get_inputs()[0].name
outputs = [
    session.run(None, {name: inputs[start : start + batch]})[0]
    for start in range(0, len(inputs), batch)
]
np.concatenate(outputs).astype("<f4").tofile(outputs_path)
print(json.dumps({prop.key: prop.value for prop in model.metadata_props}))
