#!/usr/bin/env python3
"""PyTorch reference for cubenet's backend benchmark (`cubenet bench`).

Times the same training step as the Rust tool (forward, softmax cross-entropy,
backward, plain SGD update at lr 0.1) on the same models and sweeps, with the
same timing protocol, and writes the same JSON schema, so the Rust side can
merge both into one table.

* models: `simple` (the single-conv CNN with d filters), `lenet`, `mlp` (on 1x28x28
  images) and `cifar` (the CIFAR-shaped CNN on 3x32x32 images); all fp32;
* variants: `pytorch-eager` (cuDNN autotuning on) and `pytorch-compile`
  (`torch.compile`, default mode; skipped with a warning where it cannot run), both
  with TF32 disabled; `pytorch-eager-tf32` and `pytorch-compile-tf32` (`--variants
  eager-tf32,compile-tf32`) allow TF32 in cuDNN and cuBLAS, beside cubenet's
  `cuda-cubenet-tf32`; `pytorch-eager-bf16` and `pytorch-compile-bf16` (`--variants
  eager-bf16,compile-bf16`) are PyTorch's fastest setting for convolutions: bf16 autocast
  (bf16 operands, fp32 accumulation, the loss in fp32) with channels_last models and
  inputs, TF32 for what autocast leaves in fp32, beside cubenet's `cuda-cubenet-bf16`;
  with `--device cpu`, eager on the CPU as `pytorch-cpu` on `--threads` threads
  (default: every core this process may use), beside cubenet's `ndarray` variants;
* each point: random data resident on the device, `--warmup` untimed steps, then
  `--repeats` steps each closed by `torch.cuda.synchronize()` (on the GPU); median
  (sorted[runs // 2]), min and max in milliseconds;
* optionally (`--data-dir` with the MNIST IDX files) one timed epoch over the
  60,000 training images per MNIST-shaped model and variant, then the test accuracy;
* with `--blocks`, instead of whole steps: each conv·ReLU·pool block of the CIFAR-shaped
  network, forward + backward from a random pooled gradient (weight, bias and, past the
  first block, input gradients), at each of `--batches`: the per-layer numbers beside
  `cargo run --release --example kernel_bench --features cuda -- --cifar`. Its JSON has
  "blocks" entries in place of "steps";
* with `--profile STEPS`, after timing each step point: that many more steps under
  `torch.profiler`, their GPU kernels printed (stderr) by time per step, the longest first.

Run on a CUDA machine with PyTorch 2.x (no network needed):

    python3 pytorch/pytorch_reference.py --out pytorch.json
    python3 pytorch/pytorch_reference.py --models simple --variants eager \\
        --data-dir .device-bin/mnist --out pytorch-simple.json
    python3 pytorch/pytorch_reference.py --device cpu --threads 2 --out pytorch-cpu.json
    python3 pytorch/pytorch_reference.py --blocks --batches 128,512 --out pytorch-blocks.json
    python3 pytorch/pytorch_reference.py --models cifar,lenet --batches 512,1000 \
        --variants eager-tf32,eager-bf16,compile-bf16 --out pytorch-fastest.json

Progress goes to stderr, a markdown table of the step medians to stdout.
"""

import argparse
import gzip
import json
import math
import os
import shlex
import sys
import time
import zlib
from datetime import datetime, timezone
from pathlib import Path

import torch
from torch import nn

MODELS = ("simple", "lenet", "mlp", "cifar")
VARIANTS = {"eager": "pytorch-eager", "compile": "pytorch-compile",
            "eager-tf32": "pytorch-eager-tf32", "compile-tf32": "pytorch-compile-tf32",
            "eager-bf16": "pytorch-eager-bf16", "compile-bf16": "pytorch-compile-bf16"}
COMPILED = ("pytorch-compile", "pytorch-compile-tf32", "pytorch-compile-bf16")
BF16 = ("pytorch-eager-bf16", "pytorch-compile-bf16")
CPU_VARIANT = "pytorch-cpu"  # eager on the CPU; torch.compile is benchmarked on the GPU only
LEARNING_RATE = 0.1
PIXEL_MEAN, PIXEL_STD = 0.1307, 0.3081  # the Rust batcher's normalization
IMAGES_MAGIC, LABELS_MAGIC = 2051, 2049
EVAL_CHUNK = 1000


