#!/usr/bin/env bash
# The web simulator in a real browser (.ci/run): headless Chromium driven by
# selenium clicks through Tests/Simulator/scenario.json against a fresh daemon,
# then banner_test.py's navigation banner (banner-scenario.json).
#   .ci/sim-test.sh BIN_DIR [sim_test.py options, e.g. --screenshots docs/simulator]
# Needs Debian's chromium and chromium-driver (scripts/setup.sh installs them
# in .ci/run) and selenium from PyPI (installed here when missing: system-wide,
# else into the ignored .build-sim-venv).
set -euo pipefail
cd "$(dirname "$0")/.."
bin="${1:?usage: sim-test.sh BIN_DIR}"
shift
python=python3
if ! "$python" -c 'import selenium' 2>/dev/null; then
  if ! "$python" -m pip install -q selenium 2>/dev/null && ! "$python" -m pip install -q --break-system-packages selenium 2>/dev/null; then
    # An externally managed Python without --break-system-packages: a venv of our own.
    [ -x .build-sim-venv/bin/python ] || "$python" -m venv .build-sim-venv
    .build-sim-venv/bin/python -m pip install -q selenium
    python=.build-sim-venv/bin/python
  fi
fi
for tool in chromium chromedriver; do
  command -v "$tool" >/dev/null || { echo "sim-test: $tool is missing (apt-get install chromium chromium-driver)" >&2; exit 1; }
done
"$python" Tests/Simulator/sim_test.py "$bin" "$@"
# Navigation banners over another app's screen (PROTOCOL.md 19.9): a page of its own.
"$python" Tests/Simulator/banner_test.py "$bin"
"$python" Tests/Simulator/assistant_test.py "$bin"
