#!/usr/bin/env bash
# The GPU measurements and checks, on a machine with an NVIDIA GPU and no Rust toolchain, in
# stages that each fit a 10-minute device call. Build here with --all-features (cubenet, the
# examples mnist_cnn, kernel_bench and mnist_speedrun, the kernels crate's test binary `kernels`),
# then pack the binaries into .device-bin/ (see scripts/device_bin.sh), with MNIST's IDX
# files in .device-bin/mnist; for `ab`, also a previous build's cubenet as
# .device-bin/cubenet-base. Then, on the GPU machine, with $OUT for the results:
#   scripts/gpu_stages.sh check     # kernel equivalence tests on CUDA (KERNEL_TESTS picks
#                                   # some, e.g. the conv family: see below; default all;
#                                   # CHECK_LIMIT seconds, default 540; TEST_THREADS, 6;
#                                   # RANDOM_CASES per convolution and max-pool check, 60)
#   scripts/gpu_stages.sh bench     # kernel microbenchmarks: each op, cubenet's vs Burn's
#   scripts/gpu_stages.sh quality   # the MNIST quality bars: mnist_cnn, single-conv CNN
#                                   # (3 epochs) and LeNet (10 epochs), on cubenet's kernels
#   scripts/gpu_stages.sh ab        # LeNet and CIFAR steps, the previous build and this one
#                                   # alternated twice (AB_VARIANTS, AB_BATCHES)
#   scripts/gpu_stages.sh profile   # Nsight Compute, time and registers per kernel
#                                   # (PROFILE_VARIANT: cubenet's variant, default
#                                   # cuda-cubenet; e.g. cuda-cubenet-bf16)
#   scripts/gpu_stages.sh table     # the GPU-speed targets' table: cubenet and PyTorch in
#                                   # one call
#   scripts/gpu_stages.sh blocks    # the CIFAR-shaped blocks and the GEMM floor, cubenet
#                                   # and PyTorch; the speedrun, cubenet and PyTorch
#   scripts/gpu_stages.sh export    # LeNet trained on CUDA, exported, its test accuracy in
#                                   # cubenet and in PyTorch from the export
#   scripts/gpu_stages.sh precision # training in fp32, tf32 and bf16: LeNet's test accuracy,
#                                   # the CIFAR-shaped network's loss curve
# Several stages in one call: scripts/gpu_stages.sh check ab profile. A stage whose binary
# was not packed is skipped with a line saying so.
# The conv family's kernel tests (what the implicit-GEMM work checked before each timing):
#   KERNEL_TESTS="conv2d_matches_burn conv_relu_pool_matches_burn conv_relu_pool_gradients
#     max_pool tf32 bf16" scripts/gpu_stages.sh check
# Logs go to $OUT/logs (tarred into $OUT/logs.tgz at the end: a device call returns 8 files).
set -uo pipefail
out=${OUT:-gpu-out}
logs=$out/logs
mkdir -p "$logs"
source scripts/device_bin.sh
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.sm,clocks.max.sm \
  --format=csv,noheader | tee -a "$logs/gpu.txt"
export CUBECL_AUTOTUNE_LEVEL=minimal
# The LeNet and CIFAR-shaped step timings of the ab and table stages.
steps="--no-phases --repeats 50 --models lenet,cifar"

# has NAME...: whether every named binary was packed (else says which stage it skips).
has() {
  local name
  for name in "$@"; do
    if [ ! -x "$bin/$name" ]; then
      echo "== $stage: skipped, $bin/$name was not packed"
      return 1
    fi
  done
}

# epoch_losses DIR: each epoch's mean training and validation loss of the run in DIR.
epoch_losses() {
  python3 - "$1" <<'PY'
import glob, os, sys
def mean(path):
    pairs = [line.split(",") for line in open(path) if line.strip()]
    return sum(float(v) * int(n) for v, n in pairs) / sum(int(n) for _, n in pairs)
for split in ("train", "valid"):
    epochs = sorted(glob.glob(os.path.join(sys.argv[1], split, "epoch-*")),
                    key=lambda d: int(d.rsplit("-", 1)[1]))
    print(f"   {split} loss:", " ".join(f"{mean(os.path.join(d, 'Loss.log')):.4f}" for d in epochs))
PY
}

