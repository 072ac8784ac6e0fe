#!/usr/bin/env bash
# The device check: on a machine with one GPU, build Chorus with its CUDA
# kernels, run the GPU tests, measure the kernels, and run the collective
# benchmarks with several ranks on that GPU. Made for one call of at most
# 600 s on a rented machine from which only a few files come back.
#
#   tests/gpu/device_check.sh OUT [BUILD_DIR]
#
# Output: everything is written under a work folder (/tmp/dc.XXXXXX) and
# OUT receives exactly two files, refreshed as the check goes on (so a call
# cut short still returns what was done): OUT/summary.txt, one record line per
# step (PASS, FAIL, TIMEOUT or SKIPPED, the step's name, its seconds, its key
# number: bus bandwidth, latency, test counts) plus the kernel benchmark tables
# and the names of failed tests; and OUT/logs.tgz, every step's full log
# (<step>.log, configure.log, build.log). The record lines are printed again
# at the very end of stdout, where the caller's last 12 KB of output sees them.
#
# Preparing a session (the machine has no GoogleTest and no network): copy
# this machine's GoogleTest sources into the repository as an ignored folder
# and name it in the run's carry list:
#   mkdir -p .git/info && cp -r /usr/src/googletest .gtest && echo /.gtest/ >> .git/info/exclude
#   run(command="tests/gpu/device_check.sh $OUT", carry=[".gtest"], timeout_s=600)
# With .gtest present, configure gets -DCHORUS_GTEST_SOURCE_DIR=$root/.gtest
# (used only when no GoogleTest package is installed). If configure fails
# anyway, it is repeated with -DCHORUS_BUILD_TESTS=OFF and the check goes on
# without the GPU tests.
#
# Time: the whole script ends within DEVICE_CHECK_TOTAL_S (540 s) of its
# start. Configure has 120 s, the build (ninja -k 0: it keeps going, and a
# failed target only costs the steps that need it) DEVICE_CHECK_BUILD_TIMEOUT_S
# (330 s); the runs get min(DEVICE_CHECK_BUDGET_S (330 s), time left - 30 s),
# MPS start and stop included. Every run has its own timeout, none may
# outlast the budget; a run with under 20 s of the budget left is reported
# SKIPPED (budget), and one whose timeout the budget shortened and that is
# killed at it SKIPPED (budget: cut off), not TIMEOUT, and it marks nothing
# as hung. A run that fails or times out does not stop the others.
# SIGTERM, SIGINT and SIGHUP kill the running step (SIGKILL to what is left
# of it after 3 s) and end the check with the same finish (the two files in
# OUT, the records on stdout); only a short foreground command (nvidia-smi,
# tar, the MPS control: 20 s at most) delays them.
#
# Steps, most valuable first: configure and build; a probe of GPU mode
# (all_reduce_perf -t 2 -b 8 -e 1M -f 4: the collective benchmarks run only when
# it neither timed out nor failed to print its table); the GPU tests (the
# cheap kernel cases in one chorus_gpu_tests process with --gtest_filter, the
# failure-semantics cases (GpuFailure.*: mismatched calls, the stall line) in
# another, the rest through ctest -L gpu -j2: the spinning kernels of several
# CUDA contexts only time-slice without MPS); the device-to-device copy bandwidth
# (reduce_kernel_perf, the HBM yardstick for bus bandwidths); all_reduce,
# float, with 8, 2 and 4 ranks on the one GPU (threads of one process: -t N,
# no MPS needed), -b 8 -e 1G -f 4 -c 1 (8 B to 512 MiB: the sizes are 8 times
# powers of 4); the wire kernel (all_reduce with
# --wire int8, --deterministic 1, --wire bf16 and --wire fp8 on 8 ranks,
# reduce_scatter with int8 and deterministic on 4, -e 64M: up to 32 MiB, -c 1
# checking the documented bounds); the 8-byte all-reduce latency on 2
# ranks with plain launches and with CUDA graph replay (-G), skipped once
# all_reduce is marked hung; all_reduce, float, of 1 and 5 GiB on 2 ranks
# (-b 1G -e 5G -f 5 -c 1: byte offsets above 2^32) and then of 1 and 4 GiB
# on 8 ranks (-b 1G -e 4G -f 4), each skipped when the GPU (or, for the checks'
# host copies, the host) lacks the memory, and the 8-rank run also when the
# 2-rank run did not pass; all_gather,
# reduce_scatter and sendrecv, float, with 8, 4 and 2 ranks; sendrecv with
# registered buffers (-R 1, zero-copy) on 2 ranks; half and
# bfloat16 with 8 ranks, -e 256M: up to 128 MiB; the lane kernel's latency
# (lane_kernel_perf); last, when nvidia-cuda-mps-control exists, one
# 2-process all-reduce (chorusrun, up to 128 MiB) under an MPS daemon of our
# own, stopped again at the end, and then the same 2-process all-reduce (up to
# 32 MiB), under a second daemon with its own pipe and log folders (mps-<step>/),
# over the network transport with device-memory slots (GPUDirect RDMA through
# the test plugin libnccl-net-cuda.so, NCCL_NET_GDR_LEVEL=SYS; it passes when
# the log says "slots in device (regMr) memory", the plugin saw receives into
# device memory and logged no "nccl-test-net: VIOLATION", e.g. a receive read
# without a completed iflush); under MPS too, all_reduce --wire int8 and
# --deterministic 1 up to 8 MiB as two "hosts" of 2 processes each
# (tests/gpu/two_hosts.sh: the wire forms that only run across hosts); and
# last the GPUDirect run up to 4 MiB over libnccl-net-cudadmabuf.so, which
# takes device memory only as a dma-buf (passes on "slots in device
# (regMrDmaBuf) memory"; SKIPPED when the driver cannot export one). A
# collective whose run timed out, or failed
# with a kernel timeout ("made no progress", "did not finish"), skips its remaining runs:
# the same hang would only repeat. The benchmarks run with CHORUS_TIMEOUT_MS
# 15000 and CHORUS_INIT_TIMEOUT_MS 20000 (unless set), so that a hang shows
# up as an error before the run's own timeout.
#
# BUILD_DIR (default build-gpu): configured here unless it already holds a
# configured Ninja build (CMakeCache.txt and build.ninja), which is then
# reused as it is (set DEVICE_CHECK_RECONFIGURE=1 to configure it anyway).
#
# Configure builds for the GPU it finds (cmake/cuda_architectures.cmake:
# nvidia-smi's compute capability, e.g. sm_90 on an H100/H200, sm_80 on an
# A100) unless DEVICE_CHECK_CUDA_ARCHS sets CMAKE_CUDA_ARCHITECTURES.
#
# Knobs (environment): CHORUS_KERNEL_FILTER (all), DEVICE_CHECK_TOTAL_S (540),
# DEVICE_CHECK_BUILD_TIMEOUT_S (330), DEVICE_CHECK_BUDGET_S (330),
# DEVICE_CHECK_PERF_ARGS (extra benchmark flags: "-w 2 -n 10"),
# DEVICE_CHECK_MAX_BYTES (1G; when smaller, the multi-GiB all-reduce runs
# shrink to it and 5 (2 ranks) or 4 (8 ranks) times it),
# DEVICE_CHECK_RUN_TIMEOUT_S (45: one benchmark of the matrix),
# DEVICE_CHECK_CUDA_ARCHS (the visible GPU's),
# DEVICE_CHECK_JOBS (ninja -j; ninja's default),
# DEVICE_CHECK_RECONFIGURE (0), DEVICE_CHECK_MODE (gpu; "host" exercises the
# benchmark part of this script on a machine without a GPU).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out=${1:?usage: device_check.sh OUT [BUILD_DIR]}
build=${2:-$root/build-gpu}
filter=${CHORUS_KERNEL_FILTER:-all}
total=${DEVICE_CHECK_TOTAL_S:-540}
build_limit=${DEVICE_CHECK_BUILD_TIMEOUT_S:-330}
budget=${DEVICE_CHECK_BUDGET_S:-330}
perf_args=${DEVICE_CHECK_PERF_ARGS:-"-w 2 -n 10"}
max_bytes=${DEVICE_CHECK_MAX_BYTES:-1G}
mode=${DEVICE_CHECK_MODE:-gpu}
run_timeout=${DEVICE_CHECK_RUN_TIMEOUT_S:-45}
jobs=${DEVICE_CHECK_JOBS:-}
reconfigure=${DEVICE_CHECK_RECONFIGURE:-0}
cuda_archs=${DEVICE_CHECK_CUDA_ARCHS:-}
SECONDS=0
end_at=$total # the script's own deadline, in $SECONDS
# The original stdout and stderr, for the signal trap and the finish: a trap
# runs inside whatever redirection is in effect (a step's log).
exec 8>&1 9>&2
mkdir -p "$out"
out="$(cd "$out" && pwd)"
case $build in /*) ;; *) build="$PWD/$build" ;; esac
# Short path: the MPS control socket under it must fit a sockaddr_un.
work="$(mktemp -d /tmp/dc.XXXXXX)"
summary="$work/summary.txt"
: >"$summary"
bin="$build/bin"
gpu_tests="$build/tests/gpu/chorus_gpu_tests"
gdr_plugin="$build/tests/transports_plugin/libnccl-net-cuda.so"
dmabuf_plugin="$build/tests/transports_plugin/libnccl-net-cudadmabuf.so"

# ---- running, judging and recording steps ----------------------------------
# shellcheck source=tests/gpu/device_check_lib.sh
source "$root/tests/gpu/device_check_lib.sh"

# ---- MPS daemon of our own, and the end (whatever happens) -------------------
mps_pipe=""
stop_mps() {
  [ -n "$mps_pipe" ] || return 0
  echo quit | CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" timeout 20 nvidia-cuda-mps-control >/dev/null 2>&1
  mps_pipe=""
}
finished=0
finish() {
  [ "$finished" = 1 ] && return 0
  finished=1
  trap '' TERM INT HUP # a second signal must not cut the finish short
  exec 1>&8 2>&9
  stop_mps
  local passed failed skipped
  passed=$(grep -c '^PASS ' "$summary")
  failed=$(grep -cE '^(FAIL|TIMEOUT) ' "$summary")
  skipped=$(grep -c '^SKIPPED ' "$summary")
  note "done in ${SECONDS}s: $passed passed, $failed failed or timed out, $skipped skipped (work folder $work)"
  publish force
  # What the caller sees last: the records, not the tables.
  echo
  echo "==== device check summary ($out/summary.txt; logs in $out/logs.tgz) ===="
  grep -E '^(device check|gpu:|no GPU visible|tools:|run budget|interrupted|collective benchmarks SKIPPED|PASS |FAIL |TIMEOUT |SKIPPED |    failed: |    probe: |done in )' "$summary"
}
# on_signal NAME STATUS: the running step (bg's child: a timeout, whose
# process group holds the step) gets SIGTERM, which timeout passes on; what
# is left of the group 3 s later gets SIGKILL. Then the normal finish.
on_signal() {
  trap '' TERM INT HUP
  exec 1>&8 2>&9
  if [ -n "$child" ]; then
    kill -TERM "$child" 2>/dev/null
    for _ in $(seq 15); do
      kill -0 "$child" 2>/dev/null || break
      sleep 0.2
    done
    kill -KILL -- "-$child" "$child" 2>/dev/null
    wait "$child" 2>/dev/null
    child=""
  fi
  note "interrupted by a signal (SIG$1)"
  exit "$2"
}
trap finish EXIT
trap 'on_signal TERM 143' TERM
trap 'on_signal INT 130' INT
trap 'on_signal HUP 129' HUP

note "device check $(date -u +%FT%TZ) on $(hostname), build $build, mode $mode"
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  note "gpu: $(timeout 10 nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv,noheader 2>&1 |
    head -n 4 | tr '\n' ';')"
  gpus=$(timeout 10 nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
else
  note "gpu: nvidia-smi not found"
fi
note "tools: $(nproc) cores; $(cmake --version 2>/dev/null | head -n 1); ninja $(ninja --version 2>/dev/null);" \
  "nvcc $(nvcc --version 2>/dev/null | sed -n 's/.*release \([0-9.]*\).*/\1/p')"
