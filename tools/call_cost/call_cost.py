#!/usr/bin/env python3
"""Instructions per call of a host-mode collective, counted by callgrind.

Wall time of a sub-microsecond call moves by +-30 % on a shared VM; the
number of instructions a call executes does not. This runs all_reduce_perf
(or another nccl-tests style benchmark) under callgrind twice, with N1 and
N2 iterations, and divides the difference by the calls in between, so start-up
and set-up cancel out. With one rank (the default) no waits enter the count;
with more rank threads the waits do, and vary from run to run.

  tools/call_cost/call_cost.py BUILD [BUILD_B] [--ranks 1] [--bytes 1K] [--top 25]

With two builds it prints both totals and the functions whose per-call
count differs most (B minus A). Needs valgrind (`apt-get install valgrind`;
not part of scripts/setup.sh, since no test uses it).
"""
import argparse
import collections
import os
import re
import subprocess
import sys
import tempfile


def run_callgrind(build, bench, ranks, size, iters, out):
    env = dict(os.environ, CHORUS_MODE="host", CHORUS_SPIN_COUNT="0")
    cmd = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
           os.path.join(build, "bin", bench), "-t", str(ranks), "-b", size, "-e", size,
           "-n", str(iters), "-w", "0", "-c", "0"]
    res = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if res.returncode != 0:
        sys.exit(f"call_cost: {' '.join(cmd)} failed:\n{res.stderr[-2000:]}")


def self_costs(profile):
    """Per-function self instruction counts, keyed without the build's path."""
    out = subprocess.run(["callgrind_annotate", "--threshold=100", "--inclusive=no", profile],
                         capture_output=True, text=True, check=True).stdout
    costs, state = collections.defaultdict(int), 0
    for line in out.splitlines():
        if "file:function" in line:
            state = 1
        elif state == 1 and line.startswith("--"):
            state = 2
        elif state == 2:
            m = re.match(r"^\s*([\d,]+)\s+(\([^)]*\))?\s*(.*)$", line)
            if not m:
                break
            name = re.sub(r"\s*\[[^\]]*\]\s*$", "", m.group(3))
            name = re.sub(r"^/.*?/(src|kernels|benchmarks|transports)/", r"\1/", name)
            costs[name] += int(m.group(1).replace(",", ""))
    return costs


def per_call(build, args, tmp):
    n1, n2 = args.iters
    profiles = []
    for n in (n1, n2):
        path = os.path.join(tmp, f"{abs(hash(build))}.{n}")
        run_callgrind(build, args.bench, args.ranks, args.bytes, n, path)
        profiles.append(self_costs(path))
    # Each iteration times an out-of-place and an in-place call on every rank.
    calls = 2 * (n2 - n1) * args.ranks
    keys = set(profiles[0]) | set(profiles[1])
    return {k: (profiles[1].get(k, 0) - profiles[0].get(k, 0)) / calls for k in keys}


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("builds", nargs="+", help="one or two build directories (with bin/)")
    p.add_argument("--bench", default="all_reduce_perf")
    p.add_argument("--ranks", type=int, default=1, help="rank threads (-t)")
    p.add_argument("--bytes", default="1K")
    p.add_argument("--iters", type=int, nargs=2, default=[1000, 3000], metavar=("N1", "N2"))
    p.add_argument("--top", type=int, default=25)
    args = p.parse_args()
    if len(args.builds) > 2:
        p.error("one or two builds")
    with tempfile.TemporaryDirectory() as tmp:
        costs = [per_call(b, args, tmp) for b in args.builds]
    for b, c in zip(args.builds, costs):
        print(f"{b}: {sum(c.values()):.0f} instructions per call and rank "
              f"({args.bench}, {args.bytes}, {args.ranks} rank thread(s))")
    shown = costs[0] if len(costs) == 1 else {
        k: costs[1].get(k, 0) - costs[0].get(k, 0) for k in set(costs[0]) | set(costs[1])}
    title = "per call" if len(costs) == 1 else "per call, B minus A"
    print(f"\n{title}:")
    for k, v in sorted(shown.items(), key=lambda kv: -abs(kv[1]))[:args.top]:
        print(f"{v:9.1f}  {k[:150]}")


if __name__ == "__main__":
    main()
