#!/usr/bin/env python3
"""The matrix products of one training step, timed as plain cuBLAS GEMMs: a floor for the step.

Every convolution of a step is a GEMM (forward: output positions x filters over channel x
tap; input gradient: input positions x channels over filter x tap, or its transposed
formulation, whichever has fewer multiply-adds; weight gradient: filters x (channel, tap)
over output positions), and so is every dense layer. A convolution kernel must also gather
its patches, so no implementation of these layers in fp32 runs faster than cuBLAS runs the
same products on materialized matrices. This script times those products with `torch.mm`
(fp32, TF32 off) on the GPU and sums them per network, next to the FLOP count and the time
at the best rate measured on a large square GEMM (the device's practical fp32 peak).

Run on a CUDA machine with PyTorch 2.x:

    python3 pytorch/gemm_floor.py --out gemm-floor.json

A markdown table goes to stdout, progress to stderr.
"""

import argparse
import json
import os
import sys

import torch

SQUARE = 8192  # side of the square GEMM that measures the peak rate


def conv(name, batch, c_in, c_out, out_hw, in_hw, kernel, input_grad=True):
    """(label, M, N, K) of a stride-1 convolution's products; `out_hw` and `in_hw` are the
    conv output's and input's sides."""
    taps = kernel * kernel
    out_positions = batch * out_hw * out_hw
    in_positions = batch * in_hw * in_hw
    products = [(f"{name} forward", out_positions, c_out, c_in * taps)]
    if input_grad:
        # The gather form (input positions x channels over filter x tap) or the scatter form
        # (output positions x (channel, tap) over filters): the one with fewer products.
        gather = (f"{name} input gradient", in_positions, c_in, c_out * taps)
        scatter = (f"{name} input gradient", out_positions, c_in * taps, c_out)
        products.append(min(gather, scatter, key=lambda p: p[1] * p[2] * p[3]))
    products.append((f"{name} weight gradient", c_out, c_in * taps, out_positions))
    return products


def dense(name, batch, inputs, outputs, input_grad=True):
    products = [(f"{name} forward", batch, outputs, inputs)]
    if input_grad:
        products.append((f"{name} input gradient", batch, inputs, outputs))
    products.append((f"{name} weight gradient", outputs, inputs, batch))
    return products


def networks():
    """Each benchmarked network's step at the batch of the GPU-speed targets (docs/PERF.md)."""
    return {
        "LeNet 32/64, batch 1000": (
            conv("conv1", 1000, 1, 32, 28, 28, 5, input_grad=False)
            + conv("conv2", 1000, 32, 64, 10, 14, 5)
            + dense("dense1", 1000, 1600, 128) + dense("dense2", 1000, 128, 10)),
        "CIFAR-shaped, batch 512": (
            conv("conv1", 512, 3, 64, 32, 32, 3, input_grad=False)
            + conv("conv2", 512, 64, 128, 16, 16, 3)
            + conv("conv3", 512, 128, 256, 8, 8, 3)
            + dense("dense", 512, 4096, 10)),
        "CIFAR-shaped, batch 128": (
            conv("conv1", 128, 3, 64, 32, 32, 3, input_grad=False)
            + conv("conv2", 128, 64, 128, 16, 16, 3)
            + conv("conv3", 128, 128, 256, 8, 8, 3)
            + dense("dense", 128, 4096, 10)),
        "single-conv CNN d=256, batch 1000": (
            conv("conv", 1000, 1, 256, 26, 28, 3, input_grad=False)
            + dense("dense", 1000, 13 * 13 * 256, 10, input_grad=True)),
        "single-conv CNN d=32, batch 1000": (
            conv("conv", 1000, 1, 32, 26, 28, 3, input_grad=False)
            + dense("dense", 1000, 13 * 13 * 32, 10, input_grad=True)),
    }


def time_mm(m, n, k, warmup, repeats):
    """Median ms of an (m x k) @ (k x n) product on random fp32 matrices, by CUDA events."""
    a = torch.randn(m, k, device="cuda")
    b = torch.randn(k, n, device="cuda")
    for _ in range(warmup):
        torch.mm(a, b)
    samples = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        torch.mm(a, b)
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end))
    samples.sort()
    return samples[repeats // 2]


def main():
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=50)
    parser.add_argument("--out", default="gemm-floor.json", help="JSON output")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("error: no CUDA device visible to PyTorch", file=sys.stderr)
        sys.exit(2)
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    square_ms = time_mm(SQUARE, SQUARE, SQUARE, args.warmup, args.repeats)
    peak = 2 * SQUARE ** 3 / square_ms / 1e9  # TFLOP/s
    print(f"square {SQUARE} GEMM: {square_ms:.3f} ms, {peak:.1f} TFLOP/s", file=sys.stderr)
    results = []
    lines = ["| network | GFLOP | at the square GEMM's rate (ms) | cuBLAS, product by product (ms) |",
             "|---|---:|---:|---:|"]
    for network, products in networks().items():
        timed = []
        for label, m, n, k in products:
            ms = time_mm(m, n, k, args.warmup, args.repeats)
            gflop = 2 * m * n * k / 1e9
            timed.append({"product": label, "m": m, "n": n, "k": k, "gflop": gflop, "ms": ms})
            print(f"{network}: {label} {m}x{n}x{k}: {ms:.4f} ms "
                  f"({gflop / ms:.1f} TFLOP/s)", file=sys.stderr)
        gflop = sum(p["gflop"] for p in timed)
        total = sum(p["ms"] for p in timed)
        results.append({"network": network, "gflop": gflop, "cublas_ms": total,
                        "products": timed})
        lines.append(f"| {network} | {gflop:.1f} | {gflop / peak:.3f} | {total:.3f} |")
    document = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                "square_gemm": {"side": SQUARE, "ms": square_ms, "tflops": peak},
                "networks": results}
    tmp = f"{args.out}.tmp"
    with open(tmp, "w") as file:
        json.dump(document, file, indent=2)
    os.replace(tmp, args.out)
    print(f"fp32 (TF32 off) on {document['device']}, square GEMM {peak:.1f} TFLOP/s\n")
    print("\n".join(lines))


if __name__ == "__main__":
    main()