[ "$gpus" -gt 0 ] || note "no GPU visible: GPU steps will report SKIPPED"

# ---- configure ---------------------------------------------------------------
# cmake_errors LOG: its first errors, each with the 3 lines after it (CMake's
# message), into the summary.
cmake_errors() {
  grep -A3 --no-group-separator -E 'CMake Error|error' "$1" | head -n 16 | cut -c1-200 | sed 's/^/    /' |
    tee -a "$summary"
}
t0=$SECONDS
configured=0
gtest_note=""
if [ "$reconfigure" != 1 ] && [ -f "$build/CMakeCache.txt" ] && [ -f "$build/build.ninja" ]; then
  configured=1
  kf=$(sed -n 's/^CHORUS_KERNEL_FILTER:[A-Z]*=//p' "$build/CMakeCache.txt" | head -n 1)
  record PASS configure 0 "reused the existing configuration of $build${kf:+ (kernel filter $kf)}"
else
  cfg=(-S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHORUS_ENABLE_CUDA=ON
    -DCHORUS_BUILD_BENCHMARKS=ON -DCHORUS_KERNEL_FILTER="$filter")
  [ -n "$cuda_archs" ] && cfg+=(-DCMAKE_CUDA_ARCHITECTURES="$cuda_archs")
  [ -d "$root/.gtest" ] && cfg+=(-DCHORUS_GTEST_SOURCE_DIR="$root/.gtest")
  if bg timeout -k 10 120 cmake "${cfg[@]}" -DCHORUS_BUILD_TESTS=ON >"$work/configure.log" 2>&1; then
    configured=1
    grep -q 'Chorus: GoogleTest not found' "$work/configure.log" && gtest_note="; tests NOT built: GoogleTest not found"
    grep -q 'Chorus: GoogleTest built from' "$work/configure.log" && gtest_note="; GoogleTest built from .gtest"
    archs=$(sed -n 's/^-- Chorus: CUDA architectures \([^ ]*\).*/\1/p' "$work/configure.log" | tail -n 1)
    record PASS configure "$((SECONDS - t0))" "kernel filter $filter, architectures ${archs:-?}, with tests$gtest_note"
  else
    cmake_errors "$work/configure.log"
    record FAIL configure "$((SECONDS - t0))" "see configure.log; again with CHORUS_BUILD_TESTS=OFF"
    t0=$SECONDS
    if bg timeout -k 10 120 cmake "${cfg[@]}" -DCHORUS_BUILD_TESTS=OFF >"$work/configure-no-tests.log" 2>&1; then
      configured=1
      record PASS configure-no-tests "$((SECONDS - t0))" "GPU tests will be SKIPPED"
    else
      cmake_errors "$work/configure-no-tests.log"
      record FAIL configure-no-tests "$((SECONDS - t0))" "see configure-no-tests.log"
    fi
  fi
