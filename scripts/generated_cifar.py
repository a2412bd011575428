#!/usr/bin/env python3
"""Writes generated CIFAR-10 binary files (data_batch_1..5.bin, test_batch.bin: a label byte,
then 3x32x32 pixels, per record) into DIR, for GPU runs on machines without the real set.

  generated_cifar.py DIR             random pixels and labels: for speed, nothing to learn
  generated_cifar.py DIR --learnable each class a smooth colour pattern of its own under
                                     noise: a loss curve to compare between runs
"""
import os
import sys

import numpy as np

RECORDS_PER_FILE = 10_000
FILES = [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]


def main():
    out = sys.argv[1]
    learnable = "--learnable" in sys.argv[2:]
    rng = np.random.default_rng(0)
    # One 3x8x8 pattern per class, scaled up to 32x32.
    patterns = rng.integers(0, 256, size=(10, 3, 8, 8)).repeat(4, axis=2).repeat(4, axis=3)
    os.makedirs(out, exist_ok=True)
    for name in FILES:
        records = rng.integers(0, 256, size=(RECORDS_PER_FILE, 1 + 3 * 32 * 32), dtype=np.uint8)
        records[:, 0] %= 10
        if learnable:
            noise = records[:, 1:].astype(np.uint16)
            pattern = patterns[records[:, 0]].reshape(RECORDS_PER_FILE, -1)
            records[:, 1:] = ((pattern + 3 * noise) // 4).astype(np.uint8)
        records.tofile(os.path.join(out, name))


if __name__ == "__main__":
    main()
