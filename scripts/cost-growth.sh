#!/usr/bin/env bash
# How the daemon's cost grows (BENCHMARKS.md, "How cost grows"; issue 30,
# items 3 and 5): the benchmark once per list size, HMI count and
# idle-connection count, each against the floor in the same run, then the
# metadata stream to 2/10/100 cluster subscribers and screens to 2/10 HMIs
# (paced app, subscribers lean in a process of their own), then 1/16/128
# External Accessory sessions at once (lean client, 3 GiB each way in all,
# 512 KiB windows); one
# line per row. Release build; both cores kept awake (`nice -n 19` busy
# loops) for the whole script, as latency needs on this machine.
#   scripts/cost-growth.sh                 (release build in .build-release)
#   BIN_DIR=/some/dir scripts/cost-growth.sh
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -n "${BIN_DIR:-}" ]; then
  bin="$BIN_DIR"
else
  swift build -c release --scratch-path .build-release --product headunitd >/dev/null
  swift build -c release --scratch-path .build-release --product HeadUnitBench >/dev/null
  bin="$(swift build -c release --scratch-path .build-release --show-bin-path)"
fi
ulimit -n 65536 2>/dev/null || true
out="$(mktemp -d)"
busy=()
for _ in 1 2; do nice -n 19 sh -c 'while :; do :; done' & busy+=($!); done
trap 'kill "${busy[@]}" 2>/dev/null; rm -rf "$out"' EXIT

field() {  # field FILE 'label' -> the value column of the first line starting with label
  sed -n "s/^$2  *//p" "$1" | head -1
}
lastfield() {  # the same, of the last such line (the lean table repeats some labels of the SDK's)
  sed -n "s/^$2  *//p" "$1" | tail -1
}

echo "| case | lean RTT p50 floor / daemon / ratio | lean server CPU per push/pop | lean pipelined msgs/s | SDK RTT p50 | daemon RSS with its peers |"
echo "|---|---|---|---|---|---|"
row() {  # row LABEL ARGS...
  local label="$1"; shift
  local file="$out/run"
  "$bin/HeadUnitBench" --spawn "$bin/headunitd" --transport unix --seconds 3 --requests 5000 --warmup 500 "$@" > "$file" 2>&1 || { echo "| $label | failed: $(grep -m1 -i error "$file") | | | | |"; return; }
  echo "| $label | $(field "$file" 'RTT p50 (push\/pop, [0-9]* items)') | $(field "$file" 'server CPU per push\/pop request') | $(lastfield "$file" 'pipelined msgs\/s (64 in flight)') | $(field "$file" 'RTT p50 (push\/pop of a [0-9]*-item list)') | $(sed -n 's/^daemon RSS with phone.* idle  *//p' "$file") |"
}
for items in 1 12 100 1000; do row "$items-item list, 1 HMI" --items "$items"; done
for hmis in 4 16; do row "12 items, $hmis HMIs" --hmis "$hmis"; done
for idle in 100 1000 10000; do row "12 items, $idle idle connections" --idle-connections "$idle"; done

echo
echo "| cluster subscribers (1 of them stalled; lean, own process), app at 100 updates/s | latency p50 | p99 | p999 | daemon CPU per update |"
echo "|---|---|---|---|---|"
for subscribers in 2 10 100; do
  file="$out/cluster"
  "$bin/HeadUnitBench" --spawn "$bin/headunitd" --cluster-subscribers "$subscribers" --cluster-seconds 10 --cluster-hz 100 --cluster-subscribers-apart > "$file" 2>&1 || { echo "| $subscribers | failed: $(grep -m1 -i error "$file") | | | |"; continue; }
  echo "| $subscribers | $(field "$file" 'latency update -> receipt p50') | $(field "$file" 'latency p99' | sed 's/  (target.*//') | $(field "$file" 'latency p999') | $(field "$file" 'daemon CPU per update (fan-out included)') |"
done

echo
echo "| HMIs (1 of them stalled; lean, own process), app pushing and popping at 100 changes/s | latency p50 | p99 | p999 | daemon CPU per change |"
echo "|---|---|---|---|---|"
for hmis in 2 10; do
  file="$out/screens"
  "$bin/HeadUnitBench" --spawn "$bin/headunitd" --screen-hmis "$hmis" --cluster-seconds 10 > "$file" 2>&1 || { echo "| $hmis | failed: $(grep -m1 -i error "$file") | | | |"; continue; }
  echo "| $hmis | $(field "$file" 'latency push -> screen p50') | $(field "$file" 'latency p99' | sed 's/  (target.*//') | $(field "$file" 'latency p999') | $(field "$file" 'daemon CPU per change (fan-out included)') |"
done

echo
echo "| External Accessory sessions at once (lean; 3 GiB each way in all, 64 KiB frames, 512 KiB windows) | bytes intact | aggregate, each way | per session, slowest / fastest | daemon CPU | other session's echo p50 / p99 | daemon RSS pre-open / open / max / after |"
echo "|---|---|---|---|---|---|---|"
for sessions in 1 16 128; do
  file="$out/sessions"
  "$bin/HeadUnitBench" --spawn "$bin/headunitd" --accessory-lean-mib 3072 --accessory-sessions "$sessions" --accessory-window-kib 512 \
    --no-floor --no-lean --requests 1000 --warmup 100 --seconds 0.5 > "$file" 2>&1 || { echo "| $sessions | failed: $(grep -m1 -i error "$file" | cut -c1-300) | | | | | |"; continue; }
  echo "| $sessions | $(field "$file" 'bytes intact (memcmp both ends)') | $(field "$file" 'aggregate throughput, each way') | $(field "$file" 'per session, slowest \/ fastest') | $(lastfield "$file" 'daemon CPU') | $(field "$file" 'second session RTT p50 during it' | sed 's/ (.*//') / $(field "$file" 'second session RTT p99 during it') | $(field "$file" 'daemon RSS pre-open \/ open \/ max \/ after') |"
done
