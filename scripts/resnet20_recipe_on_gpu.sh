#!/usr/bin/env bash
# ResNet-20 with configs/resnet20.toml's recipe (SGD, momentum 0.9, weight decay 5e-4, cosine,
# batch 128, flips and crops) on generated learnable CIFAR-format records, in one call on a
# GPU machine: `cubenet train` on CUDA in fp32, TF32 and bf16, and pytorch/resnet20_recipe.py in
# PyTorch's default settings (TF32 convolutions) and its fastest (channels-last, bf16
# autocast, torch.compile). Each prints its seconds per epoch and its test accuracy.
# Build `cubenet` here with --all-features and pack it into .device-bin/ first (see
# scripts/device_bin.sh). EPOCHS sets the runs' length (default 5); logs go to $OUT.
set -uo pipefail
logs=${OUT:-gpu-out}
mkdir -p "$logs"
source scripts/device_bin.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/gpu.txt"
epochs=${EPOCHS:-5}
data=$(mktemp -d)
python3 scripts/generated_cifar.py "$data" --learnable
for precision in fp32 tf32 bf16; do
  echo "== cubenet, $precision"
  .device-bin/cubenet train --config configs/resnet20.toml --backend cuda \
    --set "data.dir=\"$data\"" --set "model.precision=\"$precision\"" --epochs "$epochs" \
    --artifact-dir "$(mktemp -d)/run" 2>&1 | grep -vE '^\s*$' | tee "$logs/cubenet-$precision.txt" \
    | grep -E 'epoch|images/s|test accuracy|error' | tail -n 12
done
for setting in default fastest; do
  echo "== PyTorch, $setting"
  flags=(); [ "$setting" = fastest ] && flags=(--channels-last --bf16 --compile)
  python3 pytorch/resnet20_recipe.py "$data" --epochs "$epochs" "${flags[@]}" 2>&1 \
    | grep -vE 'Warning|warn' | tee "$logs/pytorch-$setting.txt" | tail -n $((epochs + 2))
done
