#!/usr/bin/env python3
"""Runs examples/dp_train three ways (native fp32 gradients, int8 with error
feedback, int8 without) and plots the three loss curves into a PNG.

    examples/plot_convergence.py [--build build] [--out convergence.png]
                                 [--steps 300] [--ranks 8]

Needs nothing beyond the Python standard library: the PNG is drawn and
encoded here (a small bitmap font for the labels, zlib for the image data).
Prints the final losses and whether int8 with feedback ended within 1% of
native (exit code 1 if not).
"""
import argparse
import csv
import os
import struct
import subprocess
import sys
import zlib

VARIANTS = [  # label, CSV suffix, dp_train arguments, colour
    ("native fp32", "native", ["--wire", "native"], (40, 90, 200)),
    ("int8 + error feedback", "int8_feedback", ["--wire", "int8", "--feedback", "1"], (20, 160, 60)),
    ("int8 without feedback", "int8", ["--wire", "int8", "--feedback", "0"], (210, 60, 40)),
]

# 5x7 glyphs, one string of 7 rows of 5 columns per character.
FONT = {
    "0": "01110100011001110101110011000101110", "1": "00100011000010000100001000010001110",
    "2": "01110100010000100010001000100011111", "3": "11110000010000101110000010000111110",
    "4": "00010001100101010010111110001000010", "5": "11111100001111000001000011000101110",
    "6": "00110010001000011110100011000101110", "7": "11111000010001000100010000100001000",
    "8": "01110100011000101110100011000101110", "9": "01110100011000101111000010001001100",
    ".": "00000000000000000000000000110001100", "-": "00000000000000011111000000000000000",
    "+": "00000001000010011111001000010000000", " ": "0" * 35,
    ",": "00000000000000000000001100010001000", "(": "00010001000100001000010000010000010",
    ")": "01000001000001000010000100010001000", "a": "00000000000111000001011111000101111",
    "b": "10000100001011011001100011000111110", "c": "00000000000111010000100001000101110",
    "d": "00001000010110110011100011000101111", "e": "00000000000111010001111111000001110",
    "f": "00110010010100011100010000100001000", "g": "00000011111000110001011110000101110",
    "h": "10000100001011011001100011000110001", "i": "00100000000110000100001000010001110",
    "k": "10000100001001010100110001010010010", "l": "01100001000010000100001000010001110",
    "m": "00000000001101010101101011000110001", "n": "00000000001011011001100011000110001",
    "o": "00000000000111010001100011000101110", "p": "00000000001111010001111101000010000",
    "r": "00000000001011011001100001000010000", "s": "00000000000111010000011100000111110",
    "t": "01000010001110001000010000100100110", "u": "00000000001000110001100011001101101",
    "v": "00000000001000110001100010101000100", "w": "00000000001000110001101011010101010",
    "x": "00000000001000101010001000101010001", "y": "00000000001000110001011110000101110",
}


class Canvas:
    def __init__(self, w, h):
        self.w, self.h = w, h
        self.px = bytearray(b"\xff" * (w * h * 3))

    def dot(self, x, y, c):
        if 0 <= x < self.w and 0 <= y < self.h:
            i = (y * self.w + x) * 3
            self.px[i:i + 3] = bytes(c)

    def line(self, x0, y0, x1, y1, c, width=1):
        n = max(abs(x1 - x0), abs(y1 - y0), 1)
        for k in range(n + 1):
            x = round(x0 + (x1 - x0) * k / n)
            y = round(y0 + (y1 - y0) * k / n)
            for dx in range(width):
                for dy in range(width):
                    self.dot(x + dx - width // 2, y + dy - width // 2, c)

    def text(self, x, y, s, c=(0, 0, 0), scale=2):
        for ch in s:
            g = FONT.get(ch, FONT[" "])
            for r in range(7):
                for col in range(5):
                    if g[r * 5 + col] == "1":
                        for a in range(scale):
                            for b in range(scale):
                                self.dot(x + col * scale + a, y + r * scale + b, c)
            x += 6 * scale

    def png(self, path):
        raw = b"".join(b"\x00" + bytes(self.px[y * self.w * 3:(y + 1) * self.w * 3]) for y in range(self.h))

        def chunk(kind, data):
            return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

        with open(path, "wb") as f:
            f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", self.w, self.h, 8, 2, 0, 0, 0)) +
                    chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


def plot(curves, path, title):
    w, h, left, right, top, bottom = 900, 560, 90, 30, 50, 60
    cv = Canvas(w, h)
    steps = max(len(pts) for _, pts, _ in curves) - 1
    lo = min(min(p) for _, p, _ in curves)
    hi = max(max(p) for _, p, _ in curves)
    span = (hi - lo) or 1.0
    sx = lambda s: left + (w - left - right) * s / max(steps, 1)
    sy = lambda v: top + (h - top - bottom) * (hi - v) / span
    grey = (200, 200, 200)
    for k in range(6):  # horizontal grid and loss ticks
        v = lo + span * k / 5
        y = round(sy(v))
        cv.line(left, y, w - right, y, grey)
        cv.text(8, y - 7, f"{v:.3f}")
    for k in range(6):  # vertical grid and step ticks
        s = round(steps * k / 5)
        x = round(sx(s))
        cv.line(x, top, x, h - bottom, grey)
        cv.text(x - 12, h - bottom + 8, str(s))
    cv.line(left, h - bottom, w - right, h - bottom, (0, 0, 0))
    cv.line(left, top, left, h - bottom, (0, 0, 0))
    cv.text(w // 2 - 24, h - 24, "step")
    cv.text(left, 14, title)
    for k, (_, pts, colour) in enumerate(curves):  # the first (native) widest: visible under the others
        for i in range(1, len(pts)):
            cv.line(round(sx(i - 1)), round(sy(pts[i - 1])), round(sx(i)), round(sy(pts[i])), colour, 5 if k == 0 else 2)
    for k, (label, _, colour) in enumerate(curves):  # legend, top right
        y = top + 16 + 22 * k
        cv.line(w - right - 330, y + 6, w - right - 300, y + 6, colour, 3)
        cv.text(w - right - 290, y, label)
    cv.png(path)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--out", default="convergence.png")
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--ranks", type=int, default=8)
    args = ap.parse_args()
    exe = os.path.join(args.build, "bin", "dp_train")
    if not os.access(exe, os.X_OK):
        sys.exit(f"{exe} not found: build it first (cmake --build {args.build} --target dp_train)")
    curves = []
    stem = os.path.splitext(args.out)[0]
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    for label, suffix, extra, colour in VARIANTS:  # the CSVs stay next to the PNG
        path = f"{stem}_{suffix}.csv"
        cmd = [exe, "--ranks", str(args.ranks), "--steps", str(args.steps), "--csv", path] + extra
        print("running:", " ".join(cmd), flush=True)
        subprocess.run(cmd, check=True, env=dict(os.environ, CHORUS_MODE="host"))
        with open(path) as f:
            curves.append((label, [float(r["loss"]) for r in csv.DictReader(f)], colour))
    plot(curves, args.out, f"loss per step, {args.ranks} ranks, logistic regression")
    final = {label: pts[-1] for label, pts, _ in curves}
    for label, v in final.items():
        print(f"final loss {label:24s} {v:.6f}")
    native, fb = final[VARIANTS[0][0]], final[VARIANTS[1][0]]
    ok = abs(fb - native) <= 0.01 * native
    print(f"int8 + feedback vs native: {100 * (fb - native) / native:+.3f}% ({'within' if ok else 'NOT within'} 1%)")
    print("plot:", args.out)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
