#!/usr/bin/env python3
"""Rebuild a network that `cubenet export` wrote, in PyTorch, and load its weights.

    cubenet export --model-dir artifacts/mnist_cnn           # writes export/model.{safetensors,json}
    python3 examples/load_in_pytorch.py artifacts/mnist_cnn/export/model.json

The sidecar (`model.json`) lists the layers of an `nn.Sequential` by their `torch.nn` class
and keyword arguments (a residual block as a `Residual` with the layers of its `body` and
`shortcut`); the weights file names each tensor as that Sequential's `state_dict()` does
(`0.weight`, `7.running_var`, `3.body.1.weight`). With `--inputs X --outputs Y` the network
runs on preprocessed inputs (raw little-endian float32, the sidecar's `input` shape per
item) and writes its outputs the same way. With `--fresh SEED --save W` it writes the
weights of a freshly initialized PyTorch network of that shape instead (safetensors, or a
PyTorch state dict when W ends in .pt), for `cubenet train --init-from W`.

Needs only PyTorch; the `safetensors` package is used when installed.
"""

import argparse
import json
import struct
from pathlib import Path

import torch
from torch import nn


class SigmoidGain(nn.Module):
    """σ(gain·x), an activation cubenet has and torch.nn lacks."""

    def __init__(self, gain):
        super().__init__()
        self.gain = gain

    def forward(self, x):
        return torch.sigmoid(self.gain * x)


class ScaledSigmoid(nn.Module):
    """2σ(x) − 1."""

    def forward(self, x):
        return 2 * torch.sigmoid(x) - 1


class Residual(nn.Module):
    """body(x) + shortcut(x); an empty shortcut is the identity."""

    def __init__(self, body, shortcut):
        super().__init__()
        self.body = sequential(body)
        self.shortcut = sequential(shortcut)

    def forward(self, x):
        return self.body(x) + self.shortcut(x)


class SubsamplePad(nn.Module):
    """ResNet's option-A shortcut: every stride-th pixel, zero channels before and after."""

    def __init__(self, stride, before, after):
        super().__init__()
        self.stride, self.before, self.after = stride, before, after

    def forward(self, x):
        x = x[:, :, :: self.stride, :: self.stride]
        return nn.functional.pad(x, (0, 0, 0, 0, self.before, self.after))


CUSTOM = {
    "SigmoidGain": SigmoidGain,
    "ScaledSigmoid": ScaledSigmoid,
    "Residual": Residual,
    "SubsamplePad": SubsamplePad,
}


def sequential(specs):
    """The nn.Sequential of a list of layer descriptions."""
    layers = []
    for spec in specs:
        spec = dict(spec)
        kind = spec.pop("layer")
        layer = CUSTOM.get(kind) or getattr(nn, kind, None)
        if layer is None:
            raise SystemExit(f"{kind}: not a torch.nn layer this script knows")
        layers.append(layer(**spec))
    return nn.Sequential(*layers)


def build(sidecar):
    """The network the sidecar describes."""
    return sequential(sidecar["layers"])


DTYPES = {"F32": torch.float32, "F64": torch.float64, "I64": torch.int64}


def read_safetensors(path):
    """{name: tensor} of a safetensors file: an 8-byte header length, a JSON header, data."""
    try:
        from safetensors.torch import load_file

        return load_file(str(path))
    except ImportError:
        pass
    data = Path(path).read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    body = bytearray(data[8 + length :])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        flat = torch.frombuffer(body[start:end], dtype=DTYPES[info["dtype"]]) if end > start else torch.empty(0)
        tensors[name] = flat.reshape(info["shape"]).clone()
    return tensors


def write_safetensors(tensors, path):
    """Writes {name: float32 tensor} as safetensors."""
    header, chunks, offset = {}, [], 0
    for name, tensor in tensors.items():
        raw = tensor.detach().to(torch.float32).contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensor.shape), "data_offsets": [offset, offset + len(raw)]}
        chunks.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    Path(path).write_bytes(struct.pack("<Q", len(text)) + text + b"".join(chunks))


def load(sidecar_path):
    """The exported network, weights loaded, in evaluation mode."""
    sidecar = json.loads(Path(sidecar_path).read_text())
    model = build(sidecar)
    weights = read_safetensors(Path(sidecar_path).parent / sidecar["weights"])
    missing, unexpected = model.load_state_dict(weights, strict=False)
    # cubenet's batch norm does not count batches; PyTorch's count only matters in training.
    missing = [key for key in missing if not key.endswith("num_batches_tracked")]
    if missing or unexpected:
        raise SystemExit(f"weights do not fit the network: missing {missing}, unexpected {unexpected}")
    return sidecar, model.eval()


def run(model, sidecar, inputs, outputs):
    """Runs the network on raw float32 inputs and writes its outputs as raw float32."""
    x = torch.frombuffer(bytearray(Path(inputs).read_bytes()), dtype=torch.float32)
    x = x.reshape(-1, *sidecar["input"])
    with torch.no_grad():
        y = model(x)
    Path(outputs).write_bytes(y.to(torch.float32).contiguous().numpy().tobytes())


def fresh(sidecar, seed):
    """A PyTorch-initialized network of the sidecar's shape, batch norm statistics included."""
    torch.manual_seed(seed)
    model = build(sidecar)
    for layer in model.modules():
        if isinstance(layer, (nn.BatchNorm1d, nn.BatchNorm2d)):
            layer.running_mean.uniform_(-0.5, 0.5)
            layer.running_var.uniform_(0.5, 2.0)
            if layer.affine:
                layer.weight.data.uniform_(0.5, 1.5)
                layer.bias.data.uniform_(-0.5, 0.5)
    return model.eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("sidecar", help="the .json that `cubenet export` wrote beside the weights")
    parser.add_argument("--inputs", help="preprocessed inputs, raw float32")
    parser.add_argument("--outputs", help="where the outputs go, raw float32")
    parser.add_argument("--fresh", type=int, metavar="SEED", help="initialize in PyTorch instead of loading")
    parser.add_argument("--save", help="with --fresh: write the weights here (.safetensors or .pt)")
    args = parser.parse_args()

    if args.fresh is None:
        sidecar, model = load(args.sidecar)
    else:
        sidecar = json.loads(Path(args.sidecar).read_text())
        model = fresh(sidecar, args.fresh)
        if args.save:
            state = model.state_dict()
            if args.save.endswith((".pt", ".pth")):
                torch.save(state, args.save)
            else:
                write_safetensors({k: v for k, v in state.items() if v.is_floating_point()}, args.save)
    if args.inputs:
        run(model, sidecar, args.inputs, args.outputs)
    else:
        print(model)
        print(f"input {sidecar['input']}, outputs: {sidecar['outputs']}, classes: {sidecar['classes']}")


if __name__ == "__main__":
    main()