fi

# ---- build: only what the runs below use --------------------------------------
wanted="chorus_gpu_tests reduce_kernel_perf lane_kernel_perf all_reduce_perf all_gather_perf reduce_scatter_perf
  sendrecv_perf chorusrun nccl-net-cuda nccl-net-cudadmabuf"
declare -A stale=() # binaries on disk that this build did not bring up to date
target_file() { # a wanted target's file
  case $1 in
    chorus_gpu_tests) echo "$gpu_tests" ;;
    nccl-net-cuda) echo "$gdr_plugin" ;;
    nccl-net-cudadmabuf) echo "$dmabuf_plugin" ;;
    *) echo "$bin/$1" ;;
  esac
}
t0=$SECONDS
if [ "$configured" = 1 ]; then
  # Regenerate first if a CMakeLists changed, so that the target list is current.
  bg timeout -k 10 120 ninja -C "$build" build.ninja >"$work/build.log" 2>&1
  targets=""
  missing=""
  for t in $wanted; do
    if grep -qE "^build $t: phony" "$build/build.ninja"; then targets="$targets $t"; else missing="$missing $t"; fi
  done
  for t in $missing; do stale[$(target_file "$t")]=1; done
  btmo=$build_limit
  [ $(($(left) - 60)) -lt "$btmo" ] && btmo=$(($(left) - 60))
  [ "$btmo" -lt 10 ] && btmo=10
  brc=0
  # shellcheck disable=SC2086
  bg timeout -k 10 "$btmo" ninja -C "$build" -k 0 ${jobs:+-j "$jobs"} $targets >>"$work/build.log" 2>&1 || brc=$?
  if [ "$brc" -ne 0 ]; then
    # Which targets are still out of date: their binaries (if any) are stale.
    # (ninja -n on build.ninja itself stops at "Re-running CMake": CMake's
    # glob check always looks dirty to a dry run. A copy that no rule
    # regenerates does not.)
    notbuilt=""
    cp -f "$build/build.ninja" "$build/.device-check.ninja"
    for t in $targets; do
      if ! ninja -C "$build" -f .device-check.ninja -n "$t" 2>/dev/null | grep -q 'no work to do'; then
        notbuilt="$notbuilt $t"
        stale[$(target_file "$t")]=1
      fi
    done
    rm -f "$build/.device-check.ninja"
    # The first failures (a regeneration's CMake errors with their message).
    { grep -A3 --no-group-separator 'CMake Error' "$work/build.log" | head -n 8
      grep -E '^FAILED:|error:' "$work/build.log" | head -n 12; } | cut -c1-200 | sed 's/^/    /' | tee -a "$summary"
    if [ "$brc" -eq 124 ] || [ "$brc" -eq 137 ]; then st=TIMEOUT; else st=FAIL; fi
    record "$st" build "$((SECONDS - t0))" "rc=$brc (limit ${btmo}s); not built:${notbuilt:- none}; see build.log"
  else
    record PASS build "$((SECONDS - t0))" "$(echo "$targets" | wc -w) targets${missing:+; not in this configuration:$missing}"
  fi
