#!/usr/bin/env bash
# The edit–test loop's build times on this tree: how long the README's test build takes after
# a one-line edit in each layer, `target/` warm, and (with --clean) from an empty `target/`.
#
# usage: scripts/build_loop.sh [--clean] [EDIT ...]
#   EDIT: any of the names below (default: all, top layer first). Each edit adds one comment line
#   at the top of its file (every line of the file moves, as a real edit above them would),
#   keeps it while the later edits are timed, and every touched file is restored on exit.
#   --clean   first times the build from an empty target/ (its `--timings` report is copied to
#             target/build-loop/); needs the crates downloaded (`cargo fetch`).
# Prints one line per build, then a Markdown table; the numbers go into docs/perf-log/.
set -euo pipefail
cd "$(dirname "$0")/.."

# The README's test command, built but not run; CUBENET_BUILD_PROFILE=loop times the edit
# loop's profile instead (docs/DEVELOPMENT.md).
build=(cargo test --profile "${CUBENET_BUILD_PROFILE:-release}" --workspace --no-run)

# name, file, what it stands for
edits=(
  "studio-asset crates/studio/src/assets/app.js a studio asset"
  "studio-route crates/studio/src/routes.rs a studio route"
  "cli-command src/cli/info.rs a CLI command"
  "run-file-key crates/run_file/src/sections.rs a run-file key"
  "training-module crates/engine/src/train/fit/epoch_lines.rs a training module"
  "model-layer crates/engine/src/model/pooling.rs a model layer"
  "data-reader crates/engine/src/data/idx.rs a data reader"
  "cubecl-kernel crates/kernels/src/kernels/pool.rs a CubeCL kernel"
  "cpu-kernel crates/kernels/src/cpu/pool.rs a CPU kernel"
)

clean=0
chosen=()
for arg in "$@"; do
  case "$arg" in
    --clean) clean=1 ;;
    -*) echo "unknown option $arg" >&2; exit 2 ;;
    *) chosen+=("$arg") ;;
  esac
done

backup=$(mktemp -d)
restore() {
  for path_file in "$backup"/*.path; do
    [ -e "$path_file" ] || continue
    cp -p "${path_file%.path}" "$(cat "$path_file")"
  done
  rm -rf "$backup"
}
trap restore EXIT

timed_build() {
  local start=$SECONDS
  "${build[@]}" "$@" >"$backup/log" 2>&1 || { cat "$backup/log" >&2; exit 1; }
  echo $((SECONDS - start))
}

rows=()
if [ $clean = 1 ]; then
  rm -rf "target/${CUBENET_BUILD_PROFILE:-release}"
  seconds=$(timed_build --timings)
  mkdir -p target/build-loop
  cp target/cargo-timings/cargo-timing.html target/build-loop/clean-build-timing.html
  echo "clean build: ${seconds} s"
  rows+=("| the README's test build from an empty target/ | ${seconds} s |")
else
  echo "bringing target/ up to date first (not timed)"
  timed_build >/dev/null
fi

for entry in "${edits[@]}"; do
  read -r name file what <<<"$entry"
  what=${entry#"$name $file "}
  if [ ${#chosen[@]} -gt 0 ] && [[ ! " ${chosen[*]} " == *" $name "* ]]; then
    continue
  fi
  key=$(echo "$file" | tr '/' '_')
  cp -p "$file" "$backup/$key"
  echo "$file" >"$backup/$key.path"
  comment="//"
  sed -i "1i $comment build-loop probe: $name" "$file"
  seconds=$(timed_build)
  echo "$what ($file): ${seconds} s"
  rows+=("| $what (\`$file\`) | ${seconds} s |")
done

echo
echo "| one-line edit, then \`${build[*]}\` | time |"
echo "|---|---|"
printf '%s\n' "${rows[@]}"