for stage in "${@:?usage: $0 check|bench|quality|ab|profile|table|blocks|export|precision ...}"; do
  case $stage in
    check)
      has kernels || continue
      # Minutes: every case compiles its own kernels (NVRTC).
      CUBENET_REQUIRE_CUDA=1 CUBENET_CUDA_RANDOM_CASES="${RANDOM_CASES:-60}" \
        run kernel-tests "${CHECK_LIMIT:-540}" "$bin/kernels" \
        ${KERNEL_TESTS:-} --test-threads "${TEST_THREADS:-6}" --nocapture
      grep -hE 'cases passed|test result|FAILED|mismatch|NaN|panicked|skipping' \
        "$logs"/kernel-tests.*
      ;;
    bench)
      has kernel_bench || continue
      run kernel-bench 540 "$bin/kernel_bench" --backend cuda --json "$logs/kernel-bench.json"
      cat "$logs/kernel-bench.md"
      ;;
    quality)
      has mnist_cnn || continue
      for model in "simple --filters 32 --epochs 3" "lenet --epochs 10"; do
        name=${model%% *}
        run "mnist-$name" 480 /usr/bin/time -f "wall %e s" "$bin/mnist_cnn" --backend cuda \
          --model $model --data-dir "$bin/mnist" --artifact-dir "$logs/$name"
        tail -12 "$logs/mnist-$name.md"; tail -1 "$logs/mnist-$name.log"
        # Keep the report files (config, curves, confusion matrix), not the weights.
        rm -rf "$logs/$name/checkpoint" "$logs/$name/train" "$logs/$name/valid" \
          "$logs/$name/model.mpk"
      done
      ;;
    export)
      has cubenet || continue
      dir=/tmp/export-lenet
      run export-train 300 "$bin/cubenet" train --config configs/lenet.toml --backend cuda \
        --data-dir "$bin/mnist" --epochs 3 --artifact-dir $dir
      run export-write 60 "$bin/cubenet" export --model-dir $dir
      run export-eval-run 120 "$bin/cubenet" eval --model-dir $dir --data-dir "$bin/mnist"
      run export-eval-export 120 "$bin/cubenet" eval --model-dir $dir/export --backend cuda \
        --data-dir "$bin/mnist"
      run export-pytorch 120 python3 pytorch/exported_accuracy.py $dir/export/model.json \
        "$bin/mnist"
      tail -1 "$logs/export-train.md" "$logs/export-eval-run.md" "$logs/export-eval-export.md" \
        "$logs/export-pytorch.md"
      cat "$logs/export-write.md"
      ;;
    precision)
      has cubenet || continue
      # The same seed and data in each precision: LeNet 32/64 on MNIST, 3 epochs; the
      # CIFAR-shaped network on generated records whose classes can be learnt, 3 epochs.
      for precision in fp32 tf32 bf16; do
        run "lenet-$precision" 200 "$bin/cubenet" train --config configs/lenet.toml \
          --backend cuda --data-dir "$bin/mnist" --epochs 3 --set "model.precision=\"$precision\"" \
          --artifact-dir "/tmp/lenet-$precision"
        echo "   $(grep -h 'test accuracy' "$logs/lenet-$precision.md")"
        epoch_losses "/tmp/lenet-$precision"
      done
      python3 scripts/generated_cifar.py /tmp/cifar-learnable --learnable
      for precision in fp32 bf16; do
        run "cifar-$precision" 240 "$bin/cubenet" train --config configs/cifar_cnn.toml \
          --backend cuda --set data.dir=/tmp/cifar-learnable --epochs 3 \
          --set "model.precision=\"$precision\"" --artifact-dir "/tmp/cifar-$precision"
        echo "   $(grep -h 'test accuracy' "$logs/cifar-$precision.md")"
        epoch_losses "/tmp/cifar-$precision"
      done
      ;;
    ab)
      has cubenet cubenet-base || continue
      # The previous build (.device-bin/cubenet-base) and this one, alternated twice;
      # AB_VARIANTS picks cubenet's variants (default cuda-cubenet), AB_BATCHES the batches.
      for round in 1 2; do
        for build in base new; do
          exe=$bin/cubenet; [ $build = base ] && exe=$bin/cubenet-base
          run "ab-$build-$round" 150 "$exe" bench --variants "${AB_VARIANTS:-cuda-cubenet}" \
            $steps --batches "${AB_BATCHES:-100,128,250,500,512,1000}" --out /tmp/ab
          cat "$logs/ab-$build-$round.md"
        done
      done
      ;;
    profile)
      has cubenet || continue
      variant=${PROFILE_VARIANT:-cuda-cubenet}
      for point in "lenet --batches 1000" "cifar --batches 512" \
          "simple --batches 1000 --filters 256 --sweep-batches-at-filters 256 --sweep-filters-at-batch 1000"; do
        name=ncu-$(echo "$point" | cut -d' ' -f1)-$variant
        run "$name" 150 ncu --clock-control none \
          --metrics gpu__time_duration.sum,launch__registers_per_thread,launch__grid_size \
          --print-summary per-kernel "$bin/cubenet" bench --variants "$variant" --no-phases \
          --warmup 3 --repeats 5 --models $point --out /tmp/ncu
        grep -E 'conv|pool|dense|[0-9]+ kernels|gpu__time|registers' "$logs/$name.md" | head -80
      done
      ;;
    table)
      has cubenet || continue
      # The GPU-speed targets' points: the single-conv CNN at (d, batch) = (256, 100),
      # (256, 1000), (32, 1000); LeNet at 100, 250, 500, 1000; the CIFAR-shaped network at
      # 128, 512, 1000. cubenet runs before and after PyTorch (eager and torch.compile, fp32
      # with TF32 off).
      single="--models simple --batches 100,1000 --sweep-batches-at-filters 256 --filters 32 --sweep-filters-at-batch 1000"
      for i in 1 2; do
        [ $i = 2 ] && run table-pytorch 330 python3 pytorch/pytorch_reference.py --models simple,lenet,cifar \
          --batches 100,128,250,500,512,1000 --sweep-batches-at-filters 256 --filters 32 \
          --sweep-filters-at-batch 1000 --variants eager,compile --repeats 50 --no-epoch \
          --out "$logs/pytorch.json"
        run table-cubenet-single-conv-$i 90 "$bin/cubenet" bench --variants cuda-cubenet --no-phases --repeats 50 $single --out /tmp/s$i
        run table-cubenet-$i 90 "$bin/cubenet" bench --variants cuda-cubenet $steps \
          --batches 100,128,250,500,512,1000 --out /tmp/t$i
      done
      cat "$logs"/table-*.md
      ;;
    blocks)
      has kernel_bench mnist_speedrun || continue
      run blocks-cubenet 60 "$bin/kernel_bench" --backend cuda --cifar --batches 128,512 --repeats 50
      run blocks-pytorch 150 python3 pytorch/pytorch_reference.py --blocks --batches 128,512 \
        --variants eager,compile --repeats 50 --out "$logs/pytorch-blocks.json"
      run gemm-floor 90 python3 pytorch/gemm_floor.py --out "$logs/gemm-floor.json"
      run speedrun 60 "$bin/mnist_speedrun" --backend cuda --data-dir "$bin/mnist"
      run speedrun-pytorch 150 python3 pytorch/pytorch_speedrun.py --data-dir "$bin/mnist"
      cat "$logs"/blocks-*.md "$logs/gemm-floor.md"; tail -4 "$logs"/speedrun*.md
      ;;
    *) echo "unknown stage $stage (check, bench, quality, ab, profile, table, blocks or export)" >&2; exit 2 ;;
  esac
done
tar czf "$out/logs.tgz" -C "$out" logs
