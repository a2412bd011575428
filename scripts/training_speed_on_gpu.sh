#!/usr/bin/env bash
# Training throughput where users see it, on a GPU machine without a Rust toolchain: real
# `cubenet train` runs (data on the device, then streamed from the host with 0 and 4 workers)
# beside the bare step (`cubenet bench`) and PyTorch's training loops, in one call.
# Build and pack here first:
#   ../shared/tools/pack-for-device --with-mnist -- --workspace --all-features --bin cubenet
# Logs go to $OUT (default ./gpu-out).
set -uo pipefail
logs=${OUT:-gpu-out}
mkdir -p "$logs"
source scripts/device_bin.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/gpu.txt"
batches=${BATCHES:-64,256,1024}
work=$(mktemp -d)

# The training speed line of each real run: LeNet 32/64 on MNIST, 3 epochs (epochs 2-3 timed).
for batch in ${batches//,/ }; do
  for placement in "device" "host 0" "host 4"; do
    set -- $placement
    flags=(--set "training.workers=${2:-0}")
    [ "$1" = host ] && flags+=(--set training.device_data_mb=0)
    name="lenet-b$batch-$1${2:-}"
    run "$name" 300 "$bin/cubenet" train --backend cuda --config configs/lenet.toml \
      --data-dir "$bin/mnist" --epochs 3 --batch-size "$batch" "${flags[@]}" \
      --artifact-dir "$work/$name"
    echo "   $(grep -h 'training speed\|test accuracy' "$logs/$name.md" | tr '\n' ' ')"
  done
done

# The bare step at the same batches, and the CIFAR-shaped network at batch 512: its step,
# and burn-train's training speed on generated images (`--devices 0`, second epoch timed).
run step 300 "$bin/cubenet" bench --variants cuda-cubenet --models lenet --batches "$batches" \
  --no-phases --repeats 50 --out "$work/bench"
grep -h "lenet" "$work/bench/results.md" | head -20
run cifar-step 300 "$bin/cubenet" bench --variants cuda-cubenet --models cifar --batches 512 \
  --no-phases --repeats 50 --out "$work/cifar-step"
run cifar-train 300 "$bin/cubenet" bench --variants cuda-cubenet --models cifar --batches 512 \
  --devices 0 --scaling-steps 60 --out "$work/cifar-train"
grep -h "cifar" "$work/cifar-step/results.md" "$work/cifar-train/results.md" | head -20

# PyTorch: DataLoader loop and data on the GPU.
PYTHONUNBUFFERED=1 python3 bench/pytorch_training_loop.py --data-dir "$bin/mnist" \
  --batches "$batches" 2>&1 | grep -v Warning | tee "$logs/pytorch-loop.md"
PYTHONUNBUFFERED=1 python3 bench/pytorch_training_loop.py --model cifar --batches 512 \
  2>&1 | grep -v Warning | tee -a "$logs/pytorch-loop.md"
