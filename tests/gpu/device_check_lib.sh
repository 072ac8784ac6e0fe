#!/usr/bin/env bash
# shellcheck disable=SC2154,SC2119,SC2120 # the caller's variables; publish takes an optional "force"
# Sourced by tests/gpu/device_check.sh: how a step is run, judged and
# recorded. Uses the caller's work, out, summary, end_at and stale, and its
# deadline (set before the run phase); defines bg, run, have, record, note,
# publish and the key_*/ok_* readers of step logs.

# ---- results: the work folder, copied to OUT as it goes ----------------------
last_pack=-100
pack_logs() { # logs.tgz, replaced atomically (a call cut short keeps the last one)
  # GNU tar exits 1 when a file changed while it was read (a running step's
  # log): the archive is still complete. The MPS pipe folders hold sockets.
  local rc=0
  tar -C "$work" --exclude='./mps-*/pipe' --warning=no-file-changed -czf "$out/.logs.tgz.part" . 2>/dev/null || rc=$?
  if [ "$rc" -le 1 ]; then mv -f "$out/.logs.tgz.part" "$out/logs.tgz"; else rm -f "$out/.logs.tgz.part"; fi
  last_pack=$SECONDS
}
publish() { # summary now; the logs at most every 20 s unless forced
  cp -f "$summary" "$out/summary.txt"
  if [ "${1:-}" = force ] || [ $((SECONDS - last_pack)) -ge 20 ]; then pack_logs; fi
}
note() {
  echo "$*" | tee -a "$summary"
  publish
}
# record STATUS NAME SECONDS KEY: one record line.
record() { note "$(printf '%-7s %-34s %4ss  %s' "$1" "$2" "$3" "$4")"; }
# Text for the summary file only (tables, test names), not for stdout.
to_summary() { sed 's/^/    /' >>"$summary"; }
left() { echo $((end_at - SECONDS)); }

# ---- key numbers, pulled from a log by kind ---------------------------------
key_perf() { # benchmark table: wrong count, average busbw, busbw of the largest row
  local log=$1
  local wrong avg last
  wrong=$(sed -n 's/^# Out of bounds values : \([0-9]*\).*/\1/p' "$log" | tail -n 1)
  avg=$(sed -n 's/^# Avg bus bandwidth *: *\([0-9.e+-]*\).*/\1/p' "$log" | tail -n 1)
  last=$(grep -E '^ +[0-9]+ ' "$log" | tail -n 1 | awk '{printf "%s B: busbw %s GB/s (oop), %s GB/s (in-place)", $1, $8, $12}')
  echo "wrong=${wrong:-?} avg-busbw=${avg:-?} GB/s; largest ${last:-row missing}"
}
key_probe() { key_perf "$1"; }
key_latency() { # time of the 8-byte row, out-of-place and in-place
  grep -E '^ +8 ' "$1" | tail -n 1 | awk '{printf "8 B all-reduce: %s us (oop), %s us (in-place), #wrong %s/%s", $6, $10, $9, $13}'
}
key_ctest() {
  local line skipped
  line=$(grep -E "tests passed|tests failed" "$1" | tail -n 1)
  skipped=$(grep -c '(Skipped)' "$1")
  echo "$line; $skipped skipped"
}
gtest_count() { # gtest_count LOG WORD: the number on gtest's "[  WORD  ] N test(s)" line
  sed -n "s/^\[ *$2 *\] \([0-9][0-9]*\) tests\{0,1\}[,.].*/\1/p" "$1" | tail -n 1
}
gtest_total() { sed -n 's/^\[==========\] \([0-9][0-9]*\) tests\{0,1\} from .* ran\..*/\1/p' "$1" | tail -n 1; }
key_gtest() {
  local total passed failed skipped
  total=$(gtest_total "$1")
  passed=$(gtest_count "$1" PASSED)
  failed=$(gtest_count "$1" FAILED)
  skipped=$(gtest_count "$1" SKIPPED)
  echo "${total:-?} tests: ${passed:-0} passed, ${failed:-0} failed, ${skipped:-0} skipped"
}
key_gdr() { gdr_key "$1" regMr; }
key_dmabuf() { gdr_key "$1" regMrDmaBuf; }
gdr_key() { # LOG REGISTRATION: key_perf, then what the GPUDirect run must show
  local log=$1 slots=no recvs flushes viol
  if grep -qF "slots in device ($2) memory" "$log"; then
    slots=yes
  else  # why not: the first placement line
    slots="no ($(grep -o 'slots in host memory.*' "$log" | head -n 1 | cut -c1-120))"
  fi
  recvs=$(sed -n 's/.*receive comm closed: \([0-9]*\) receive.* \([0-9]*\) flush.*/\1/p' "$log" | awk '{n += $1} END {print n + 0}')
  flushes=$(sed -n 's/.*receive comm closed: \([0-9]*\) receive.* \([0-9]*\) flush.*/\2/p' "$log" | awk '{n += $1} END {print n + 0}')
  viol=$(grep -cF 'nccl-test-net: VIOLATION' "$log")
  echo "$(key_perf "$log"); device slots: $slots; device receives $recvs, flushes $flushes; violations $viol"
}
key_copy() { awk '/^memcpy D2D/ {printf "D2D copy %s GB/s (HBM reference)", $4}' "$1"; }
key_none() { tail -n 1 "$1" | cut -c1-100; }

