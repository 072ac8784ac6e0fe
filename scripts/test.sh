#!/usr/bin/env bash
# The test command (README, CI): installs dependencies, builds, runs the whole
# suite, then builds with AddressSanitizer + UndefinedBehaviorSanitizer and
# runs the suite again under them.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
"$root/scripts/setup.sh"
export CHORUS_MODE=host
# Bootstrap traffic of the tests stays on loopback.
export NCCL_SOCKET_IFNAME=${NCCL_SOCKET_IFNAME:-lo}
jobs=$(nproc)

# One build's tests: the idle ones (label "idle": a peer late or stopped on
# purpose, tests/CMakeLists.txt) in the background, the rest on the -j slots
# meanwhile; the idle ones' output follows. A third argument names one more
# label to skip. Fails if either part failed.
run_tests() {
  local dir=$1 timeout=$2 skip=${3:-}
  local idle_log="$dir/idle-tests.log" idle_rc=0 rc=0
  ctest --test-dir "$dir" --output-on-failure -j 8 --timeout "$timeout" -L '^idle$' ${skip:+-LE "^$skip\$"} \
    >"$idle_log" 2>&1 &
  local idle_pid=$!
  ctest --test-dir "$dir" --output-on-failure -j "$jobs" --timeout "$timeout" -LE "^(idle${skip:+|$skip})\$" || rc=$?
  wait "$idle_pid" || idle_rc=$?
  echo "== idle tests of $dir (run beside the others) =="
  cat "$idle_log"
  [ "$rc" = 0 ] && [ "$idle_rc" = 0 ]
}

echo "== build (RelWithDebInfo) =="
# The CUDA kernels (when nvcc exists): with a GPU visible, machine code for
# that GPU's architecture (CUDAARCHS applies to this configure only); without
# one, PTX for compute_90 only ("90-virtual"): every kernel instance still
# goes through nvcc's front end and NVVM with warnings as errors, but ptxas,
# 54% of the kernels' compile time, is left to the machines that can run its
# output (the device check builds for its GPU). The default without a GPU,
# sm_80 + sm_90 + PTX, would cost 6 times as much (docs/performance.md, "CI
# duration").
# Line tables only (-g1, not -g): backtraces and gdb keep file:line, and a
# test file compiles in two thirds of the time; GoogleTest's header parsed
# once per test executable (docs/performance.md, "CI duration"; clang-tidy
# needs a build without it, docs/testing.md).
flags=("-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG"
  -DCHORUS_PRECOMPILE_TEST_HEADERS=ON)
gpu_visible=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU '; then gpu_visible=1; fi
if [ "$gpu_visible" = 1 ] || [ -n "${CUDAARCHS:-}" ]; then
  "$root/scripts/build.sh" "$root/build" "${flags[@]}"
else
  CUDAARCHS=90-virtual "$root/scripts/build.sh" "$root/build" "${flags[@]}"
fi
echo "== tests =="
run_tests "$root/build" 300

echo "== build (ASan + UBSan) =="
# The CUDA kernels were compiled (and their host-side tests run) above; the
# sanitizer build leaves them out, since no GPU code can run here anyway.
# -O1 -g1 compiles the instrumented code 3-4x faster than -O2 -g (45 s -> 12 s
# for the largest test file) and still gives ASan/UBSan file:line stacks.
"$root/scripts/build.sh" "$root/build-san" -DCHORUS_SANITIZE=address,undefined -DCHORUS_BUILD_BENCHMARKS=OFF \
  -DCHORUS_PRECOMPILE_TEST_HEADERS=ON -DCHORUS_ENABLE_CUDA=OFF "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG"
echo "== tests under sanitizers =="
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  LSAN_OPTIONS=suppressions=$root/tests/lsan.supp
run_tests "$root/build-san" 600 nosan
