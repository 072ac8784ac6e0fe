#!/usr/bin/env bash
# A kill -9 of chorusrun takes its ranks down with it (PR_SET_PDEATHSIG):
# every child must be gone within 2 s.
#   chorusrun_parent_death_test.sh CHORUSRUN
set -uo pipefail
run=$1
fail() { echo "FAIL: $*" >&2; exit 1; }
"$run" -n 3 --bind-to none -- sleep 600 &
launcher=$!
children=""
for _ in $(seq 100); do  # up to 5 s for the three children to start
  children=$(pgrep -P "$launcher" | tr '\n' ' ')
  [ "$(echo $children | wc -w)" = 3 ] && break
  sleep 0.05
done
[ "$(echo $children | wc -w)" = 3 ] || { kill -9 "$launcher"; fail "chorusrun did not start 3 children (got: $children)"; }
kill -9 "$launcher"
wait "$launcher" 2>/dev/null
t0=$(date +%s%N)
while :; do
  left=""
  for c in $children; do
    # A zombie is gone too (nobody reaps it until init adopts it).
    state=$(awk '{print $3}' "/proc/$c/stat" 2>/dev/null || true)
    [ -n "$state" ] && [ "$state" != Z ] && left="$left $c"
  done
  [ -z "$left" ] && break
  ms=$((($(date +%s%N) - t0) / 1000000))
  if ((ms > 2000)); then
    kill -9 $left 2>/dev/null
    fail "children$left still running ${ms} ms after chorusrun was killed"
  fi
  sleep 0.02
done
echo "ok: all 3 children gone $((($(date +%s%N) - t0) / 1000000)) ms after kill -9 of chorusrun"
