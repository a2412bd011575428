"""The suite's reference for cubenet's TensorBoard events: reads an event folder with
TensorBoard's own EventAccumulator and prints, as JSON, each scalar tag's [step, value]
pairs and the hparams of the session's start.

usage: read_tensorboard.py FOLDER
"""

import json
import sys

from tensorboard.backend.event_processing import event_accumulator
from tensorboard.plugins.hparams import plugin_data_pb2

accumulator = event_accumulator.EventAccumulator(
    sys.argv[1], size_guidance={event_accumulator.SCALARS: 0}
)
accumulator.Reload()
scalars = {
    tag: [[event.step, event.value] for event in accumulator.Scalars(tag)]
    for tag in accumulator.Tags()["scalars"]
}
hparams = {}
for content in accumulator.PluginTagToContent("hparams").values():
    start = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info
    for key, value in start.hparams.items():
        hparams[key] = getattr(value, value.WhichOneof("kind"))
print(json.dumps({"scalars": scalars, "hparams": hparams}))