class DataError(Exception):
    """A missing or malformed MNIST file; reported as one line, exit code 2."""


def int_at_least(minimum):
    """argparse type: an integer >= minimum."""
    def parse(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"expected an integer >= {minimum}, got {value}")
        return value
    return parse


def int_list(text):
    """argparse type: comma-separated positive integers, duplicates dropped."""
    return list(dict.fromkeys(int_at_least(1)(part) for part in text.split(",")))


def name_list(choices):
    """argparse type: comma-separated names out of `choices`, duplicates dropped."""
    def parse(text):
        names = list(dict.fromkeys(text.split(",")))
        unknown = [name for name in names if name not in choices]
        if unknown:
            raise argparse.ArgumentTypeError(
                f"unknown {','.join(unknown)}; choose from {','.join(choices)}")
        return names
    return parse


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--models", type=name_list(MODELS), default="simple,lenet,mlp")
    add("--batches", type=int_list, default="100,250,500,1000",
        help="batch sizes swept for every model (simple: at --sweep-batches-at-filters)")
    add("--filters", type=int_list, default="32,64,128,256",
        help="filter counts d swept for simple (at --sweep-filters-at-batch)")
    add("--sweep-filters-at-batch", type=int_at_least(1), default=1000)
    add("--sweep-batches-at-filters", type=int_at_least(1), default=256)
    add("--variants", type=name_list(tuple(VARIANTS)),
        help="[default: eager and compile on the GPU, eager on the CPU]")
    add("--warmup", type=int_at_least(0), default=10, help="untimed steps before timing")
    add("--repeats", type=int_at_least(1), default=30, help="timed steps per point")
    add("--out", default="results.json", help="JSON output, written atomically")
    add("--data-dir", type=Path, help="MNIST IDX files (raw or .gz) for the full-epoch run")
    add("--epoch-batch", type=int_at_least(1), default=1000)
    add("--epoch-filters", type=int_at_least(1), default=256, help="d of simple in the epoch run")
    add("--no-epoch", action="store_true", help="skip the epoch run even with --data-dir")
    add("--blocks", action="store_true",
        help="time the CIFAR-shaped network's conv blocks instead of whole steps")
    add("--profile", type=int_at_least(0), default=0, metavar="STEPS",
        help="after timing a point, profile this many more steps and print its GPU kernels "
             "by time per step (torch.profiler) to stderr")
    add("--device", choices=("cuda", "cpu"), default="cuda")
    add("--threads", type=int_at_least(1), default=len(os.sched_getaffinity(0)),
        help="intra-op threads with --device cpu [default: the cores this process may use]")
    return parser.parse_args()


def log(message):
    print(message, file=sys.stderr, flush=True)


def fail(message):
    """One line to stderr and exit code 2, no traceback."""
    log(f"error: {message}")
    sys.exit(2)


def input_shape(name):
    """(channels, height, width) of the images `name` takes."""
    return (3, 32, 32) if name == "cifar" else (1, 28, 28)


def build_model(name, filters):
    """The fp32 model `name`, layer for layer as in the Rust crate."""
    if name == "simple":
        return nn.Sequential(
            nn.Conv2d(1, filters, 3), nn.ReLU(), nn.MaxPool2d(2, 2),
            nn.Flatten(), nn.Linear(13 * 13 * filters, 10))
    if name == "lenet":
        return lenet((32, 64))
    if name == "cifar":
        blocks = [layer for channels in CIFAR_BLOCKS for layer in cifar_block(*channels)]
        return nn.Sequential(*blocks, nn.Flatten(), nn.Linear(256 * 4 * 4, 10))
    return nn.Sequential(
        nn.Flatten(), nn.Linear(784, 256), nn.ReLU(),
        nn.Linear(256, 128), nn.ReLU(), nn.Linear(128, 10))


CIFAR_BLOCKS = ((3, 64), (64, 128), (128, 256))  # (input channels, filters) of each block


def cifar_block(inputs, outputs):
    """One block of the CIFAR-shaped network: conv 3x3 with padding 1, ReLU, 2x2 max-pool."""
    return [nn.Conv2d(inputs, outputs, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)]


