#!/usr/bin/env bash
# A plan's size does not depend on the message size: chorus-topo --plan
# must print the same "plan size" line for 1 MiB and 16 GiB (ring all-reduce,
# 8 ranks), for a tree all-reduce and an all-gather, and the 16 GiB build must
# take under 50 us. The plan it prints is the library's: collective pieces of
# 512 KiB where every host holds one rank (2 x 1), 128 KiB where hosts hold
# two (2 x 2), and CHORUS_SLOT_BYTES wins over both.
# Usage: plan_size_test.sh path/to/chorus-topo
set -euo pipefail
topo="$1"
export CHORUS_MODE=host
fail=0
size_of() { "$topo" --synthetic host:1x8 --plan "$@" | grep -E '^  plan size:' ; }
for coll in allreduce allgather; do
  for algo in Ring Tree; do
    [ "$coll" = allgather ] && [ "$algo" = Tree ] && continue
    small=$(NCCL_ALGO=$algo size_of "$coll" 1M)
    large=$(NCCL_ALGO=$algo size_of "$coll" 16G)
    echo "$coll $algo 1M:  $small"
    echo "$coll $algo 16G: $large"
    if [ -z "$small" ] || [ "$small" != "$large" ]; then
      echo "FAIL: $coll ($algo) plan size differs between 1 MiB and 16 GiB"; fail=1
    fi
  done
done
us=$("$topo" --synthetic host:1x8 --plan allreduce 16G | sed -n 's/^  build time: \([0-9.]*\) us.*/\1/p')
echo "16 GiB all-reduce, 8 ranks: plan built in $us us"
if [ -z "$us" ] || ! awk -v u="$us" 'BEGIN { exit !(u < 50) }'; then
  echo "FAIL: building the 16 GiB plan took ${us:-?} us (limit 50)"; fail=1
fi
steps=$("$topo" --synthetic host:1x8 --plan allreduce 16G | grep -c 'ring-allreduce.*30720 steps' || true)
if [ "$steps" -lt 1 ]; then
  echo "FAIL: the 16 GiB plan does not generate the expected 2048 rounds x 15 steps per channel"; fail=1
fi
pieces_of() { "$topo" --synthetic "$1" --plan allreduce 16M | sed -n 's/.*pieces of \([0-9]*\) bytes.*/\1/p' | sort -u; }
for want in "host:2x1 524288" "host:2x2 131072"; do
  got=$(pieces_of "${want% *}")
  echo "${want% *}: pieces of $got bytes"
  [ "$got" = "${want#* }" ] || { echo "FAIL: ${want% *} plans pieces of $got bytes, the library ${want#* }"; fail=1; }
done
got=$(CHORUS_SLOT_BYTES=65536 pieces_of host:2x1)
[ "$got" = 65536 ] || { echo "FAIL: CHORUS_SLOT_BYTES=65536 at 2 x 1 plans pieces of $got bytes"; fail=1; }
[ "$fail" -eq 0 ] && echo "1 passed, 0 failed" || { echo "0 passed, 1 failed"; exit 1; }
