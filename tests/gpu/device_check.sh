#!/usr/bin/env bash
# The device check: on a machine with one GPU, build Chorus with its CUDA
# kernels, run the GPU tests, measure the kernels, and run the collective
# benchmarks with several ranks on that GPU. Everything is logged under OUT.
#
#   tests/gpu/device_check.sh OUT [BUILD_DIR]
#
# OUT/summary.txt gets one line per run: PASS, FAIL, TIMEOUT or SKIPPED, the
# run's name, its seconds, and its key number (bus bandwidth, latency, test
# counts). OUT/<run>.log holds each run's full output.
#
# Time: after the build, everything fits in DEVICE_CHECK_BUDGET_S (330 s):
# every run has its own timeout, no run may outlast the budget, and runs that
# no longer fit are reported SKIPPED (budget). A run that fails or times out
# does not stop the others; a collective that times out skips its remaining
# data types and larger rank counts (the same hang would only repeat).
#
# Runs, in order: the GPU tests (ctest -L gpu); the device-to-device copy
# bandwidth (reduce_kernel_perf, the HBM yardstick for bus bandwidths) and
# the lane kernel's latency; a one-rank probe of GPU mode; the 8-byte
# all-reduce latency on 2 ranks with plain launches and with CUDA graph
# replay (-G); the collective matrix: all_reduce, all_gather, reduce_scatter
# and sendrecv with 2, 4 and 8 ranks on the one GPU (threads of one process:
# -t N, so no MPS is needed), -b 8 -e 1G -f 4 -c 1, for float, half and
# bfloat16; last, when nvidia-cuda-mps-control exists, one 2-process
# all-reduce (chorusrun) under an MPS daemon of our own (pipe and log
# directories under OUT), stopped again at the end.
#
# Knobs (environment): CHORUS_KERNEL_FILTER (all), DEVICE_CHECK_BUDGET_S
# (330), DEVICE_CHECK_PERF_ARGS (extra benchmark flags: "-w 2 -n 10"),
# DEVICE_CHECK_MAX_BYTES (1G), DEVICE_CHECK_RUN_TIMEOUT_S (45: one benchmark
# of the matrix), DEVICE_CHECK_MODE (gpu; "host" exercises the benchmark part
# of this script on a machine without a GPU).
set -uo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out=${1:?usage: device_check.sh OUT [BUILD_DIR]}
build=${2:-$root/build-gpu}
filter=${CHORUS_KERNEL_FILTER:-all}
budget=${DEVICE_CHECK_BUDGET_S:-330}
perf_args=${DEVICE_CHECK_PERF_ARGS:-"-w 2 -n 10"}
max_bytes=${DEVICE_CHECK_MAX_BYTES:-1G}
mode=${DEVICE_CHECK_MODE:-gpu}
run_timeout=${DEVICE_CHECK_RUN_TIMEOUT_S:-45}
mkdir -p "$out"
out="$(cd "$out" && pwd)"
summary="$out/summary.txt"
: >"$summary"
bin="$build/bin"

note() { echo "$*" | tee -a "$summary"; }
# record STATUS NAME SECONDS KEY: one summary line.
record() { note "$(printf '%-7s %-34s %4ss  %s' "$1" "$2" "$3" "$4")"; }

# Key numbers, pulled from a log by kind.
key_perf() {  # benchmark table: wrong count, average busbw, busbw of the largest row
  local log=$1
  local wrong avg last
  wrong=$(sed -n 's/^# Out of bounds values : \([0-9]*\).*/\1/p' "$log" | tail -n 1)
  avg=$(sed -n 's/^# Avg bus bandwidth *: *\([0-9.e+-]*\).*/\1/p' "$log" | tail -n 1)
  last=$(grep -E '^ +[0-9]+ ' "$log" | tail -n 1 | awk '{printf "%s B: busbw %s GB/s (oop), %s GB/s (in-place)", $1, $8, $12}')
  echo "wrong=${wrong:-?} avg-busbw=${avg:-?} GB/s; largest ${last:-row missing}"
}
key_latency() {  # time of the 8-byte row, out-of-place and in-place
  grep -E '^ +8 ' "$1" | tail -n 1 | awk '{printf "8 B all-reduce: %s us (oop), %s us (in-place), #wrong %s/%s", $6, $10, $9, $13}'
}
key_ctest() {
  local line skipped
  line=$(grep -E "tests passed|tests failed" "$1" | tail -n 1)
  skipped=$(grep -c '(Skipped)' "$1")
  echo "$line; $skipped skipped"
}
key_copy() { awk '/^memcpy D2D/ {printf "D2D copy %s GB/s (HBM reference)", $4}' "$1"; }
key_none() { tail -n 1 "$1" | cut -c1-100; }

