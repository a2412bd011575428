#!/usr/bin/env bash
# Training throughput where users see it, on a GPU machine without a Rust toolchain: real
# `cubenet train` runs (data on the device, then streamed from the host with 0 and 4 workers)
# beside the bare step (`cubenet bench`) and PyTorch's training loops, in one call.
# Build `cubenet` here with --all-features first, then pack the binaries into .device-bin/
# (see scripts/device_bin.sh), with MNIST's IDX files in .device-bin/mnist. Logs go to $OUT
# (default ./gpu-out); BATCHES sets LeNet's batch sizes (default 64,256,1024), EPOCHS the real
# runs' length (default 3; the first is not timed), PLACEMENTS where
# batches are built (default "device host0 host4"), BUILDS the packed cubenet builds to run
# one after the other (default "cubenet"; "cubenet-base cubenet" for an A/B of two builds),
# STAGES what to run (default "lenet step cifar pytorch"; also "design-card": the mnist_cnn
# example's defaults on CUDA, timed whole, with CubeCL's caches cold and warm; and
# "ddp": the data-parallel build, packed as .device-bin/cubenet-ddp, on 1, 2 and 4 GPUs;
# "processes": the data-parallel run against as many independent one-GPU runs at once;
# "timeline": the host and device timelines of real runs and of PyTorch's loop).
set -uo pipefail
logs=${OUT:-gpu-out}
mkdir -p "$logs"
source scripts/device_bin.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | tee "$logs/gpu.txt"
batches=${BATCHES:-64,256,1024}
epochs=${EPOCHS:-3}
work=$(mktemp -d)

placements=${PLACEMENTS:-device host0 host4}
builds=${BUILDS:-cubenet}
stages=" ${STAGES:-lenet step cifar pytorch} "
wants() { [[ $stages == *" $1 "* ]]; }

# The training speed line of each real run: LeNet 32/64 on MNIST, EPOCHS epochs (default 3;
# all but the first timed).
wants lenet && for batch in ${batches//,/ }; do
  for placement in $placements; do
    case $placement in
      device) flags=(--set training.workers=0) ;;
      host*) flags=(--set training.device_data_mb=0 --set "training.workers=${placement#host}") ;;
    esac
    for build in $builds; do
      name="lenet-b$batch-$placement-$build"
      run "$name" 300 "$bin/$build" train --backend cuda --config configs/lenet.toml \
        --data-dir "$bin/mnist" --epochs "$epochs" --batch-size "$batch" "${flags[@]}" \
        --artifact-dir "$work/$name"
      echo "   $(grep -h 'training speed\|test accuracy' "$logs/$name.md" | tr '\n' ' ')"
    done
  done
done

# The design card: `cargo run --release --example mnist_cnn --features cuda` with its
# defaults, the whole command timed: with both of CubeCL's caches cold, then both warm, then
# with the autotune cache warm (in target/) and the compiled kernels' cache (in the user's
# cache directory, src/device/kernel_cache.rs) empty again, as every run was before cubenet kept it.
wants design-card && {
  kernels=$(mktemp -d)
  for attempt in cold warm compiled-kernels-cold; do
    [ "$attempt" = compiled-kernels-cold ] && kernels=$(mktemp -d)
    start=$(date +%s%N)
    XDG_CACHE_HOME=$kernels run "design-card-$attempt" 300 "$bin/mnist_cnn" --backend cuda \
      --data-dir "$bin/mnist" --artifact-dir "$work/design-card-$attempt"
    echo "   $(( ($(date +%s%N) - start) / 1000000 )) ms: $(tail -1 "$logs/design-card-$attempt.md")"
  done
}

# The bare step at the same batches, and the CIFAR-shaped network at batch 512: its step,
# and burn-train's training speed on generated images (`--devices 0`, second epoch timed).
wants step && run step 300 "$bin/cubenet" bench --variants cuda-cubenet --models lenet --batches "$batches" \
  --no-phases --repeats 50 --out "$work/bench"
wants step && grep -A14 "lenet: milliseconds" "$work/bench/results.md"
wants cifar && run cifar-step 300 "$bin/cubenet" bench --variants cuda-cubenet --models cifar --batches 512 \
  --no-phases --repeats 50 --out "$work/cifar-step"
