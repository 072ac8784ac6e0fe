#!/usr/bin/env python3
"""Merges the timeline.<pid> files of libchorus_timeline.so (timeline.cc) into
one time line, each process in its own column, and prints a window of it.

  tools/syscall_timeline/show.py DIR [--events N] [--at FRACTION]

--at picks where the window starts (0.5: the middle of the run, away from
setup and teardown). Times are microseconds from the window's first call;
"+d" is how long the call took."""
import argparse
import glob
import os

NAMES = {1: "sendmsg", 2: "recv", 3: "send", 4: "yield", 5: "AllReduce>", 6: "AllReduce<"}


def load(directory):
    events = []
    for path in sorted(glob.glob(os.path.join(directory, "timeline.*"))):
        pid = path.rsplit(".", 1)[1]
        with open(path) as f:
            for line in f:
                start, end, tid, call, fd, result = (int(x) for x in line.split())
                events.append((start, end, pid, tid, call, fd, result))
    events.sort()
    return events


def main():
    p = argparse.ArgumentParser()
    p.add_argument("dir")
    p.add_argument("--events", type=int, default=60)
    p.add_argument("--at", type=float, default=0.5)
    a = p.parse_args()
    events = load(a.dir)
    if not events:
        raise SystemExit(f"no timeline.* files in {a.dir}")
    pids = sorted({e[2] for e in events})
    first = min(int(len(events) * a.at), len(events) - 1)
    base = events[first][0]
    for start, end, pid, tid, call, fd, result in events[first:first + a.events]:
        text = f"{(start - base) / 1000:9.2f} +{(end - start) / 1000:5.2f} t{tid} {NAMES.get(call, call)}"
        if fd >= 0:
            text += f"({fd})"
        text += f" = {result}"
        print(" " * 56 * pids.index(pid) + text)


if __name__ == "__main__":
    main()