# Verdicts beyond the exit status, by kind.
ok_perf() { grep -q '^# Out of bounds values : 0 OK' "$1"; }
ok_any() { true; }
# A run that skipped itself: exit status 77 (the kernel benchmarks without a
# device), or a ctest run where every test skipped.
all_skipped() {
  local rc=$1 log=$2 total skipped
  [ "$rc" -eq 77 ] && return 0
  total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
  skipped=$(grep -c '(Skipped)' "$log")
  [ -n "$total" ] && [ "$total" -gt 0 ] && [ "$skipped" -eq "$total" ]
}

# run NAME TIMEOUT_S KIND cmd...: runs cmd (bounded by the timeout and the
# budget), logs to OUT/NAME.log, records PASS/FAIL/TIMEOUT and the key
# number; returns 0 (pass or skipped), 1 (fail), 124 (timeout) or 125 (not
# run: no time left).
deadline=0
run() {
  local name=$1 tmo=$2 kind=$3
  shift 3
  local left=$((deadline - SECONDS))
  if [ "$deadline" -gt 0 ] && [ "$left" -lt 5 ]; then
    record SKIPPED "$name" 0 "(budget: no time left)"
    return 125
  fi
  if [ "$deadline" -gt 0 ] && [ "$left" -lt "$tmo" ]; then tmo=$left; fi
  local t0=$SECONDS rc=0 status
  timeout -k 10 "$tmo" "$@" >"$out/$name.log" 2>&1 || rc=$?
  local verdict=ok_any
  [ "$kind" = perf ] || [ "$kind" = latency ] && verdict=ok_perf
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status=TIMEOUT
  elif all_skipped "$rc" "$out/$name.log"; then
    status=SKIPPED
  elif [ "$rc" -eq 0 ] && "$verdict" "$out/$name.log"; then
    status=PASS
  else
    status=FAIL
  fi
  local key
  key="$("key_$kind" "$out/$name.log" 2>/dev/null)"
  [ -n "$key" ] || key="$(key_none "$out/$name.log")"
  [ "$status" = TIMEOUT ] && key="(killed after ${tmo}s) $key"
  [ "$status" = FAIL ] && key="rc=$rc $key"
  record "$status" "$name" "$((SECONDS - t0))" "$key"
  case $status in PASS | SKIPPED) return 0 ;; TIMEOUT) return 124 ;; *) return 1 ;; esac
}

# ---- MPS daemon of our own (stopped on exit, whatever happens) ----
mps_pipe=""
stop_mps() {
  [ -n "$mps_pipe" ] || return 0
  echo quit | CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" timeout 20 nvidia-cuda-mps-control >/dev/null 2>&1
  mps_pipe=""
}
trap stop_mps EXIT
trap 'stop_mps; exit 143' TERM INT

note "device check $(date -u +%FT%TZ) on $(hostname), build $build, kernel filter $filter"
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=name,memory.total,driver_version,compute_mode --format=csv,noheader 2>&1 | tee -a "$summary"
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
else
  note "nvidia-smi: not found"
fi
nproc | sed 's/^/cores: /' | tee -a "$summary"
[ "$gpus" -gt 0 ] || note "no GPU visible: GPU steps will report SKIPPED"

# ---- build (not counted in the budget) ----
t0=$SECONDS
if ! cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHORUS_ENABLE_CUDA=ON \
  -DCHORUS_BUILD_BENCHMARKS=ON -DCHORUS_BUILD_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90 \
  -DCHORUS_KERNEL_FILTER="$filter" -DCHORUS_WERROR=ON >"$out/configure.log" 2>&1; then
  tail -n 20 "$out/configure.log"
  record FAIL configure "$((SECONDS - t0))" "see configure.log"
  exit 1
fi
# Only what the runs below use: the GPU tests, the kernel benchmarks, the
# four collective tools and the launcher.
targets="chorus_gpu_tests reduce_kernel_perf lane_kernel_perf all_reduce_perf all_gather_perf reduce_scatter_perf
  sendrecv_perf chorusrun"
# shellcheck disable=SC2086
if ! timeout 900 ninja -C "$build" $targets >"$out/build.log" 2>&1; then
  tail -n 40 "$out/build.log"
  record FAIL build "$((SECONDS - t0))" "see build.log"
  exit 1
fi
record PASS build "$((SECONDS - t0))" "$(echo "$targets" | wc -w) targets"
deadline=$((SECONDS + budget))

# ---- GPU tests: kernels bit-identical to the host loops, the public API in GPU mode ----
run gpu-tests 150 ctest ctest --test-dir "$build" -L gpu --output-on-failure --timeout 90
# The failures by name (ctest pads names with dots: squeeze them).
grep -E "\*\*\*Failed|Not Run|\*\*\*Timeout|\*\*\*Exception" "$out/gpu-tests.log" | tr -s '.' | cut -c1-160 |
  head -n 30 | sed 's/^/    /' | tee -a "$summary"