wants cifar && grep -h "cifar" "$work/cifar-step/results.md" | head -20
# The CIFAR-shaped network's real run (configs/cifar_cnn.toml: batch 512, flips and padded
# crops on the device) on generated CIFAR-10 records, EPOCHS epochs.
wants cifar && python3 scripts/generated_cifar.py "$work/cifar-records"
wants cifar && for build in $builds; do
  run "cifar-train-$build" 300 "$bin/$build" bench --variants cuda-cubenet --models cifar \
    --batches 512 --devices 0 --scaling-steps 60 --out "$work/cifar-train-$build"
  grep -h "cifar" "$work/cifar-train-$build/results.md" | head -20
  run "cifar-run-$build" 300 "$bin/$build" train --backend cuda --config configs/cifar_cnn.toml \
    --set "data.dir=$work/cifar-records" --set training.workers=0 --epochs "$epochs" \
    --artifact-dir "$work/cifar-run-$build"
  echo "   $(grep -h 'training speed' "$logs/cifar-run-$build.md")"
done

# PyTorch: DataLoader loop and data on the GPU.
wants pytorch && PYTHONUNBUFFERED=1 python3 pytorch/pytorch_training_loop.py --data-dir "$bin/mnist" \
  --batches "$batches" 2>&1 | grep -v Warning | tee "$logs/pytorch-loop.md"
wants pytorch && PYTHONUNBUFFERED=1 python3 pytorch/pytorch_training_loop.py --model cifar --batches 512 \
  2>&1 | grep -v Warning | tee -a "$logs/pytorch-loop.md"

# Where a real run's wall time goes (scripts/cuda_timeline): the host and device timeline of
# LeNet 32/64 at batch TIMELINE_BATCH (default 1024), the CIFAR-shaped network at 512 on
# generated records, and PyTorch's data-on-GPU loop for each, every run for 3 epochs; the
# reports in $logs/timeline-*.md, the traces for Perfetto in $logs/timeline-*.json.gz.
wants timeline && {
  timeline() {
    local name=$1; shift
    echo "== timeline $name: $*"
    python3 scripts/cuda_timeline/trace.py record "$work/$name.tsv" -- "$@" > "$logs/timeline-$name.log" 2>&1
    python3 scripts/cuda_timeline/trace.py report "$work/$name.tsv" --chrome "$work/$name.json" \
      --step-kernel 'cross_entropy_forward|nll_loss_forward' | tee "$logs/timeline-$name.md"
    gzip -c "$work/$name.json" > "$logs/timeline-$name.json.gz"
  }
  batch=${TIMELINE_BATCH:-1024}
  timeline "lenet-b$batch" "$bin/cubenet" train --backend cuda --config configs/lenet.toml \
    --data-dir "$bin/mnist" --epochs 3 --batch-size "$batch" --set training.workers=0 \
    --artifact-dir "$work/timeline-lenet"
  [ -d "$work/cifar-records" ] || python3 scripts/generated_cifar.py "$work/cifar-records"
  timeline cifar-b512 "$bin/cubenet" train --backend cuda --config configs/cifar_cnn.toml \
    --set "data.dir=$work/cifar-records" --set training.workers=0 --epochs 3 \
    --artifact-dir "$work/timeline-cifar"
  timeline "pytorch-lenet-b$batch" python3 pytorch/pytorch_training_loop.py --data-dir "$bin/mnist" \
    --loops on-gpu --batches "$batch"
  timeline pytorch-cifar-b512 python3 pytorch/pytorch_training_loop.py --model cifar --loops on-gpu \
    --batches 512
  grep -h "training speed\|test accuracy\|images/s" "$logs"/timeline-*.log
}

# lenet_ddp NAME SECONDS FLAGS...: the data-parallel build's LeNet 32/64 on MNIST, data on
# the device.
lenet_ddp() {
  local name=$1 limit=$2; shift 2
  run "$name" "$limit" "$bin/cubenet-ddp" train --backend cuda --config configs/lenet.toml \
    --data-dir "$bin/mnist" --set training.workers=0 --artifact-dir "$work/$name" "$@"
}
# summary NAME: a run's data-parallel, speed and accuracy lines, on one line.
summary() { echo "   $(grep -h 'data-parallel on\|training speed\|test accuracy' "$logs/$1.md" | tr '\n' ' ')"; }

