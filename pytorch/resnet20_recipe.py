#!/usr/bin/env python3
"""ResNet-20 trained by PyTorch with configs/resnet20.toml's recipe, on CIFAR-10's binary
files (or generated ones, scripts/generated_cifar.py): the same network (option-A shortcuts),
the same split (the last 10% of a seeded shuffle of the training files held out), the same
normalization (the training split's channel means and deviations), augmentation (flips,
4-pixel crops), SGD (0.1, momentum 0.9, weight decay 5e-4 on every parameter), batch 128 and
cosine schedule stepped per batch. Prints one line per epoch (seconds, train loss, valid
accuracy) and the test accuracy, as `cubenet train` does.

  resnet20_recipe.py DIR [--epochs N] [--seed S] [--channels-last] [--bf16] [--compile]
                         [--device cuda|cpu]
"""
import argparse
import os
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F


def read_cifar(directory, names):
    records = np.concatenate([
        np.fromfile(os.path.join(directory, name), dtype=np.uint8).reshape(-1, 1 + 3 * 32 * 32)
        for name in names])
    return records[:, 1:].reshape(-1, 3, 32, 32), records[:, 0].astype(np.int64)


class Block(nn.Module):
    def __init__(self, inputs, outputs, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(inputs, outputs, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(outputs)
        self.conv2 = nn.Conv2d(outputs, outputs, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(outputs)
        self.stride, self.extra = stride, outputs - inputs

    def forward(self, x):
        out = self.bn2(self.conv2(F.relu(self.bn1(self.conv1(x)))))
        shortcut = x[:, :, ::self.stride, ::self.stride]
        if self.extra:
            shortcut = F.pad(shortcut, (0, 0, 0, 0, 0, self.extra))
        return F.relu(out + shortcut)


def resnet20(classes=10):
    layers = [nn.Conv2d(3, 16, 3, 1, 1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    inputs = 16
    for width, stride in [(16, 1), (32, 2), (64, 2)]:
        for i in range(3):
            layers.append(Block(inputs, width, stride if i == 0 else 1))
            inputs = width
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, classes)]
    return nn.Sequential(*layers)


def augment(images, generator):
    n = images.shape[0]
    flips = torch.rand(n, generator=generator, device=images.device) < 0.5
    images = torch.where(flips[:, None, None, None], images.flip(3), images)
    padded = F.pad(images, (4, 4, 4, 4))
    dy = torch.randint(0, 9, (n,), generator=generator, device=images.device)
    dx = torch.randint(0, 9, (n,), generator=generator, device=images.device)
    rows = (dy[:, None] + torch.arange(32, device=images.device)[None, :])
    cols = (dx[:, None] + torch.arange(32, device=images.device)[None, :])
    index = torch.arange(n, device=images.device)[:, None, None]
    return padded.permute(0, 2, 3, 1)[index, rows[:, :, None], cols[:, None, :]].permute(0, 3, 1, 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dir")
    parser.add_argument("--epochs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--channels-last", action="store_true")
    parser.add_argument("--bf16", action="store_true")
    parser.add_argument("--compile", action="store_true")
    parser.add_argument("--device", default="cuda")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    device = torch.device(args.device)

    def synchronize():
        if device.type == "cuda":
            torch.cuda.synchronize()
    images, labels = read_cifar(args.dir, [f"data_batch_{i}.bin" for i in range(1, 6)])
    test_images, test_labels = read_cifar(args.dir, ["test_batch.bin"])
    order = np.random.default_rng(args.seed).permutation(len(labels))
    valid_count = len(labels) // 10
    train_index, valid_index = order[:-valid_count], order[-valid_count:]
    scaled = images[train_index].astype(np.float32) / 255
    mean = scaled.mean(axis=(0, 2, 3))
    std = scaled.std(axis=(0, 2, 3))

    def to_device(x):
        x = (torch.tensor(x, dtype=torch.float32) / 255 - torch.tensor(mean)[:, None, None]) \
            / torch.tensor(std)[:, None, None]
        return x.to(device)

    train_x, train_y = to_device(images[train_index]), torch.tensor(labels[train_index]).to(device)
    valid_x, valid_y = to_device(images[valid_index]), torch.tensor(labels[valid_index]).to(device)
    test_x, test_y = to_device(test_images), torch.tensor(test_labels).to(device)
    memory_format = torch.channels_last if args.channels_last else torch.contiguous_format
    model = resnet20().to(device, memory_format=memory_format)
    batch = 128
    steps = args.epochs * ((len(train_y) + batch - 1) // batch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=5e-4)
    schedule = torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, steps)
    forward = torch.compile(model) if args.compile else model
    generator = torch.Generator(device=device)
    generator.manual_seed(args.seed)

    def accuracy(x, y):
        model.eval()
        correct = 0
        with torch.no_grad(), torch.autocast(device.type, torch.bfloat16, enabled=args.bf16):
            for start in range(0, len(y), 1000):
                chunk = x[start:start + 1000].contiguous(memory_format=memory_format)
                correct += (forward(chunk).argmax(1) == y[start:start + 1000]).sum().item()
        model.train()
        return correct / len(y)

    total = 0.0
    for epoch in range(1, args.epochs + 1):
        synchronize()
        start = time.perf_counter()
        permutation = torch.randperm(len(train_y), device=device, generator=generator)
        losses = []
        for first in range(0, len(train_y), batch):
            index = permutation[first:first + batch]
            x = augment(train_x[index], generator).contiguous(memory_format=memory_format)
            with torch.autocast(device.type, torch.bfloat16, enabled=args.bf16):
                loss = F.cross_entropy(forward(x), train_y[index])
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            schedule.step()
            losses.append(loss.detach())
        synchronize()
        seconds = time.perf_counter() - start
        total += seconds
        mean_loss = torch.stack(losses).mean().item()
        print(f"epoch {epoch}: {seconds:.2f} s, train loss {mean_loss:.4f}, "
              f"valid accuracy {100 * accuracy(valid_x, valid_y):.2f}%", flush=True)
    print(f"training: {total:.2f} s over {args.epochs} epochs")
    print(f"test accuracy: {100 * accuracy(test_x, test_y):.2f}%")


if __name__ == "__main__":
    main()
