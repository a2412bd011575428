#!/usr/bin/env bash
# The backend benchmark (`cubenet bench`: the same training step on every backend) on a GPU
# machine without a Rust toolchain, in stages that each fit a 10-minute device call
# (docs/benchmarks/ was measured this way). Build `cubenet` here with --all-features (and the
# mnist_speedrun example for `headline`), then pack the binaries into .device-bin/ (see
# scripts/device_bin.sh), with MNIST's IDX files in .device-bin/mnist. Then, on the GPU
# machine, with $OUT for the results:
#   scripts/backend_bench_on_gpu.sh cuda   # CUDA with cubenet's kernels
#   scripts/backend_bench_on_gpu.sh burn   # CUDA with Burn's kernels
#   scripts/backend_bench_on_gpu.sh torch  # PyTorch eager and torch.compile
#   scripts/backend_bench_on_gpu.sh cpu    # ndarray on all cores and on one thread, wgpu
#   scripts/backend_bench_on_gpu.sh headline  # the single-conv CNN and LeNet: cubenet and
#                                             # PyTorch eager in one call, then the MNIST speedrun
#   scripts/backend_bench_on_gpu.sh fastest   # cubenet fp32, TF32 and bf16 against PyTorch's
#                                             # fastest settings (TF32; bf16 autocast +
#                                             # channels_last)
# and merge everything into one set of tables and plots:
#   cargo run --release -- bench --merge-only --out docs/benchmarks \
#       $(for f in $OUT/*/results.json $OUT/pytorch-*.json; do echo --merge $f; done)
# Each invocation has its own time limit; one that runs out keeps the points it finished
# (`cubenet bench` rewrites results.json after every measurement).
# CubeCL autotunes Burn's kernels at the "minimal" level, to fit the device calls' time.
set -uo pipefail
stage=${1:?usage: $0 cuda|burn|torch|cpu|headline|fastest}
out=${OUT:-gpu-out}
logs=$out
mkdir -p "$out"
source scripts/device_bin.sh
mnist=$bin/mnist
bench() { local name=$1 limit=$2; shift 2; run "$name" "$limit" "$bin/cubenet" bench --out "$out/$name" "$@"; }
torch() { local name=$1 limit=$2; shift 2; run "$name" "$limit" python3 pytorch/pytorch_reference.py --out "$out/$name.json" "$@"; }

export CUBECL_AUTOTUNE_LEVEL=minimal
case $stage in
  cuda)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
    python3 -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda)' | tee "$out/torch.txt"
    # Most of a point's wall time is compiling its kernels (NVRTC), ~20 s a point.
    bench cuda-cubenet-simple 280 --variants cuda-cubenet --models simple --data-dir "$mnist"
    bench cuda-cubenet-lenet-mlp 230 --variants cuda-cubenet --models lenet,mlp --no-phases
    ;;
  burn)
    bench cuda-burn-simple 330 --variants cuda-burn --models simple --data-dir "$mnist"
    bench cuda-burn-lenet-mlp 220 --variants cuda-burn --models lenet,mlp --batches 100,1000 \
      --no-phases
    ;;
  torch)
    torch pytorch-eager 80 --variants eager --data-dir "$mnist"
    # torch.compile spends ~15 s compiling each point: the two ends of the filter sweep.
    torch pytorch-compile 80 --variants compile --models simple --batches 1000 \
      --filters 32,256 --no-epoch
    ;;
  cpu)
    bench ndarray 240 --variants ndarray --cpu-repeats 3
    # One thread: the single-conv CNN and the MLP (LeNet takes ~30 s a step there).
    bench ndarray-1thread 200 --variants ndarray-1thread --models simple,mlp --cpu-repeats 3
    pkill -x cubenet  # a single-thread child outliving its parent's time limit
    # wgpu needs the Vulkan loader and GL dispatch libraries (libvulkan1, libglvnd0, ...) and
    # VK_DRIVER_FILES pointing at the NVIDIA ICD (see the device notes).
    bench wgpu 100 --variants wgpu-cubenet,wgpu-burn --models simple --batches 1000 --filters 32,256 \
      --no-phases
    ;;
  headline)
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
    bench cuda-cubenet-simple 240 --variants cuda-cubenet --models simple --data-dir "$mnist"
    bench cuda-cubenet-lenet 90 --variants cuda-cubenet --models lenet --no-phases
    torch pytorch-eager-simple-lenet 90 --variants eager --models simple,lenet --data-dir "$mnist"
    # The speedrun's default schedule (LeNet 16/32, batch 128 x 2 epochs), the wider LeNet
    # that was the default until v9, and a single epoch of a LeNet 16/64 at batch 64.
    for schedule in "--channels 16 32 --lr 0.04" "--channels 32 64 --lr 0.05" \
      "--batch-size 64 --epochs 1 --channels 16 64 --lr 0.05"; do
      name=speedrun-$(echo "$schedule" | tr -d ' -')
      run "$name" 60 "$bin/mnist_speedrun" --data-dir "$mnist" $schedule
      cat "$out/$name.md"
    done
    ;;
  fastest)
    # The CIFAR-shaped network and LeNet at batch 512 and 1000, the single-conv CNN at d=256,
    # each in fp32, TF32, bf16 and PyTorch's bf16 autocast with channels_last, eager and
    # compiled.
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$out/gpu.txt"
    points="--models cifar,lenet,simple --batches 512,1000 --filters 256 --sweep-filters-at-batch 1000
      --sweep-batches-at-filters 256"
    torch pytorch-fastest-eager 100 --variants eager,eager-tf32,eager-bf16 $points --no-epoch
    bench cuda-cubenet-fastest 290 --variants cuda-cubenet,cuda-cubenet-tf32,cuda-cubenet-bf16 \
      $points --no-phases
    torch pytorch-fastest-compile 180 --variants compile-tf32,compile-bf16 $points --no-epoch
    "$bin/cubenet" bench --merge-only --out "$out/fastest" --merge "$out/cuda-cubenet-fastest/results.json" \
      --merge "$out/pytorch-fastest-eager.json" --merge "$out/pytorch-fastest-compile.json" > /dev/null
    cat "$out/fastest/results.md"
    ;;
  *) echo "unknown stage $stage (cuda, burn, torch, cpu, headline or fastest)" >&2; exit 2 ;;
esac
