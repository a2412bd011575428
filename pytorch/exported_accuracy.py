#!/usr/bin/env python3
"""Test accuracy of an MNIST network that `cubenet export` wrote, measured in PyTorch.

    python3 pytorch/exported_accuracy.py EXPORT.json MNIST_DIR

Loads the export with examples/load_in_pytorch.py, preprocesses the 10,000 test images as the
sidecar says and prints one line: PyTorch's version, the device and the accuracy, to set
beside `cubenet eval` on the same model.
"""

import gzip
import importlib.util
import sys
from pathlib import Path

import torch

root = Path(__file__).resolve().parent.parent
spec = importlib.util.spec_from_file_location("load_in_pytorch", root / "examples/load_in_pytorch.py")
load_in_pytorch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(load_in_pytorch)


def idx(path, header):
    """The payload of a gzipped IDX file after its `header` bytes."""
    return torch.frombuffer(bytearray(gzip.open(path).read()[header:]), dtype=torch.uint8)


sidecar, model = load_in_pytorch.load(sys.argv[1])
mnist = Path(sys.argv[2])
images = idx(mnist / "t10k-images-idx3-ubyte.gz", 16).reshape(-1, *sidecar["input"]).float()
labels = idx(mnist / "t10k-labels-idx1-ubyte.gz", 8).long()
pre = sidecar["preprocessing"]["images"]
mean = torch.tensor(pre["mean"]).reshape(1, -1, 1, 1)
std = torch.tensor(pre["std"]).reshape(1, -1, 1, 1)
x = (images * pre["scale"] - mean) / std
device = "cuda" if torch.cuda.is_available() else "cpu"
with torch.no_grad():
    predicted = model.to(device)(x.to(device)).argmax(1).cpu()
accuracy = 100 * (predicted == labels).float().mean().item()
name = torch.cuda.get_device_name() if device == "cuda" else "CPU"
print(f"PyTorch {torch.__version__} on {name}: test accuracy {accuracy:.2f}%")
