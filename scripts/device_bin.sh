# Sourced by the scripts that run on a GPU machine without a Rust toolchain: unpacks the
# binaries pack-for-device left in .device-bin/ (gzip, or xz where the 64 MiB a call carries
# needed it) and defines `run`, one timed command with its output in $logs.
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
