#!/usr/bin/env bash
# The device check: on a machine with one GPU, build Chorus with its CUDA
# kernels, run the GPU tests, measure the kernels, and run the collective
# benchmarks with several ranks on that GPU. Everything is logged under OUT.
#
#   tests/gpu/device_check.sh OUT [BUILD_DIR]
#
# Designed to finish in well under 6 minutes on an H200 (16 cores): the build
# uses every core, each step has its own timeout, and a step that cannot run
# says SKIPPED with the reason instead of failing the rest.
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out=${1:?usage: device_check.sh OUT [BUILD_DIR]}
build=${2:-$root/build-gpu}
mkdir -p "$out"
summary="$out/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
step() {  # step NAME TIMEOUT_S cmd...: runs cmd, logs to OUT/NAME.log, records the outcome
  local name=$1 tmo=$2
  shift 2
  local t0=$SECONDS rc=0
  timeout "$tmo" "$@" >"$out/$name.log" 2>&1 || rc=$?
  note "$(printf '%-40s rc=%-3s %4ss' "$name" "$rc" "$((SECONDS - t0))")"
  return "$rc"
}

note "device check $(date -u +%FT%TZ) on $(hostname)"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>&1 | tee -a "$summary"
nproc | sed 's/^/cores: /' | tee -a "$summary"

step configure 120 cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHORUS_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DCHORUS_KERNEL_FILTER=all -DCHORUS_WERROR=ON || { note "configure failed"; exit 1; }
step build 300 ninja -C "$build" || { tail -n 40 "$out/build.log"; note "build failed"; exit 1; }

# GPU tests: the kernels' correctness (bit-identical to the host loops),
# both protocols, abort and timeout.
step gpu-tests 180 ctest --test-dir "$build" -L gpu --output-on-failure --timeout 120
grep -E "tests passed|Skipped|Failed" "$out/gpu-tests.log" | tail -n 5 | tee -a "$summary"

# Reduction kernel vs device-to-device copy, 1 GiB.
step reduce-kernel-perf 120 "$build/bin/reduce_kernel_perf" -b $((1 << 30)) -n 20 -w 5
cat "$out/reduce-kernel-perf.log" | tee -a "$summary"

# The lane kernel's protocols: launch latency and bandwidth of a 2-lane reduce.
step lane-kernel-perf 120 "$build/bin/lane_kernel_perf" -n 20 -w 5
cat "$out/lane-kernel-perf.log" | tee -a "$summary"

# Collectives on the GPU with several ranks per GPU (threads of one process).
# They need the GPU executor; probe it first and say plainly if it is absent.
probe_rc=0
CHORUS_MODE=gpu timeout 60 "$build/bin/all_reduce_perf" -t 1 -b 8 -e 8 -n 1 -w 0 >"$out/gpu-mode-probe.log" 2>&1 ||
  probe_rc=$?
if [ "$probe_rc" -ne 0 ]; then
  note "SKIPPED: collective benchmarks on the GPU: this build cannot run collectives in GPU mode:"
  grep -m1 -iE "gpu|cuda" "$out/gpu-mode-probe.log" | tee -a "$summary"
else
  for coll in all_reduce all_gather reduce_scatter sendrecv; do
    for t in 2 4 8; do
      for dt in float half bfloat16; do
        CHORUS_MODE=gpu step "perf-$coll-t$t-$dt" 60 "$build/bin/${coll}_perf" -t "$t" -b 8 -e 1G -f 4 -c 1 -d "$dt"
      done
    done
  done
fi
note "done in ${SECONDS}s"