# ---- verdicts beyond the exit status, by kind --------------------------------
ok_perf() { grep -q '^# Out of bounds values : 0 OK' "$1"; }
# GPUDirect: right results, device slots chosen, receives into device memory
# seen by the plugin's closeRecv check, and no plugin violation.
ok_gdr() { gdr_ok "$1" regMr; }
ok_dmabuf() { gdr_ok "$1" regMrDmaBuf; }
gdr_ok() { # LOG REGISTRATION
  ok_perf "$1" && grep -qF "slots in device ($2) memory" "$1" && ! grep -qF 'nccl-test-net: VIOLATION' "$1" &&
    grep -qE 'receive comm closed: [1-9][0-9]* receive' "$1"
}
# The dma-buf run cannot pass where the driver exports no dma-buf (the open
# kernel modules and Linux 5.12+ are needed): SKIPPED with the reason then.
dmabuf_unsupported() { grep -qF 'no dma-buf can be exported: host staging' "$1"; }
ok_any() { true; }
# A run that skipped itself: exit status 77 (the kernel benchmarks without a
# device), or a test run in which every test skipped.
all_skipped() {
  local rc=$1 log=$2 kind=$3 total skipped
  [ "$rc" -eq 77 ] && return 0
  case $kind in
    dmabuf) [ "$rc" -eq 0 ] && dmabuf_unsupported "$log"; return ;;
    ctest)
      total=$(sed -n 's/.*tests failed out of \([0-9]*\).*/\1/p' "$log" | tail -n 1)
      skipped=$(grep -c '(Skipped)' "$log")
      ;;
    gtest)
      total=$(gtest_total "$log")
      skipped=$(gtest_count "$log" SKIPPED)
      ;;
    *) return 1 ;;
  esac
  [ -n "$total" ] && [ -n "$skipped" ] && [ "$total" -gt 0 ] && [ "$skipped" -eq "$total" ]
}

# bg CMD...: runs CMD (a timeout command) in the background, stdin from
# /dev/null, and waits for it, so that a signal's trap runs at once (bash
# defers traps while a foreground child runs); child is its pid meanwhile,
# for the trap to kill. CMD does not inherit the caller's fds 8 and 9 (the
# script's original stdout and stderr).
child=""
bg() {
  local rc=0
  "$@" </dev/null 8>&- 9>&- &
  child=$!
  wait "$child" || rc=$?
  child=""
  return "$rc"
}

# run NAME TIMEOUT_S KIND cmd...: runs cmd (bounded by the timeout and the
# budget), logs to NAME.log, records PASS/FAIL/TIMEOUT/SKIPPED and the key
# number; returns 0 (pass or skipped), 1 (fail), 124 (timeout) or 125 (not
# run or cut off: the budget ran out). With under 20 s of the budget left the
# run is SKIPPED (budget); a run whose timeout the budget shortened and that
# is killed at it is SKIPPED (budget: cut off), not TIMEOUT: no sign of a hang.
deadline=0
run() {
  local name=$1 tmo=$2 kind=$3 cut=0
  shift 3
  local left=$((deadline - SECONDS))
  if [ "$left" -lt 20 ]; then
    record SKIPPED "$name" 0 "(budget: ${left}s left)"
    return 125
  fi
  if [ "$left" -lt "$tmo" ]; then
    tmo=$left
    cut=1
  fi
  local t0=$SECONDS rc=0 status log="$work/$name.log"
  bg timeout -k 10 "$tmo" "$@" >"$log" 2>&1 || rc=$?
  local verdict=ok_any
  case $kind in perf | latency | probe) verdict=ok_perf ;; gdr) verdict=ok_gdr ;; dmabuf) verdict=ok_dmabuf ;; esac
  if { [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; } && [ "$cut" = 1 ]; then
    status=CUT
  elif [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    status=TIMEOUT
  elif all_skipped "$rc" "$log" "$kind"; then
    status=SKIPPED
  elif [ "$rc" -eq 0 ] && "$verdict" "$log"; then
    status=PASS
  else
    status=FAIL
  fi
  local key
  key="$("key_$kind" "$log" 2>/dev/null)"
  [ -n "$key" ] || key="$(key_none "$log")"
  [ "$status" = TIMEOUT ] && key="(killed after ${tmo}s) $key"
  [ "$status" = FAIL ] && key="rc=$rc $key"
  if [ "$status" = CUT ]; then
    record SKIPPED "$name" "$((SECONDS - t0))" "(budget: cut off after ${tmo}s, the time left) $key"
    return 125
  fi
  record "$status" "$name" "$((SECONDS - t0))" "$key"
  case $status in PASS | SKIPPED) return 0 ;; TIMEOUT) return 124 ;; *) return 1 ;; esac
}
# have BINARY NAME: true when the binary was built, else records NAME SKIPPED.
have() {
  [ -x "$1" ] && [ -z "${stale[$1]:-}" ] && return 0
  record SKIPPED "$2" 0 "(not built: $(basename "$1"); see build.log)"
  return 1
}
