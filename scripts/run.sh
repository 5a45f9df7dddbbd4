#!/usr/bin/env bash
# Runs the daemon from source: `scripts/run.sh [headunitd options]`
# (for example `scripts/run.sh --help`). Installs what it needs first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh >&2
exec swift run headunitd "$@"
