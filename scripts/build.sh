#!/usr/bin/env bash
# Configures and builds Chorus. Usage: scripts/build.sh [build-dir] [extra cmake args...]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dir="${1:-$root/build}"; shift || true
# CUDA kernels compile whenever nvcc exists, also when it is not on PATH.
if ! command -v nvcc >/dev/null && [ -z "${CUDACXX:-}" ] && [ -x /usr/local/cuda/bin/nvcc ]; then
  export CUDACXX=/usr/local/cuda/bin/nvcc
fi
cmake -S "$root" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCHORUS_WERROR=ON "$@" >/dev/null
cmake --build "$dir" -j "$(nproc)"
