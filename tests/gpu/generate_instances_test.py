#!/usr/bin/env python3
"""Tests kernels/generate_instances.py: which files a filter produces, what the
dispatch reports as compiled, and that bad filters fail with a clear message."""
import os
import subprocess
import sys
import tempfile

GEN = sys.argv[1]


def run(filter_text):
    out = tempfile.mkdtemp()
    p = subprocess.run([sys.executable, GEN, out, filter_text], capture_output=True, text=True)
    return p, out


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)
    print("ok:", what)


p, out = run("all")
check(p.returncode == 0, "'all' generates")
names = open(os.path.join(out, "instances.txt")).read().split()
check(len(names) == 3 * 12 + 1, f"'all': one file per family and type plus dispatch ({len(names)})")
dispatch = open(os.path.join(out, "dispatch.cu")).read()
check('return "all"' in dispatch, "'all' is reported by kernelFilter()")

p, out = run("f32:sum, bf16:*")
check(p.returncode == 0, "a list with a wildcard generates")
names = sorted(open(os.path.join(out, "instances.txt")).read().split())
check(names == ["dispatch.cu", "lanes_bf16.cu", "lanes_f32.cu", "lanes_u8.cu", "reduce_bf16.cu", "reduce_f32.cu",
                 "reduce_u8.cu", "wire_bf16.cu", "wire_f32.cu", "wire_u8.cu"],
      f"only the selected types (and u8:sum, for point-to-point) get files ({names})")
u8 = open(os.path.join(out, "lanes_u8.cu")).read()
check("ReduceKind::Sum>" in u8 and "ReduceKind::Max>" not in u8, "u8 gets sum only, for byte copies")
check("preloadLanes_u8(size_t* stackBytes)" in u8 and "preloadKernel(laneKernel<T, ReduceKind::Sum>" in u8,
      "lane type files define their preload, which reports the kernels' stack")
check("using T = ElemOf<ncclUint8>;" in u8 and '#include "core/type_dispatch.h"' in u8,
      "a type file takes its element type from the host's table (ElemOf)")
f32 = open(os.path.join(out, "reduce_f32.cu")).read()
check("ReduceKind::Sum>" in f32 and "ReduceKind::Prod>" not in f32, "f32 gets sum only")
bf16 = open(os.path.join(out, "lanes_bf16.cu")).read()
check(all(f"ReduceKind::{k}>" in bf16 for k in ["Sum", "Prod", "Max", "Min", "PreMulSum", "SumPostDiv"]),
      "bf16:* gets every reduction")
dispatch = open(os.path.join(out, "dispatch.cu")).read()
check("case ncclFloat64" not in dispatch, "unselected types are not dispatched")
check("preloadLaneKernels(size_t* stackBytes)" in dispatch and "preloadLanes_bf16(stackBytes)" in dispatch,
      "dispatch preloads every lane type")
check("preloadWire_bf16(stackBytes)" in dispatch and "launchWire(const LaneLaunch& a" in dispatch,
      "dispatch preloads and launches the wire kernels too")
wire = open(os.path.join(out, "wire_bf16.cu")).read()
check("wireKernel<T, ReduceKind::SumPostDiv>" in wire and "using T = ElemOf<ncclBfloat16>;" in wire,
      "wire type files preload their wire kernels")

for bad, word in [("f33:sum", "unknown type"), ("f32:plus", "unknown kind"), ("f32", "expected TYPE:KIND"),
                  (",", "selects nothing")]:
    p, _ = run(bad)
    check(p.returncode != 0 and word in p.stderr, f"bad filter '{bad}' fails with '{word}'")

# Re-running with the same filter must not touch the files (no rebuild).
p, out = run("f32:sum")
path = os.path.join(out, "reduce_f32.cu")
before = os.stat(path).st_mtime_ns
subprocess.run([sys.executable, GEN, out, "f32:sum"], check=True)
check(os.stat(path).st_mtime_ns == before, "unchanged output is not rewritten")
print("all generator checks passed")
