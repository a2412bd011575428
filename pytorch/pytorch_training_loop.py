#!/usr/bin/env python3
"""PyTorch reference for what `cubenet train` does end to end: the training throughput of a
real loop, beside the bare step that pytorch/pytorch_reference.py times.

The same run as cubenet's image runs: Adam at 1e-3 with the learning rate annealed (cosine)
to 0 over the run, batches of a per-epoch permutation (the last partial one included),
fp32 with TF32 off (--pytorch-defaults: PyTorch's own defaults, TF32 in cuDNN's convolutions
and fp32 matmuls), 90% of the training images (cubenet holds out 10% for validation).
Two loops, as a PyTorch user writes them:
  dataloader  the images in host memory, torch.utils.data.DataLoader (4 workers, pinned
              memory, shuffle), each batch copied to the GPU; `loss.item()` every step
  on-gpu      the whole set on the GPU, one permutation a epoch, no host round trip a step
Started by torchrun on several GPUs, the on-gpu loop is data-parallel as PyTorch users run it:
a process per GPU, DistributedDataParallel (NCCL), each rank its slice of the epoch's
permutation at --batches per GPU; the images per second are all ranks' (rank 0 prints).
Networks: the single-conv CNN (32 filters: the design card's, `mnist_cnn`'s defaults) and
LeNet 32/64 on MNIST, and the CIFAR-shaped network on generated 3x32x32 images
(as `cubenet bench`'s CIFAR-shaped runs). Reported: images per second over the epochs after
the first (the first pays for cuDNN autotuning and worker start-up), median of --repeats.

    python3 pytorch/pytorch_training_loop.py --data-dir MNIST --model lenet --batches 64,256,1024
    python3 pytorch/pytorch_training_loop.py --model cifar --batches 512
    torchrun --nproc-per-node 2 pytorch/pytorch_training_loop.py --data-dir MNIST --loops on-gpu
"""

import argparse
import os
import statistics
import time
from pathlib import Path

import torch
from torch import distributed, nn

import pytorch_reference as reference

LOOPS = ("dataloader", "on-gpu")
CIFAR_IMAGES = 50_000
SIMPLE_FILTERS = 32  # configs/mnist_cnn.toml


def parse_args():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    add = parser.add_argument
    add("--data-dir", type=Path, help="the four MNIST IDX files (raw or .gz); MNIST's networks")
    add("--model", choices=("simple", "lenet", "cifar"), default="lenet")
    add("--batches", type=reference.int_list, default=[64, 256, 1024])
    add("--loops", type=reference.name_list(LOOPS), default=",".join(LOOPS))
    add("--epochs", type=reference.int_at_least(2), default=3)
    add("--repeats", type=reference.int_at_least(1), default=1)
    add("--workers", type=reference.int_at_least(0), default=4)
    add("--pytorch-defaults", action="store_true",
        help="PyTorch's out-of-the-box numerics (TF32 convolutions, fp32 matmuls), not strict fp32")
    args = parser.parse_args()
    if args.model != "cifar" and args.data_dir is None:
        parser.error(f"--model {args.model} trains on MNIST: give --data-dir")
    return args


def training_images(args):
    """The training images [n, c, h, w] (normalized, on the GPU) and labels."""
    if args.model != "cifar":
        images, labels = reference.load_split(args.data_dir, "train")
    else:
        generator = torch.Generator(device="cuda").manual_seed(0)
        images = torch.randn(CIFAR_IMAGES, 3, 32, 32, device="cuda", generator=generator)
        labels = torch.randint(0, 10, (CIFAR_IMAGES,), device="cuda", generator=generator)
    kept = len(images) - len(images) // 10
    return images[:kept].contiguous(), labels[:kept].contiguous()


def train(args, loop, batch, images, labels):
    """Images per second over epochs 2.. of one run of `loop` at `batch` (per GPU)."""
    torch.manual_seed(0)
    model = reference.build_model(args.model, SIMPLE_FILTERS).cuda()
    ranks, rank = distributed_place()
    if ranks > 1:
        model = nn.parallel.DistributedDataParallel(model, device_ids=[torch.cuda.current_device()])
    share = len(images) // ranks
    steps = args.epochs * -(-share // batch)
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    loss_fn = nn.CrossEntropyLoss()
    if loop == "dataloader":
        dataset = torch.utils.data.TensorDataset(images.cpu(), labels.cpu())
        loader = torch.utils.data.DataLoader(
            dataset, batch_size=batch, shuffle=True, num_workers=args.workers,
            pin_memory=True, persistent_workers=args.workers > 0)
    seconds = []
    for _ in range(args.epochs):
        reference.synchronize()
        start = time.perf_counter()
        if loop == "dataloader":
            batches = ((x.cuda(non_blocking=True), y.cuda(non_blocking=True)) for x, y in loader)
        else:
            order = torch.randperm(len(images), device="cuda")[rank * share:(rank + 1) * share]
            batches = ((images[rows], labels[rows]) for rows in order.split(batch))
        for x, y in batches:
            optimizer.zero_grad(set_to_none=True)
            loss = loss_fn(model(x), y)
            loss.backward()
            optimizer.step()
            schedule.step()
            if loop == "dataloader":
                loss.item()
        reference.synchronize()
        seconds.append(time.perf_counter() - start)
    return ranks * share / statistics.mean(seconds[1:])


def distributed_place():
    """(ranks, this rank): (1, 0) unless started by torchrun on several GPUs."""
    if not distributed.is_initialized():
        return 1, 0
    return distributed.get_world_size(), distributed.get_rank()


def main():
    args = parse_args()
    if not torch.cuda.is_available():
        reference.fail("no CUDA device visible to PyTorch")
    if int(os.environ.get("WORLD_SIZE", "1")) > 1:
        if args.loops != ["on-gpu"]:
            reference.fail("several GPUs run the on-gpu loop only: pass --loops on-gpu")
        torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
        distributed.init_process_group("nccl")
    reference.configure_cuda()
    reference.set_precision("pytorch-eager")
    if args.pytorch_defaults:
        torch.backends.cudnn.allow_tf32 = True
    try:
        images, labels = training_images(args)
    except reference.DataError as error:
        reference.fail(str(error))
    ranks, rank = distributed_place()
    say = print if rank == 0 else (lambda *_, **__: None)
    say(f"{torch.cuda.get_device_name()}, torch {torch.__version__}; {args.model}, "
        f"{len(images)} training images, Adam + cosine, {args.epochs} epochs, "
        f"{'TF32 convolutions (PyTorch defaults)' if args.pytorch_defaults else 'fp32'}, "
        f"{ranks} GPU(s)")
    for batch in args.batches:
        for loop in args.loops:
            rates = [train(args, loop, batch, images, labels) for _ in range(args.repeats)]
            say(f"{args.model} batch {batch}{' per GPU' if ranks > 1 else ''} {loop}: "
                f"{statistics.median(rates):,.0f} images/s (epochs 2-{args.epochs}, "
                f"median of {args.repeats})", flush=True)
    if ranks > 1:
        distributed.destroy_process_group()


if __name__ == "__main__":
    main()