else
  record SKIPPED build 0 "(not configured)"
  for t in $wanted; do stale[$(target_file "$t")]=1; done
fi
publish force

# ---- the run phase's budget ----------------------------------------------------
run_budget=$(($(left) - 30))
[ "$budget" -lt "$run_budget" ] && run_budget=$budget
deadline=$((SECONDS + run_budget))
note "run budget: ${run_budget}s (until ${deadline}s of ${total}s)"

# The benchmarks' environment: a rank that waits on a peer, or on init, gives
# up well before the run's own timeout, so a hang shows up as an error.
perf_env=(env CHORUS_MODE="$mode" CHORUS_TIMEOUT_MS="${CHORUS_TIMEOUT_MS:-15000}"
  CHORUS_INIT_TIMEOUT_MS="${CHORUS_INIT_TIMEOUT_MS:-20000}")
export CHORUS_INIT_TIMEOUT_MS=${CHORUS_INIT_TIMEOUT_MS:-20000}

# ---- probe: can GPU mode run two ranks at all? --------------------------------
probe_ok=0
if [ "$mode" = gpu ] && [ "$gpus" -eq 0 ]; then
  record SKIPPED mode-probe 0 "(no GPU visible: collective benchmarks skipped)"
elif have "$bin/all_reduce_perf" mode-probe; then
  run mode-probe 40 probe "${perf_env[@]}" "$bin/all_reduce_perf" -t 2 -b 8 -e 1M -f 4 -c 1
  prc=$?
  if [ "$prc" -ne 124 ] && [ "$prc" -ne 125 ] && grep -qE '^ +[0-9]+ ' "$work/mode-probe.log"; then
    probe_ok=1
  else
    note "collective benchmarks SKIPPED: all_reduce_perf -t 2 in CHORUS_MODE=$mode timed out, was not run or cut off" \
      "(budget), or printed no table"
    grep -m2 -iE "gpu|cuda|fail|error" "$work/mode-probe.log" 2>/dev/null | cut -c1-200 | sed 's/^/    probe: /' |
      tee -a "$summary"
  fi
