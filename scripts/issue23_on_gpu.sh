#!/usr/bin/env bash
# Issue 23's measurements on a GPU machine without a Rust toolchain, in stages that each fit
# a 10-minute device call. Build and pack here:
#   ../shared/tools/pack-for-device --with-mnist -- --workspace --all-features \
#       --bin cubenet --example kernel_bench --example mnist_speedrun --test kernels
# (for `ab`, a previous build's cubenet packed as .device-bin/cubenet-base.gz; what must fit
# the 64 MiB a call carries can be recompressed with xz: .xz files are unpacked too), then
# on the GPU machine, with $OUT for the results:
#   scripts/issue23_on_gpu.sh check     # the conv-family kernel tests on CUDA
#   scripts/issue23_on_gpu.sh ab        # LeNet and CIFAR steps, the previous build then this one
#   scripts/issue23_on_gpu.sh profile   # Nsight Compute, time and registers per kernel
#   scripts/issue23_on_gpu.sh table     # issue 23's table: cubenet and PyTorch in one call
#   scripts/issue23_on_gpu.sh blocks    # the CIFAR-shaped blocks and the GEMM floor, cubenet
#                                       # and PyTorch; the speedrun, cubenet and PyTorch
# Logs go to $OUT/logs (tarred into $OUT/logs.tgz at the end: a device call returns 8 files).
set -uo pipefail
out=${OUT:-gpu-out}
logs=$out/logs
mkdir -p "$logs"
source scripts/device_bin.sh
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv,noheader \
  | tee -a "$logs/gpu.txt"
export CUBECL_AUTOTUNE_LEVEL=minimal
steps="--variants cuda-cubenet --no-phases --repeats 50 --models lenet,cifar"

for stage in "$@"; do
  case $stage in
    check)
      # Minutes: every case compiles its own kernels (NVRTC).
      CUBENET_REQUIRE_CUDA=1 run kernel-tests 480 "$bin/kernels" conv2d_matches_burn \
        conv_relu_pool_matches_burn conv_relu_pool_gradients max_pool tf32 --test-threads 6 --nocapture
      grep -hE 'cases passed|test result|FAILED|mismatch|NaN' "$logs"/kernel-tests.*
      ;;
    ab)
      # The previous build (.device-bin/cubenet-base) and this one, back to back.
      for build in base new; do
        exe=$bin/cubenet; [ $build = base ] && exe=$bin/cubenet-base
        run "ab-$build" 90 "$exe" bench $steps --batches 100,128,250,500,512,1000 --out /tmp/ab
        cat "$logs/ab-$build.md"
      done
      ;;
    profile)
      for point in "lenet --batches 1000" "cifar --batches 512" \
          "simple --batches 1000 --filters 256 --sweep-batches-at-filters 256 --sweep-filters-at-batch 1000"; do
        name=ncu-$(echo "$point" | cut -d' ' -f1)
        run "$name" 150 ncu --clock-control none \
          --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size \
          --print-summary per-kernel "$bin/cubenet" bench --variants cuda-cubenet --no-phases \
          --warmup 3 --repeats 5 --models $point --out /tmp/ncu
        grep -E 'conv|pool|dense|[0-9]+ kernels|gpu__time|registers' "$logs/$name.md" | head -80
      done
      ;;
    table)
      # Issue 23's points: the seed CNN at (d, batch) = (256, 100), (256, 1000), (32, 1000);
      # LeNet at 100, 250, 500, 1000; the CIFAR-shaped network at 128, 512, 1000. cubenet
      # runs before and after PyTorch (eager and torch.compile, fp32 with TF32 off).
      seed="--models simple --batches 100,1000 --sweep-batches-at-filters 256 --filters 32 --sweep-filters-at-batch 1000"
      for i in 1 2; do
        [ $i = 2 ] && run table-pytorch 330 python3 bench/pytorch_reference.py --models simple,lenet,cifar \
          --batches 100,128,250,500,512,1000 --sweep-batches-at-filters 256 --filters 32 \
          --sweep-filters-at-batch 1000 --variants eager,compile --repeats 50 --no-epoch \
          --out "$logs/pytorch.json"
        run table-cubenet-seed-$i 90 "$bin/cubenet" bench --variants cuda-cubenet --no-phases --repeats 50 $seed --out /tmp/s$i
        run table-cubenet-$i 90 "$bin/cubenet" bench $steps --batches 100,128,250,500,512,1000 --out /tmp/t$i
      done
      cat "$logs"/table-*.md
      ;;
    blocks)
      run blocks-cubenet 60 "$bin/kernel_bench" --backend cuda --cifar --batches 128,512 --repeats 50
      run blocks-pytorch 150 python3 bench/pytorch_reference.py --blocks --batches 128,512 \
        --variants eager,compile --repeats 50 --out "$logs/pytorch-blocks.json"
      run gemm-floor 90 python3 bench/gemm_floor.py --out "$logs/gemm-floor.json"
      run speedrun 60 "$bin/mnist_speedrun" --backend cuda --data-dir "$bin/mnist"
      run speedrun-pytorch 150 python3 bench/pytorch_speedrun.py --data-dir "$bin/mnist"
      cat "$logs"/blocks-*.md "$logs/gemm-floor.md"; tail -4 "$logs"/speedrun*.md
      ;;
    *) echo "unknown stage $stage (check, ab, profile, table or blocks)" >&2; exit 2 ;;
  esac
done
tar czf "$out/logs.tgz" -C "$out" logs