def lenet(channels, hidden=128):
    """The LeNet-style CNN with `channels` filters in its two convolutions (Rust's LeNetConfig)."""
    first, second = channels
    return nn.Sequential(
        nn.Conv2d(1, first, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(first, second, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(second * 5 * 5, hidden), nn.ReLU(), nn.Linear(hidden, 10))


def describe(name, filters):
    return name if filters is None else f"{name} d={filters}"


def sweep_points(args):
    """(model, batch, filters) in sweep order; filters is None for models without it."""
    points = []
    for model in args.models:
        if model == "simple":
            points += [(model, b, args.sweep_batches_at_filters) for b in args.batches]
            points += [(model, args.sweep_filters_at_batch, d) for d in args.filters]
        else:
            points += [(model, b, None) for b in args.batches]
    return list(dict.fromkeys(points))  # the two simple sweeps share a point


DEVICE = "cuda"  # set once by main() from --device


def synchronize():
    """Waits for the device's queued work (the CPU's is done when the call returns)."""
    if DEVICE == "cuda":
        torch.cuda.synchronize()


def configure_cuda():
    """cuDNN autotuning (warm-up covers it); the precision is set per variant."""
    torch.backends.cudnn.benchmark = True


def set_precision(variant):
    """Strict fp32 for a fair comparison with cubenet's default, or TF32 in cuDNN and
    cuBLAS for the `-tf32` variants and for what autocast leaves in fp32 in the `-bf16` ones."""
    if DEVICE == "cuda":
        allowed = variant.endswith("-tf32") or variant in BF16
        torch.backends.cuda.matmul.allow_tf32 = allowed
        torch.backends.cudnn.allow_tf32 = allowed
        torch.set_float32_matmul_precision("high" if allowed else "highest")


def autocast(variant):
    """bf16 autocast for the `-bf16` variants (a no-op context for the others): convolutions
    and matmuls take bf16 operands and accumulate in fp32; the loss stays in fp32."""
    return torch.autocast("cuda", dtype=torch.bfloat16, enabled=variant in BF16)


def memory_format(variant):
    """channels_last, which cuDNN's bf16 tensor-core convolutions want, for the `-bf16`
    variants; PyTorch's default layout for the others."""
    return torch.channels_last if variant in BF16 else torch.contiguous_format


def root_cause(error):
    """The innermost exception: torch wraps compiler failures (inner_exception, __cause__)."""
    while True:
        inner = getattr(error, "inner_exception", None) or error.__cause__
        if inner is None:
            return error
        error = inner


def compile_failure():
    """Why torch.compile cannot train on this machine (no Triton, no C compiler, ...), or None.

    Compilation is lazy, so a tiny conv model is compiled and trained one step here
    rather than letting the failure surface in the middle of the sweep."""
    probe = nn.Sequential(nn.Conv2d(1, 2, 3), nn.ReLU(), nn.Flatten(), nn.Linear(2 * 26 * 26, 10))
    probe = probe.cuda()
    try:
        logits = torch.compile(probe)(torch.randn(2, 1, 28, 28, device="cuda"))
        nn.functional.cross_entropy(logits, torch.zeros(2, dtype=torch.long, device="cuda")).backward()
        torch.cuda.synchronize()
    except Exception as error:  # compiler failures come as many exception types
        cause = root_cause(error)
        lines = str(cause).strip().splitlines()
        return f"{type(cause).__name__}: {lines[0] if lines else 'no message'}"
    return None


def usable_variants(names):
    """The variant labels to run, without pytorch-compile where torch.compile fails."""
    if DEVICE == "cpu":
        if "compile" in names:
            log("warning: skipping pytorch-compile on the CPU (benchmarked on the GPU only)")
        return [CPU_VARIANT] if "eager" in names else []
    variants = [VARIANTS[name] for name in names]
    if any(v in COMPILED for v in variants):
        reason = compile_failure()
        if reason is not None:
            log(f"warning: skipping torch.compile variants, torch.compile failed: {reason}")
            variants = [v for v in variants if v not in COMPILED]
    return variants


def new_trainer(name, filters, variant):
    """A freshly seeded model on the device and its training step, step(x, y).

    The step has no .item() or other host sync, so the timer sees the GPU work."""
    torch.manual_seed(0)
    set_precision(variant)
    model = build_model(name, filters).to(DEVICE, memory_format=memory_format(variant))
    forward = model
    if variant in COMPILED:
        # An empty cache per model: static shapes per point, and no recompile limit
        # reached across the many models (past it dynamo would silently run eager).
        torch._dynamo.reset()
        forward = torch.compile(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    loss_fn = nn.CrossEntropyLoss()

    def step(x, y):
        optimizer.zero_grad(set_to_none=True)
        with autocast(variant):
            loss = loss_fn(forward(x), y)
        loss.backward()
        optimizer.step()

    return model, step


def time_steps(step, x, y, warmup, repeats):
    """The timing protocol of the Rust tool: median is sorted[repeats // 2]."""
    for _ in range(warmup):
        step(x, y)
    synchronize()
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        step(x, y)
        synchronize()
        samples.append((time.perf_counter() - start) * 1e3)
    samples.sort()
    return {"median_ms": samples[repeats // 2], "min_ms": samples[0],
            "max_ms": samples[-1], "runs": repeats}


def kernel_profile(step, x, y, steps):
    """The GPU kernels of `steps` more training steps as a markdown table, the longest
    first: microseconds per step, launches per step (Nsight Compute's view of cubenet's
    kernels is `scripts/gpu_stages.sh profile`)."""
    from torch.profiler import ProfilerActivity, profile
    synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as trace:
        for _ in range(steps):
            step(x, y)
        synchronize()
    totals = {}
    for event in trace.events():
        if event.device_type == torch.autograd.DeviceType.CUDA:
            microseconds, launches = totals.get(event.name, (0.0, 0))
            totals[event.name] = (microseconds + event.time_range.elapsed_us(), launches + 1)
    rows = sorted(totals.items(), key=lambda item: -item[1][0])
    lines = ["| kernel | us per step | launches per step |", "|---|---|---|"]
    lines += [f"| {name[:110]} | {us / steps:.1f} | {n / steps:g} |" for name, (us, n) in rows]
    total = sum(us for us, _ in totals.values()) / steps
    lines.append(f"| all kernels | {total:.1f} | {sum(n for _, n in totals.values()) / steps:g} |")
    return "\n".join(lines)


def bench_point(name, batch, filters, variant, warmup, repeats, profile_steps=0):
    """One "steps" entry: a training step timed on seeded random data on the device."""
    _, step = new_trainer(name, filters, variant)
    x = torch.randn(batch, *input_shape(name), device=DEVICE)
    x = x.contiguous(memory_format=memory_format(variant))
    y = torch.randint(0, 10, (batch,), device=DEVICE)
    timing = time_steps(step, x, y, warmup, repeats)
    log(f"{variant} {describe(name, filters)} batch={batch}: {timing['median_ms']:.2f} ms")
    if profile_steps:
        log(kernel_profile(step, x, y, profile_steps))
    return {"model": name, "variant": variant, "batch": batch, "filters": filters,
            "warmup": warmup, "timing": timing}


def bench_blocks(batch, variant, warmup, repeats):
    """"blocks" entries: each CIFAR-shaped block's forward and backward on seeded random
    data, gradients cleared (set to None) before each run as the training step does."""
    entries = []
    side = input_shape("cifar")[1]
    for index, (inputs, outputs) in enumerate(CIFAR_BLOCKS):
        torch.manual_seed(0)
        set_precision(variant)
        layout = memory_format(variant)
        block = nn.Sequential(*cifar_block(inputs, outputs)).to(DEVICE, memory_format=layout)
        forward = block
        if variant in COMPILED:
            torch._dynamo.reset()
            forward = torch.compile(block)
        # The first block is fed with data: no input gradient, as in a training step.
        x = torch.randn(batch, inputs, side, side, device=DEVICE).contiguous(memory_format=layout)
        x.requires_grad_(index > 0)
        # The gradient in the block output's dtype and layout, as the next block hands it back.
        dtype = torch.bfloat16 if variant in BF16 else torch.float32
        grad = torch.randn(batch, outputs, side // 2, side // 2, device=DEVICE, dtype=dtype)
        grad = grad.contiguous(memory_format=layout)

        def run(x, grad):
            block.zero_grad(set_to_none=True)
            x.grad = None
            with autocast(variant):
                y = forward(x)
            y.backward(grad)

        timing = time_steps(run, x, grad, warmup, repeats)
        shape = f"conv 3x3 {inputs}→{outputs} on {side}x{side}"
        log(f"{variant} block {index + 1} ({shape}) batch={batch}: {timing['median_ms']:.3f} ms")
        entries.append({"block": index + 1, "shape": shape, "variant": variant, "batch": batch,
                        "warmup": warmup, "timing": timing})
        side //= 2
    return entries


def find_idx(directory, name):
    """The path of IDX file `name` in `directory`, raw or gzipped."""
    for path in (directory / name, directory / f"{name}.gz"):
        if path.is_file():
            return path
    raise DataError(f"{directory / name}[.gz]: not found")


def read_idx(path, magic):
    """Dimensions and payload bytes of an IDX file, checked against `magic` and its own header."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as file:
            raw = file.read()
    except (OSError, EOFError, zlib.error) as error:  # unreadable, bad or truncated gzip
        raise DataError(f"{path}: {error}") from None
    if len(raw) < 4 or int.from_bytes(raw[:4], "big") != magic:
        raise DataError(f"{path}: magic number is not {magic}, not the expected MNIST IDX file")
    header = 4 + 4 * (magic & 0xFF)  # the low byte of the magic number is the rank
    dims = [int.from_bytes(raw[i:i + 4], "big") for i in range(4, header, 4)]
    if len(raw) != header + math.prod(dims):
        raise DataError(f"{path}: file size does not match the dimensions in its header")
    return dims, raw[header:]


def load_split(directory, prefix):
    """Normalized float32 images [n, 1, 28, 28] and int64 labels [n] of one split, on the device."""
    image_path = find_idx(directory, f"{prefix}-images-idx3-ubyte")
    label_path = find_idx(directory, f"{prefix}-labels-idx1-ubyte")
    image_dims, pixels = read_idx(image_path, IMAGES_MAGIC)
    label_dims, labels = read_idx(label_path, LABELS_MAGIC)
    if image_dims[1:] != [28, 28]:
        raise DataError(f"{image_path}: images are {image_dims[1]}x{image_dims[2]}, expected 28x28")
    if label_dims[0] != image_dims[0]:
        raise DataError(f"{label_path}: {label_dims[0]} labels for {image_dims[0]} images")
    images = torch.frombuffer(bytearray(pixels), dtype=torch.uint8).to(DEVICE)
    images = (images.float() / 255 - PIXEL_MEAN) / PIXEL_STD
    labels = torch.frombuffer(bytearray(labels), dtype=torch.uint8).to(DEVICE).long()
    return images.view(-1, 1, 28, 28), labels


@torch.no_grad()
def test_accuracy(model, images, labels):
    """Fraction classified correctly. Uses the uncompiled module, which shares the trained
    parameters, so the compile variant does not recompile for inference."""
    model.eval()
    correct = sum((model(images[i:i + EVAL_CHUNK]).argmax(1) == labels[i:i + EVAL_CHUNK]).sum()
                  for i in range(0, len(images), EVAL_CHUNK))
    return correct.item() / len(images)


def run_epoch(name, filters, variant, batch, warmup, train, test):
    """One "epochs" entry: a fresh model, warm-up steps on the first batch, then one timed
    epoch over the training set in order (last partial batch included) and the test accuracy.

    A partial last batch has a new shape, so its autotuning (and, compiled, its
    recompilation) falls inside the timed epoch; 60,000 / 1000 has none."""
    model, step = new_trainer(name, filters, variant)
    images, labels = train
    images = images.contiguous(memory_format=memory_format(variant))
    for _ in range(warmup):
        step(images[:batch], labels[:batch])
    synchronize()
    start = time.perf_counter()
    for first in range(0, len(images), batch):
        step(images[first:first + batch], labels[first:first + batch])
    synchronize()
    seconds = time.perf_counter() - start
    accuracy = test_accuracy(model, *test)
    log(f"{variant} {describe(name, filters)} epoch batch={batch}: "
        f"{seconds:.2f} s, test accuracy {accuracy:.4f}")
    return {"model": name, "variant": variant, "batch": batch, "filters": filters,
            "images": len(images), "seconds": seconds, "test_accuracy": accuracy}


def report(steps, epochs, started):
    """The document in the schema the Rust tool deserializes (deny_unknown_fields)."""
    return {"sources": [source(started)], "steps": steps, "phases": [], "epochs": epochs}


def source(started):
    """Where and how this run measured: device, versions, command and date."""
    if DEVICE == "cuda":
        software = (f"torch {torch.__version__}, CUDA {torch.version.cuda}, "
                    f"cuDNN {torch.backends.cudnn.version()}")
        device = torch.cuda.get_device_name()
    else:
        software = f"torch {torch.__version__}"
        device = f"{cpu_name()} ({torch.get_num_threads()} threads)"
    return {"tool": "pytorch/pytorch_reference.py", "device": device,
            "software": software, "command": shlex.join(["python3", *sys.argv]),
            "date": started.strftime("%Y-%m-%dT%H:%M:%SZ")}


def cpu_name():
    """The CPU's model name (Linux), as the Rust tool reports it."""
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return os.uname().machine


def write_json(path, document):
    """Writes atomically, so a reader never sees a half-written file."""
    tmp = f"{path}.tmp"
    with open(tmp, "w") as file:
        json.dump(document, file, indent=2)
        file.write("\n")
    os.replace(tmp, path)


def median_table(entries, columns, variants, digits):
    """Medians in ms: one row per distinct value of the entries' `columns` (None shown as "-"),
    one column per variant ("-" where a variant has no entry)."""
    medians = {tuple(e[c] for c in columns) + (e["variant"],): e["timing"]["median_ms"]
               for e in entries}
    rows = dict.fromkeys(key[:-1] for key in medians)
    lines = ["| " + " | ".join(columns) + " | "
             + " | ".join(f"{v} median ms" for v in variants) + " |",
             "|---|" + "---:|" * (len(columns) - 1 + len(variants))]
    for row in rows:
        cells = [f"{medians[row + (v,)]:.{digits}f}" if row + (v,) in medians else "-"
                 for v in variants]
        lines.append("| " + " | ".join("-" if value is None else str(value) for value in row)
                     + " | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main():
    global DEVICE
    args = parse_args()
    started = datetime.now(timezone.utc)
    DEVICE = args.device
    if DEVICE == "cuda" and not torch.cuda.is_available():
        fail("no CUDA device visible to PyTorch (--device cpu runs on the CPU)")
    if DEVICE == "cpu":
        torch.set_num_threads(args.threads)
    run_epochs = args.data_dir is not None and not args.no_epoch
    train = test = None
    if run_epochs:  # loaded first: a bad data dir fails before minutes of sweeps
        try:
            train, test = load_split(args.data_dir, "train"), load_split(args.data_dir, "t10k")
        except DataError as error:
            fail(str(error))
    if DEVICE == "cuda":
        configure_cuda()
    names = args.variants or (["eager", "compile"] if DEVICE == "cuda" else ["eager"])
    variants = usable_variants(names)
    if args.blocks:
        blocks = [entry for variant in variants for batch in args.batches
                  for entry in bench_blocks(batch, variant, args.warmup, args.repeats)]
        write_json(args.out, {"sources": [source(started)], "blocks": blocks})
        print(median_table(blocks, ["block", "shape", "batch"], variants, 3))
        return
    points = sweep_points(args)
    steps = [bench_point(model, batch, filters, variant, args.warmup, args.repeats, args.profile)
             for variant in variants for model, batch, filters in points]
    epochs = []
    if run_epochs:
        epochs = [run_epoch(model, args.epoch_filters if model == "simple" else None, variant,
                            args.epoch_batch, args.warmup, train, test)
                  for variant in variants for model in args.models
                  if input_shape(model) == input_shape("simple")]
    write_json(args.out, report(steps, epochs, started))
    print(median_table(steps, ["model", "filters", "batch"], variants, 2))


if __name__ == "__main__":
    main()