# ---- kernels: reduction vs device-to-device copy (1 GiB); lane-kernel latency and bandwidth ----
run reduce-kernel-perf 60 copy "$bin/reduce_kernel_perf" -b $((1 << 30)) -n 20 -w 5
sed 's/^/    /' "$out/reduce-kernel-perf.log" | tee -a "$summary"
run lane-kernel-perf 60 none "$bin/lane_kernel_perf" -n 20 -w 5
sed 's/^/    /' "$out/lane-kernel-perf.log" | tee -a "$summary"

# ---- collectives with several ranks on the GPU ----
export CHORUS_MODE=$mode
# A rank that waits on a peer gives up after 15 s instead of the default
# 20 s: a hang shows up as an error well before the run's own timeout.
export CHORUS_TIMEOUT_MS=${CHORUS_TIMEOUT_MS:-15000}
probe_ok=0
if [ "$mode" = gpu ] && [ "$gpus" -eq 0 ]; then
  record SKIPPED collective-benchmarks 0 "(no GPU visible)"
elif run mode-probe 40 perf "$bin/all_reduce_perf" -t 1 -b 8 -e 8 -n 1 -w 0 -c 1; then
  probe_ok=1
else
  record SKIPPED collective-benchmarks 0 "(all_reduce_perf cannot run one rank in CHORUS_MODE=$mode; see mode-probe.log)"
  grep -m2 -iE "gpu|cuda|fail|error" "$out/mode-probe.log" | cut -c1-200 | sed 's/^/    /' | tee -a "$summary"
fi

if [ "$probe_ok" = 1 ]; then
  # Launch latency: 2 ranks, 8 bytes, plain launches and one CUDA graph of
  # 100 iterations replayed 10 times.
  run latency-t2-launch 40 latency "$bin/all_reduce_perf" -t 2 -b 8 -e 8 -n 1000 -w 100 -c 1
  run latency-t2-graph 40 latency "$bin/all_reduce_perf" -t 2 -b 8 -e 8 -n 100 -w 100 -c 1 -G 10

  # The matrix. 50 s stay reserved for the MPS run after it.
  full_deadline=$deadline
  deadline=$((deadline - 50))
  declare -A hung=()  # collective -> the run that timed out
  for t in 2 4 8; do
    for coll in all_reduce all_gather reduce_scatter sendrecv; do
      for dt in float half bfloat16; do
        name="perf-$coll-t$t-$dt"
        if [ -n "${hung[$coll]:-}" ]; then
          record SKIPPED "$name" 0 "(${hung[$coll]} timed out)"
          continue
        fi
        rc=0
        # shellcheck disable=SC2086
        run "$name" "$run_timeout" perf "$bin/${coll}_perf" -t "$t" -b 8 -e "$max_bytes" -f 4 -c 1 -d "$dt" $perf_args || rc=$?
        [ "$rc" -eq 124 ] && hung[$coll]=$name
      done
    done
  done
  deadline=$full_deadline

  # Two processes on the one GPU need MPS to run their kernels side by side.
  if ! command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
    record SKIPPED mps-2proc-all_reduce 0 "(nvidia-cuda-mps-control not found)"
  else
    mps_pipe="$out/mps/pipe"
    # The control socket's path must fit a sockaddr_un (108 bytes).
    [ ${#mps_pipe} -gt 80 ] && mps_pipe="$(mktemp -d /tmp/chorus-mps.XXXXXX)"
    mkdir -p "$mps_pipe" "$out/mps/log"
    if CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps/log" \
      timeout 20 nvidia-cuda-mps-control -d >"$out/mps-start.log" 2>&1; then
      run mps-2proc-all_reduce 45 perf env CUDA_MPS_PIPE_DIRECTORY="$mps_pipe" \
        CUDA_MPS_LOG_DIRECTORY="$out/mps/log" "$bin/chorusrun" -n 2 -- "$bin/all_reduce_perf" -b 8 -e 256M -f 4 \
        -c 1 -w 2 -n 10
      stop_mps
    else
      mps_pipe=""
      record SKIPPED mps-2proc-all_reduce 0 "(MPS daemon did not start: $(head -c 100 "$out/mps-start.log"))"
    fi
  fi
fi

passed=$(grep -c '^PASS ' "$summary")
failed=$(grep -cE '^(FAIL|TIMEOUT) ' "$summary")
skipped=$(grep -c '^SKIPPED ' "$summary")
note "done in ${SECONDS}s: $passed passed, $failed failed or timed out, $skipped skipped"