fi

# ---- GPU tests: kernels bit-identical to the host loops, the public API in GPU mode
# The cheap kernel cases (hundreds of short ones) in one process; the rest
# through ctest, one process per case, 2 at a time (the spinning kernels of
# more CUDA contexts would only time-slice: no MPS here), 60 s each at most.
# With CHORUS_TIMEOUT_MS 15000 (unless set) a kernel that hangs inside a test
# ends with an error long before the step's own timeout (tests that need
# another limit set it themselves).
test_env=(env CHORUS_TIMEOUT_MS="${CHORUS_TIMEOUT_MS:-15000}")
cheap_filter='AllTypesAndKinds/*:ReduceKernelArgs.*:LaneParamsChecks.*:WireParamsChecks.*'
cheap_regex='^(AllTypesAndKinds/|ReduceKernelArgs[.]|LaneParamsChecks[.]|WireParamsChecks[.]|GpuFailure[.])'
if have "$gpu_tests" gpu-kernel-tests; then
  run gpu-kernel-tests 90 gtest "${test_env[@]}" "$gpu_tests" --gtest_filter="$cheap_filter"
  grep -E '^\[  FAILED  \] [A-Za-z]' "$work/gpu-kernel-tests.log" | sed 's/, where .*//; s/ ([0-9]* ms)$//' |
    sort -u | head -n 20 | cut -c1-160 | sed 's/^\[  FAILED  \] /    failed: /' | tee -a "$summary"
fi
# Operation fingerprints and the stall line in GPU mode (gpu_mismatch_test.cc):
# three mismatched pairs of calls (about 1 s each at most) and one 2 s stall.
if have "$gpu_tests" gpu-failure-tests; then
  run gpu-failure-tests 60 gtest "${test_env[@]}" "$gpu_tests" --gtest_filter='GpuFailure.*'
  grep -E '^\[  FAILED  \] [A-Za-z]' "$work/gpu-failure-tests.log" | sed 's/ ([0-9]* ms)$//' |
    sort -u | head -n 10 | cut -c1-160 | sed 's/^\[  FAILED  \] /    failed: /' | tee -a "$summary"
fi
if have "$gpu_tests" gpu-tests; then
  run gpu-tests 200 ctest "${test_env[@]}" ctest --test-dir "$build" -L gpu -E "$cheap_regex" -j2 --output-on-failure
  # The failures by name (ctest pads names with dots: squeeze them).
  grep -E "\*\*\*Failed|Not Run|\*\*\*Timeout|\*\*\*Exception" "$work/gpu-tests.log" | tr -s '.' | cut -c1-160 |
    head -n 20 | sed 's/^ */    failed: /' | tee -a "$summary"
fi
publish force

# ---- kernels: reduction vs device-to-device copy (1 GiB) ------------------------
if have "$bin/reduce_kernel_perf" reduce-kernel-perf; then
  run reduce-kernel-perf 60 copy "$bin/reduce_kernel_perf" -b $((1 << 30)) -n 20 -w 5
  [ -f "$work/reduce-kernel-perf.log" ] && to_summary <"$work/reduce-kernel-perf.log"
fi

