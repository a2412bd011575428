#!/usr/bin/env python3
"""PyTorch reference for cubenet's MNIST speedrun (examples/mnist_speedrun.rs).

The same recipe at the example's defaults: LeNet with 16 and 32 filters (hidden 128),
SGD with momentum 0.9 (undampened, as Burn's), the learning rate rising linearly from 0
to --lr over the --warmup fraction of the steps and then falling linearly to 0, batches of
--batch-size consecutive images of a per-epoch permutation made on the GPU (a last partial
batch dropped), --epochs epochs, fp32 with TF32 off, cuDNN autotuning on.

The clock runs only while training, as in the Rust example: kernels are compiled and
autotuned by untimed steps first (the network is then re-initialized from the seed, so
torch.compile does not recompile per seed), each epoch ends with a synchronization, and
the test evaluation after it is not timed.

    python3 pytorch/pytorch_speedrun.py --data-dir .device-bin/mnist [--variants eager,compile] [--seeds 10]

Prints each seed's epochs and, per variant, the mean and sample standard deviation.
"""

import argparse
import statistics
import time
from pathlib import Path

import torch
from torch import nn

import pytorch_reference as reference

WARMUP_STEPS = 3


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--data-dir", type=Path, required=True, help="the four MNIST IDX files (raw or .gz)")
    add("--variants", type=reference.name_list(("eager", "compile")), default="eager,compile")
    add("--channels", type=reference.int_at_least(1), nargs=2, default=[16, 32])
    add("--batch-size", type=reference.int_at_least(1), default=256)
    add("--epochs", type=reference.int_at_least(1), default=2)
    add("--lr", type=float, default=0.1, help="peak learning rate")
    add("--momentum", type=float, default=0.9)
    add("--warmup", type=float, default=0.5, help="fraction of the steps rising to the peak")
    add("--seeds", type=reference.int_at_least(1), default=10, help="runs, with seeds 0..N")
    args = parser.parse_args()
    if not 0 <= args.warmup < 1:
        parser.error("--warmup must be a fraction of the run, at least 0 and below 1")
    return args


def lr_at(args, done, total):
    """The example's schedule: linear rise over the warm-up, then linear decay to zero."""
    progress = done / total
    if progress < args.warmup:
        return args.lr * progress / args.warmup
    return args.lr * (1 - progress) / (1 - args.warmup)


class Speedrun:
    """One variant's network (compiled once) and its runs."""

    def __init__(self, args, variant, train):
        self.args = args
        self.images, self.labels = train
        self.steps_per_epoch = len(self.images) // args.batch_size
        self.model = reference.lenet(args.channels).cuda()
        self.forward = torch.compile(self.model) if variant in reference.COMPILED else self.model
        self.loss_fn = nn.CrossEntropyLoss()

    def reset(self, seed):
        """Fresh weights from `seed` in the same parameter tensors, and a fresh optimizer."""
        torch.manual_seed(seed)
        with torch.no_grad():
            for layer in self.model.modules():
                if hasattr(layer, "reset_parameters"):
                    layer.reset_parameters()
        self.model.train()
        return torch.optim.SGD(self.model.parameters(), lr=0.0, momentum=self.args.momentum)

    def step(self, optimizer, order, index, lr):
        rows = order[index * self.args.batch_size:(index + 1) * self.args.batch_size]
        for group in optimizer.param_groups:
            group["lr"] = lr
        optimizer.zero_grad(set_to_none=True)
        self.loss_fn(self.forward(self.images[rows]), self.labels[rows]).backward()
        optimizer.step()

    def warm_up(self):
        optimizer = self.reset(seed=2**31)
        order = torch.randperm(len(self.images), device="cuda")
        for index in range(WARMUP_STEPS):
            self.step(optimizer, order, index, self.args.lr)
        reference.synchronize()

    def run(self, seed, test):
        """[(epoch, training seconds so far, test accuracy)] of one seed's run."""
        optimizer = self.reset(seed)
        generator = torch.Generator(device="cuda").manual_seed(seed)
        total = self.args.epochs * self.steps_per_epoch
        seconds, marks = 0.0, []
        reference.synchronize()
        for epoch in range(self.args.epochs):
            start = time.perf_counter()
            order = torch.randperm(len(self.images), device="cuda", generator=generator)
            for index in range(self.steps_per_epoch):
                done = epoch * self.steps_per_epoch + index
                self.step(optimizer, order, index, lr_at(self.args, done, total))
            reference.synchronize()
            seconds += time.perf_counter() - start
            marks.append((epoch + 1, seconds, reference.test_accuracy(self.model, *test)))
            self.model.train()
        return marks


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        reference.fail("no CUDA device visible to PyTorch")
    try:
        train = reference.load_split(args.data_dir, "train")
        test = reference.load_split(args.data_dir, "t10k")
    except reference.DataError as error:
        reference.fail(str(error))
    reference.configure_cuda()
    reference.set_tf32(False)
    variants = reference.usable_variants(args.variants)
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; LeNet {args.channels}, "
          f"batch {args.batch_size}, {args.epochs} epochs, lr {args.lr} "
          f"(warm-up {args.warmup}), momentum {args.momentum}")
    for variant in variants:
        speedrun = Speedrun(args, variant, train)
        speedrun.warm_up()
        times, accuracies = [], []
        for seed in range(args.seeds):
            marks = speedrun.run(seed, test)
            print(f"{variant} seed {seed}: " + ", ".join(
                f"epoch {e} {s:.3f} s {a * 100:.2f}%" for e, s, a in marks))
            times.append(marks[-1][1])
            accuracies.append(marks[-1][2] * 100)
        spread = (lambda xs: statistics.stdev(xs) if len(xs) > 1 else 0.0)
        print(f"{variant} mean over {args.seeds} seeds: test accuracy "
              f"{statistics.mean(accuracies):.2f}% ± {spread(accuracies):.2f}, training time "
              f"{statistics.mean(times):.3f} s ± {spread(times):.3f}")


if __name__ == "__main__":
    main()