# Data-parallel (the ddp/ build, burn-train's DDP with NCCL): LeNet 32/64 on MNIST at batch
# 256 per device on one GPU, then on 2 and 4 where the machine has them, each beside one GPU
# at the same global batch (the accuracy to match); a run whose training set does not split
# evenly, with early stopping after one epoch without improvement (it must end, not hang);
# a run resumed; the CIFAR-shaped network at 512 per device on 1, 2 and 4 GPUs, in real runs
# and in `cubenet bench --devices` (200-step epochs); PyTorch's DDP loop on the same GPUs.
wants ddp && {
  gpus=$(nvidia-smi -L | wc -l)
  sets=0
  (( gpus >= 2 )) && sets="$sets 0,1"
  (( gpus >= 4 )) && sets="$sets 0,1,2,3"
  for devices in $sets; do
    n=$(( $(tr -cd , <<< "$devices" | wc -c) + 1 ))
    lenet_ddp "lenet-b256x$n" 120 --epochs 3 --batch-size 256 --devices "$devices"
    summary "lenet-b256x$n"
    if (( n > 1 )); then
      lenet_ddp "lenet-b$((256 * n))x1" 120 --epochs 3 --batch-size $((256 * n)) --devices 0
      summary "lenet-b$((256 * n))x1"
    fi
  done
  lenet_ddp lenet-uneven-patience1 120 --batch-size 256 --devices "${sets##* }" \
    --set data.limit_train=33337 --epochs 8 --set training.patience=1
  summary lenet-uneven-patience1
  # Resume on several GPUs: a 2-epoch run continued to 3 epochs with --resume.
  lenet_ddp lenet-resumed 120 --epochs 2 --batch-size 256 --devices "${sets##* }"
  lenet_ddp lenet-resumed 120 --epochs 3 --batch-size 256 --devices "${sets##* }" --resume
  echo "   $(grep -h 'resum\|test accuracy' "$logs/lenet-resumed.md" | tr '\n' ' ')"
  # The CIFAR-shaped network (configs/cifar_cnn.toml) in real runs at batch 512 per GPU, on
  # generated CIFAR-10 records (random pixels and labels: the speed counts, not the accuracy).
  records=$work/cifar-records
  python3 scripts/generated_cifar.py "$records"
  for devices in $sets; do
    n=$(( $(tr -cd , <<< "$devices" | wc -c) + 1 ))
    run "cifar-b512x$n" 300 "$bin/cubenet-ddp" train --backend cuda --config configs/cifar_cnn.toml \
      --set "data.dir=$records" --set training.workers=0 --epochs 4 --devices "$devices" \
      --artifact-dir "$work/cifar-b512x$n"
    summary "cifar-b512x$n"
  done
  # PyTorch's data-parallel loop (a process per GPU, DistributedDataParallel), LeNet at 256 per GPU.
  for devices in $sets; do
    n=$(( $(tr -cd , <<< "$devices" | wc -c) + 1 ))
    torchrun --nproc-per-node "$n" pytorch/pytorch_training_loop.py --data-dir "$bin/mnist" \
      --loops on-gpu --batches 256 2>&1 | grep -v -i warn | tee "$logs/pytorch-ddp-x$n.md" | grep lenet
  done
  for devices in ${sets#0}; do
    run "cifar-ddp-$devices" 200 "$bin/cubenet-ddp" bench --variants cuda-cubenet --models cifar \
      --batches 512 --devices "$devices" --scaling-steps 200 --out "$work/cifar-ddp-$devices"
    grep -h -A8 "data-parallel\|Data-parallel" "$work/cifar-ddp-$devices/results.md" | head -30
  done
}

# The data-parallel run against its ceiling: LeNet 32/64 at batch 256 on one GPU alone, then
# on N GPUs as N separate one-GPU runs started together (no all-reduce: what the machine gives
# N independent runs), then as the data-parallel run on N GPUs, three rounds.
wants processes && {
  gpus=$(nvidia-smi -L | wc -l)
  lenet_3() { local name=$1; shift; lenet_ddp "$name" 120 --epochs 3 --batch-size 256 "$@" > /dev/null; }
  speed() { grep -ho '[0-9]* images/s' "$logs/$1.md" | head -1; }
  lenet_3 processes-warm --devices 0
  for round in 1 2 3; do
    lenet_3 "alone-$round" --devices 0
    echo "== round $round, one GPU alone: $(speed "alone-$round")"
    for n in 2 4; do
      (( n > gpus )) && continue
      for gpu in $(seq 0 $((n - 1))); do lenet_3 "separate$n-$round-$gpu" --devices "$gpu" & done
      wait
      line=""
      for gpu in $(seq 0 $((n - 1))); do line="$line $(speed "separate$n-$round-$gpu"),"; done
      echo "   $n separate runs:${line%,}"
      lenet_3 "parallel$n-$round" --devices "$(seq -s, 0 $((n - 1)))"
      echo "   the data-parallel run on $n GPUs: $(speed "parallel$n-$round")"
    done
  done
}
