#!/usr/bin/env bash
# The daemon's CPU cost per push/pop pair as a noise-free count: instructions
# (valgrind --tool=callgrind) executed by headunitd for N requests minus the
# same run with none, divided by the N/2 push/pop pairs. Judges a change on a
# noisy shared machine, where timings cannot.
#   scripts/callgrind-pushpop.sh [REQUESTS]     (default 2000; release build)
set -euo pipefail
cd "$(dirname "$0")/.."
requests="${1:-2000}"
command -v valgrind >/dev/null || apt-get install -y valgrind >/dev/null
swift build -c release --product headunitd >/dev/null
swift build -c release --product HeadUnitBench >/dev/null
bin="$(swift build -c release --show-bin-path)"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT

instructions() {  # instructions N -> total Ir of the daemon for N measured requests
  local n="$1" file="$out/callgrind.$1"
  "$bin/HeadUnitBench" --spawn "$(command -v valgrind)" --no-floor --requests "$n" --warmup 200 --seconds 0 \
    --daemon-arg=--tool=callgrind --daemon-arg=--callgrind-out-file="$file" \
    --daemon-arg="$bin/headunitd" --daemon-arg=--unix-socket --daemon-arg='{socket}' \
    --daemon-arg=--no-tcp --daemon-arg=--config --daemon-arg='{config}' >/dev/null
  sed -n 's/^summary: \([0-9]*\).*/\1/p' "$file"
}

base=$(instructions 0)
run=$(instructions "$requests")
pairs=$((requests / 2))
echo "headunitd instructions: ${base} (setup, 200 warm-up requests, 0 measured), ${run} (${requests} more)"
echo "per push/pop pair: $(( (run - base) / pairs )) instructions (12-item list; one HMI)"
