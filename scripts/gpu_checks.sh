#!/usr/bin/env bash
# The GPU checks of the kernels and the MNIST quality bars, in one go, on a machine with an
# NVIDIA GPU and no Rust toolchain. Build and pack here first:
#   ../shared/tools/pack-for-device --with-mnist -- --all-features --example mnist_cnn --example kernel_bench
#   ../shared/tools/pack-for-device -- --all-features --workspace --tests   # then keep only kernels-*
# then run this with the packed binaries in .device-bin/ and logs going to $OUT (default ./gpu-out).
set -uo pipefail
out=${OUT:-gpu-out}
mkdir -p "$out"
source scripts/device_bin.sh
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"

step() { echo "== $*"; }
if [ -x "$bin/kernels" ]; then
  step "kernel equivalence tests on CUDA"
  CUBENET_REQUIRE_CUDA=1 "$bin/kernels" --test-threads 2 --nocapture 2>&1 \
    | grep -vE 'XDG_RUNTIME_DIR' | tee "$out/kernel-tests.log" | grep -E 'cases passed|test result|panicked|skipping'
fi
if [ -x "$bin/kernel_bench" ]; then
  step "kernel microbenchmarks"
  "$bin/kernel_bench" --backend cuda --json "$out/kernel-bench.json" 2>&1 | tee "$out/kernel-bench.log"
fi
if [ -x "$bin/mnist_cnn" ]; then
  for run in "simple --filters 32 --epochs 3" "lenet --epochs 10"; do
    name=${run%% *}
    step "mnist_cnn --model $run (custom kernels)"
    /usr/bin/time -f "wall %e s" "$bin/mnist_cnn" --backend cuda --model $run \
      --data-dir "$bin/mnist" --artifact-dir "$out/$name" 2>&1 | tee "$out/mnist-$name.log" | tail -12
    rm -rf "$out/$name/checkpoint" "$out/$name/train" "$out/$name/valid" "$out/$name/model.mpk"
  done
fi