# ---- collectives with several ranks on the GPU ------------------------------------
to_bytes() { # 256M -> 268435456 (K, M, G: powers of 1024); nothing if not a size
  local n=${1%[KkMmGg]} u=${1: -1} f=1
  case $u in K | k) f=1024 ;; M | m) f=$((1 << 20)) ;; G | g) f=$((1 << 30)) ;; esac
  [[ $n =~ ^[0-9]+$ ]] && echo $((n * f))
}
half_bytes=256M
mb=$(to_bytes "$max_bytes")
[ -n "$mb" ] && [ "$mb" -lt $((256 << 20)) ] && half_bytes=$max_bytes
# The multi-GiB all-reduce: 1 and 5 GiB on 2 ranks (-f 5: the sweep is 1G,
# 5G; 5 GiB puts byte offsets above 2^32), 1 and 4 GiB on 8 ranks (-f 4); or
# DEVICE_CHECK_MAX_BYTES and 5 or 4 times it when that is smaller than 1 GiB
# (a dry run stays small).
big_b=1G
big2_e=5G
big8_e=4G
if [ -n "$mb" ] && [ "$mb" -lt $((1 << 30)) ]; then
  big_b=$max_bytes
  big2_e=$((5 * mb))
  big8_e=$((4 * mb))
  if [ $((mb % (1 << 20))) -eq 0 ]; then
    big2_e="$((big2_e >> 20))M"
    big8_e="$((big8_e >> 20))M"
  fi
fi
declare -A hung=() # collective (or "wire") -> why its remaining runs are skipped
# is_hung KEY NAME: true (and NAME recorded SKIPPED) when KEY is marked hung.
is_hung() {
  [ -n "${hung[$1]:-}" ] || return 1
  record SKIPPED "$2" 0 "(${hung[$1]})"
}
# mark_hung KEY NAME RC: after run NAME returned RC, marks KEY hung when the
# run timed out or failed with a kernel timeout (a cut by the budget, 125, is
# no sign of a hang).
mark_hung() {
  if [ "$3" -eq 124 ]; then
    hung[$1]="$2 timed out"
  elif [ "$3" -eq 1 ] && grep -qE 'made no progress|did not finish' "$work/$2.log"; then
    hung[$1]="$2: kernel timeout"
  fi
}
# bench COLL T DTYPE MAXBYTES: one run of the matrix.
bench() {
  local coll=$1 t=$2 dt=$3 e=$4 name="perf-$1-t$2-$3" rc=0
  is_hung "$coll" "$name" && return
  have "$bin/${coll}_perf" "$name" || return
  # shellcheck disable=SC2086
  run "$name" "$run_timeout" perf "${perf_env[@]}" "$bin/${coll}_perf" -t "$t" -b 8 -e "$e" -f 4 -c 1 -d "$dt" \
    $perf_args || rc=$?
  mark_hung "$coll" "$name" "$rc"
}
# latency NAME FLAGS...: the 8-byte all-reduce on 2 ranks, 100 warm-up iterations.
latency() {
  local name=$1 rc=0
  shift
  is_hung all_reduce "$name" && return
  run "$name" 40 latency "${perf_env[@]}" "$bin/all_reduce_perf" -t 2 -b 8 -e 8 -w 100 -c 1 "$@" || rc=$?
  mark_hung all_reduce "$name" "$rc"
}
# wire_bench COLL T "FLAGS": COLL of float with the wire flags (--wire F or
# --deterministic 1), -e 64M: 8 B to 32 MiB (or up to DEVICE_CHECK_MAX_BYTES
# when smaller). A hang or kernel timeout skips the remaining wire runs.
wire_bench() {
  local coll=$1 t=$2 flags=$3 e=64M rc=0 name
  name="wire-$1-t$2-$(echo "$3" | sed 's/^--//; s/ /-/')"
  [ -n "$mb" ] && [ "$mb" -lt $((64 << 20)) ] && e=$max_bytes
  is_hung wire "$name" && return
  have "$bin/${coll}_perf" "$name" || return
  # shellcheck disable=SC2086
  run "$name" "$run_timeout" perf "${perf_env[@]}" "$bin/${coll}_perf" -t "$t" -b 8 -e "$e" -f 4 -c 1 -d float \
    $flags $perf_args || rc=$?
  mark_hung wire "$name" "$rc"
}
# MiB of free memory: mem_free_mib gpu (device 0, nvidia-smi) or host (MemAvailable).
mem_free_mib() {
  case $1 in
    gpu) timeout 10 nvidia-smi --query-gpu=memory.free --format=csv,noheader,nounits -i 0 2>/dev/null | head -n 1 | tr -dc 0-9 ;;
    *) awk '/^MemAvailable:/ {print int($2 / 1024)}' /proc/meminfo ;;
  esac
}
# room_for T BYTES: empty when T ranks can run an all-reduce of BYTES, else
# why not. Each rank holds a send and a receive buffer (device memory in GPU
# mode) and, while checking, a host copy of one of them; 4 GiB to spare.
room_for() {
  local t=$1 mib=$(($2 >> 20)) dev host need
  host=$(mem_free_mib host)
  if [ "$mode" = gpu ]; then
    dev=$(mem_free_mib gpu)
    need=$((t * 2 * mib + 4096))
    [ -n "$dev" ] && [ "$dev" -lt "$need" ] && echo "GPU 0 has ${dev} MiB free, ${need} MiB needed" && return
    need=$((t * mib + 4096))
  else
    need=$((t * 3 * mib + 4096))
  fi
  [ -n "$host" ] && [ "$host" -lt "$need" ] && echo "the host has ${host} MiB available, ${need} MiB needed"
}
# big_bench T MAXBYTES FACTOR TIMEOUT_S: the multi-GiB all-reduce with T ranks,
# -b big_b -e MAXBYTES -f FACTOR; returns 0 on PASS.
big_bench() {
  local t=$1 e=$2 f=$3 tmo=$4 name="perf-all_reduce-t$1-float-$2" why rc=0
  is_hung all_reduce "$name" && return 1
  have "$bin/all_reduce_perf" "$name" || return 1
  why=$(room_for "$t" "$(to_bytes "$e")")
  if [ -n "$why" ]; then
    record SKIPPED "$name" 0 "(memory: $why)"
    return 1
  fi
  # shellcheck disable=SC2086
  run "$name" "$tmo" perf "${perf_env[@]}" "$bin/all_reduce_perf" -t "$t" -b "$big_b" -e "$e" -f "$f" -c 1 -d float \
    $perf_args || rc=$?
  mark_hung all_reduce "$name" "$rc"
  return "$rc"
}
if [ "$probe_ok" = 1 ]; then
  for t in 8 2 4; do bench all_reduce "$t" float "$max_bytes"; done
  # The wire kernel: compressed formats and deterministic mode, results
  # checked against their documented bounds (-c 1; exact when deterministic).
  for w in "--wire int8" "--deterministic 1" "--wire bf16" "--wire fp8"; do wire_bench all_reduce 8 "$w"; done
  for w in "--wire int8" "--deterministic 1"; do wire_bench reduce_scatter 4 "$w"; done
  # Launch latency: 2 ranks, 8 bytes, plain launches and one CUDA graph of
  # 100 iterations replayed 10 times (the probe showed that 2 ranks work);
  # skipped once all_reduce is marked hung.
  latency latency-t2-launch -n 1000
  latency latency-t2-graph -n 100 -G 10
  # Multi-GiB all-reduce: 2 ranks up to 5 GiB, then 8 up to 4 GiB (skipped
  # when 2 did not pass).
  if big_bench 2 "$big2_e" 5 90; then
    big_bench 8 "$big8_e" 4 120
  else
    record SKIPPED "perf-all_reduce-t8-float-$big8_e" 0 "(2 ranks did not pass)"
  fi
  for t in 8 4 2; do
    for coll in all_gather reduce_scatter sendrecv; do bench "$coll" "$t" float "$max_bytes"; done
  done
  # Zero-copy sends from registered buffers (-R 1; kernels/common/direct_slot.h), 2 ranks.
  name=perf-sendrecv-t2-float-registered
  if ! is_hung sendrecv "$name" && have "$bin/sendrecv_perf" "$name"; then
    rc=0
    # shellcheck disable=SC2086
    run "$name" "$run_timeout" perf "${perf_env[@]}" "$bin/sendrecv_perf" -t 2 -b 8 \
      -e "$max_bytes" -f 4 -c 1 -d float -R 1 $perf_args || rc=$?
    mark_hung sendrecv "$name" "$rc"
  fi
  for dt in half bfloat16; do
    for coll in all_reduce reduce_scatter all_gather sendrecv; do bench "$coll" 8 "$dt" "$half_bytes"; done
  done
