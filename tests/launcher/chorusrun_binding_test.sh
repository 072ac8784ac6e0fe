#!/usr/bin/env bash
# chorusrun pins each local process to a core of its own when they fit
# (--bind-to core, the default) and leaves them unbound otherwise: checked
# from the children's own /proc/self/status.
#   chorusrun_binding_test.sh CHORUSRUN
set -euo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
all=$(grep Cpus_allowed_list /proc/self/status | awk '{print $2}')
# Cores this shell may use: distinct core_cpus_list of the allowed CPUs.
cores=$(for c in $(python3 -c "
import os; print(' '.join(map(str, sorted(os.sched_getaffinity(0)))))"); do
  cat /sys/devices/system/cpu/cpu$c/topology/core_cpus_list 2>/dev/null || echo $c; done | sort -u | wc -l)
lists() {  # args for chorusrun: prints each child's allowed list, one line per child
  "$run" "$@" -- sh -c 'grep Cpus_allowed_list /proc/self/status | awk "{print \$2}"'
}

if [ "$cores" -ge 2 ]; then
  got=$(lists -n 2)
  [ "$(echo "$got" | sort -u | wc -l)" = 2 ] || fail "two processes share CPUs: $got"
  ! echo "$got" | grep -qx "$all" || fail "a process kept the whole set $all: $got"
  got=$(CHORUS_BIND_TO=none lists -n 2)
  [ "$(echo "$got" | grep -cx "$all")" = 2 ] || fail "CHORUS_BIND_TO=none still bound: $got"
  got=$(CHORUS_BIND_TO=none lists -n 2 --bind-to core)
  [ "$(echo "$got" | sort -u | wc -l)" = 2 ] || fail "--bind-to core did not override the environment: $got"
fi
got=$(lists -n 2 --bind-to none)
[ "$(echo "$got" | grep -cx "$all")" = 2 ] || fail "--bind-to none still bound: $got"
over=$((cores + 1))
got=$(lists -n "$over")
[ "$(echo "$got" | grep -cx "$all")" = "$over" ] || fail "$over processes on $cores cores were bound: $got"
if "$run" -n 1 --bind-to socket -- true 2>/dev/null; then fail "--bind-to socket accepted"; fi
echo "chorusrun binding OK ($cores cores, allowed $all)"
