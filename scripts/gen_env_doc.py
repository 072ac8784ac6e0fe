#!/usr/bin/env python3
"""Regenerates docs/env.md from src/core/params.def (the knob registry).

Run after adding a knob; tests/unit/params_doc_test.cc fails when the two drift.
"""
import pathlib
import re

root = pathlib.Path(__file__).resolve().parent.parent
text = "\n".join(l for l in (root / "src/core/params.def").read_text().splitlines() if not l.lstrip().startswith("//"))
# CHORUS_PARAM_INT(name, "ENV", default, "doc") / CHORUS_PARAM_STR(name, "ENV", "default", "doc"),
# possibly spanning lines; doc strings may be split into adjacent literals.
pattern = re.compile(r'CHORUS_PARAM_(INT|STR)\(\s*(\w+)\s*,\s*"([^"]+)"\s*,\s*("(?:[^"\\]|\\.)*"|[^,]+)\s*,((?:\s*"(?:[^"\\]|\\.)*")+)\s*\)', re.S)
rows = []
for m in pattern.finditer(text):
    kind, _, env, default, doc = m.groups()
    default = default.strip()
    if default.startswith('"'):
        default = default[1:-1]
    doc = "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', doc))
    rows.append((env, kind.lower(), default if default != "" else "(empty)", doc))

out = ["# Environment variables", "",
       "Every knob Chorus reads, generated from `src/core/params.def` by `scripts/gen_env_doc.py`.",
       "Values are read when a communicator is created (logging: at first use, or on `ncclResetDebugInit`).", "",
       "| Variable | Type | Default | Meaning |", "|---|---|---|---|"]
for env, kind, default, doc in rows:
    cell = doc.replace("|", "\\|")
    out.append(f"| `{env}` | {kind} | `{default}` | {cell} |")
(root / "docs/env.md").write_text("\n".join(out) + "\n")
print(f"docs/env.md: {len(rows)} knobs")