fi
publish force

# ---- the lane kernel's latency and bandwidth ---------------------------------------
if have "$bin/lane_kernel_perf" lane-kernel-perf; then
  run lane-kernel-perf 60 none "$bin/lane_kernel_perf" -n 20 -w 5
  [ -f "$work/lane-kernel-perf.log" ] && to_summary <"$work/lane-kernel-perf.log"
fi

# ---- two processes on the one GPU: MPS runs their kernels side by side ------------
# Why a two-process step under MPS cannot run now ("" when it can).
mps_skip_reason() {
  if [ "$probe_ok" != 1 ]; then
    echo "no collective benchmarks: see mode-probe"
  elif [ "$mode" != gpu ]; then
    echo "CHORUS_MODE=$mode"
  elif ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    echo "nvidia-cuda-mps-control not found"
  elif [ ! -x "$bin/chorusrun" ] || [ -n "${stale[$bin/chorusrun]:-}" ]; then
    echo "not built: chorusrun; see build.log"
  elif [ $((deadline - SECONDS)) -lt 70 ]; then
    # Start (up to 20 s), the run, stop (up to 20 s): all within the budget.
    echo "budget: $((deadline - SECONDS))s left, 70s needed"
  fi
}
# mps_run NAME JUDGE CMD...: one step under an MPS daemon of our own,
# started before it and stopped after it, with pipe and log folders of its
# own (mps-NAME/pipe, mps-NAME/log: a daemon still quitting cannot meet the
# next one). The daemon's server list (a PASS under MPS lists a server) is
# appended to NAME.log before the stop.
mps_run() {
  local name=$1 judge=$2 t0=$SECONDS mps_log="$work/mps-$1/log"
  shift 2
  mps_pipe="$work/mps-$name/pipe"
  mkdir -p "$mps_pipe" "$mps_log"
  if bg env CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" CUDA_MPS_LOG_DIRECTORY="$mps_log" \
    timeout 20 nvidia-cuda-mps-control -d >"$work/$name-mps-start.log" 2>&1; then
    # Leave 25 s of the budget for stopping the daemon.
    deadline=$((deadline - 25))
    run "$name" 45 "$judge" env CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" CUDA_MPS_LOG_DIRECTORY="$mps_log" "$@"
    deadline=$((deadline + 25))
    { echo "==== MPS get_server_list"
      echo get_server_list | CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" timeout 5 nvidia-cuda-mps-control; } >>"$work/$name.log" 2>&1
    stop_mps
  else
    mps_pipe=""
    record SKIPPED "$name" "$((SECONDS - t0))" "(MPS daemon did not start: $(head -c 100 "$work/$name-mps-start.log"))"
  fi
}

why=$(mps_skip_reason)
if [ -n "$why" ]; then
  record SKIPPED mps-2proc-all_reduce 0 "($why)"
else
  mps_run mps-2proc-all_reduce perf "${perf_env[@]:1}" "$bin/chorusrun" -n 2 -- "$bin/all_reduce_perf" \
    -b 8 -e 256M -f 4 -c 1 -w 2 -n 10
fi

# ---- the same over the network transport with device-memory slots ---------------
# gdr_step NAME JUDGE PLUGIN TABLE MAX_BYTES: a 2-process all-reduce under MPS
# over a test plugin that takes device memory, with GPUDirect allowed.
gdr_step() {
  local name=$1 judge=$2 plugin=$3 table=$4 max=$5 why
  why=$(mps_skip_reason)
  if [ -z "$why" ] && { [ ! -f "$plugin" ] || [ -n "${stale[$plugin]:-}" ]; }; then
    why="not built: $(basename "$plugin"); see build.log"
  fi
  if [ -n "$why" ]; then
    record SKIPPED "$name" 0 "($why)"
    return
  fi
  mps_run "$name" "$judge" "${perf_env[@]:1}" NCCL_NET_PLUGIN="$plugin" NCCL_NET="$table" NCCL_SHM_DISABLE=1 \
    NCCL_P2P_DISABLE=1 NCCL_NET_GDR_LEVEL=SYS NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET \
    "$bin/chorusrun" -n 2 -- "$bin/all_reduce_perf" -b 8 -e "$max" -f 4 -c 1 -w 2 -n 10
}
# The cuda variant takes CUDA pointers (regMr NCCL_PTR_CUDA); what a receive
# brought reaches device memory only when a later iflush completes.
gdr_e=64M
[ -n "$mb" ] && [ "$mb" -lt $((64 << 20)) ] && gdr_e=$max_bytes
gdr_step mps-2proc-gdr-all_reduce gdr "$gdr_plugin" TestNcclNet_cuda "$gdr_e"

# ---- two "hosts" on the one GPU: the wire forms that only run across hosts ------
# tests/gpu/two_hosts.sh: two chorusrun groups of 2 processes with host ids of
# their own, over the network transport on loopback (GPU slots staged in host
# memory), so the two-level compressed form and the deterministic chain run
# their kernels (one GPU alone only ever takes the flat form).
for w in "--wire int8" "--deterministic 1"; do
  name="mps-2x2-wire-$(echo "$w" | sed 's/^--//; s/ /-/')"
  why=$(mps_skip_reason)
  if [ -n "$why" ]; then
    record SKIPPED "$name" 0 "($why)"
    continue
  fi
  # shellcheck disable=SC2086
  mps_run "$name" perf "${perf_env[@]:1}" "$root/tests/gpu/two_hosts.sh" "$bin" 2 "$bin/all_reduce_perf" \
    -b 8 -e 16M -f 4 -c 1 -w 2 -n 10 $w
done

# ---- last: GPU slots registered as a dma-buf ---------------------------------------
# The cudadmabuf variant takes device memory only through regMrDmaBuf and
# checks the fd and offset it is given; small sizes, for the export path.
gdr_step mps-2proc-dmabuf-all_reduce dmabuf "$dmabuf_plugin" TestNcclNet_dmabuf 4M
# finish (the EXIT trap) stops MPS, writes the totals, publishes and prints the records.
