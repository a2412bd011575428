# Sourced by the scripts that run on a GPU machine without a Rust toolchain
# (scripts/gpu_stages.sh, scripts/backend_bench_on_gpu.sh, scripts/training_speed_on_gpu.sh,
# scripts/resnet20_recipe_on_gpu.sh).
#
# The packed layout: build the release binaries here, then put them in .device-bin/ at the
# repository root (it is git-ignored), each named after its Cargo target and compressed with
# gzip (or xz, where the 64 MiB a device call carries needs it):
#   .device-bin/cubenet          the `cubenet` command (cargo build --release --bin cubenet)
#   .device-bin/mnist_cnn, kernel_bench, mnist_speedrun   the examples of those names
#   .device-bin/kernels          the kernels crate's test binary (cargo test --release -p
#                                cubenet-kernels --test kernels --no-run; the file Cargo prints)
#   .device-bin/cubenet-base     a previous build's cubenet (gpu_stages.sh ab)
#   .device-bin/mnist/           MNIST's four IDX files (raw or .gz)
# Each script says which of these it needs. This file unpacks the .gz and .xz binaries and
# defines `run`, one timed command with its output in $logs.
bin=.device-bin
for f in "$bin"/*.gz; do [ -e "$f" ] && gunzip -f "$f"; done
for f in "$bin"/*.xz; do [ -e "$f" ] && xz -d -f "$f"; done
chmod +x "$bin"/* 2>/dev/null

# run NAME SECONDS COMMAND...: stdout to $logs/NAME.md, stderr to $logs/NAME.log.
run() {
  local name=$1 limit=$2; shift 2
  echo "== $name: $*"
  local start=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.md" 2> "$logs/$name.log"
  echo "   exit $? after $((SECONDS - start)) s"
}
