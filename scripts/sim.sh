#!/usr/bin/env bash
# A car in the browser, from a fresh clone: builds, starts headunitd (unless
# one is already listening on the socket) and the web simulator, and prints
# the URL. Ctrl-C stops both. A phone then comes from another terminal:
#   swift run headunitctl play scenarios/quickstart.json --without-hmi
# Options: --port N (default 7480) and any other headunit-sim option.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
swift build --product headunitd --product headunitctl --product headunit-sim >&2
bin="$(swift build --show-bin-path)"
socket="${HEADUNIT_SOCKET:-}"
daemon=()
if [ -z "$socket" ]; then
  if "$bin/headunitctl" status >/dev/null 2>&1; then
    echo "sim: using the headunitd already running" >&2
  else
    "$bin/headunitd" &
    daemon=($!)
    trap 'kill "${daemon[@]}" 2>/dev/null || true' EXIT
    for _ in $(seq 100); do "$bin/headunitctl" status >/dev/null 2>&1 && break; sleep 0.1; done
  fi
else
  set -- --unix-socket "$socket" "$@"
fi
echo "sim: play a phone with: $bin/headunitctl play --without-hmi scenarios/quickstart.json" >&2
"$bin/headunit-sim" "$@"
