#!/bin/sh
# Builds and runs scripts/splice-ceiling.c: bare socket pair vs a read/write
# relay vs a splice relay, same bytes, same run (issue 25, item 6).
# Arguments go to the program: -g GiB each way, -r rounds, -p pipe KiB,
# -t relay threads, -m modes, -f payload KiB, -v (check every byte).
set -e
dir=$(cd "$(dirname "$0")" && pwd)
out=${TMPDIR:-/tmp}/splice-ceiling
cc -O2 -Wall -pthread -o "$out" "$dir/splice-ceiling.c"
echo "$(uname -r), $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
"$out" "$@"
echo "load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
