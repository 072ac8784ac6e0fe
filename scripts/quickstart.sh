#!/usr/bin/env bash
# Quick start: install dependencies, build, and run the main job — a 4-rank
# all-reduce benchmark (4 processes on this machine, host mode) with result
# checking. Extra arguments are passed to all_reduce_perf.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
export CHORUS_MODE="${CHORUS_MODE:-host}"
exec "$root/build/bin/chorusrun" -n 4 -- "$root/build/bin/all_reduce_perf" -b 8 -e 64M -f 4 -c 1 "$@"
