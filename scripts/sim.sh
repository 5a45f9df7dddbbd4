#!/usr/bin/env bash
# A car in the browser, from a fresh clone: builds, starts headunitd (unless
# one already answers on the socket) and the web simulator, and prints the
# URL. Ctrl-C stops both. Bring a phone from another terminal, e.g.
#   swift run headunitctl play --without-hmi Tests/Simulator/scenario.json
# Arguments go to headunit-sim (--port N, default 7480; --host ADDR).
# HEADUNIT_SOCKET=PATH uses that Unix socket (default: headunitd's default);
# HEADUNIT_DAEMON_ARGS adds headunitd options (e.g. "--tcp 127.0.0.1:0").
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
for product in headunitd headunitctl headunit-sim; do swift build --product "$product" >&2; done
bin="$(swift build --show-bin-path)"
socket=()
if [ -n "${HEADUNIT_SOCKET:-}" ]; then socket=(--unix-socket "$HEADUNIT_SOCKET"); fi
if "$bin/headunitctl" status "${socket[@]}" >/dev/null 2>&1; then
  echo "sim: using the headunitd already running" >&2
else
  # shellcheck disable=SC2086 # HEADUNIT_DAEMON_ARGS is a list of options
  "$bin/headunitd" "${socket[@]}" ${HEADUNIT_DAEMON_ARGS:-} &
  daemon=$!
  trap 'kill "$daemon" 2>/dev/null || true' EXIT
  for _ in $(seq 100); do "$bin/headunitctl" status "${socket[@]}" >/dev/null 2>&1 && break; sleep 0.1; done
fi
echo "sim: a phone that waits for your clicks: $bin/headunitctl play --without-hmi ${socket[*]} Tests/Simulator/scenario.json" >&2
"$bin/headunit-sim" "${socket[@]}" "$@"
