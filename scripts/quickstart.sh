#!/usr/bin/env bash
# Quick start: install dependencies, build, and run the main job — a 4-rank
# all-reduce benchmark with result checking. Without a GPU: 4 processes on
# this machine in host mode. With GPUs (nvidia-smi lists one): GPU mode, one
# process with 4 rank threads spread over the GPUs (several ranks share a GPU
# when there are fewer than 4). CHORUS_MODE=host|gpu forces a mode. Extra
# arguments are passed to all_reduce_perf.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
"$root/scripts/build.sh" "$root/build"
mode="${CHORUS_MODE:-auto}"
if [ "$mode" = auto ]; then
  mode=host
  if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then mode=gpu; fi
fi
export CHORUS_MODE="$mode"
if [ "$mode" = gpu ]; then
  exec "$root/build/bin/all_reduce_perf" -t 4 -b 8 -e 256M -f 4 -c 1 "$@"
fi
exec "$root/build/bin/chorusrun" -n 4 -- "$root/build/bin/all_reduce_perf" -b 8 -e 64M -f 4 -c 1 "$@"
