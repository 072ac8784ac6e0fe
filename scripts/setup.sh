#!/usr/bin/env bash
# Installs what building and testing Chorus needs on Debian 12 (run as root or with sudo).
# Idempotent; skips apt when everything is already there.
set -euo pipefail
pkgs=(cmake g++ ninja-build pkg-config libgtest-dev libgmock-dev libbenchmark-dev
      openmpi-bin libopenmpi-dev libgloo-dev iproute2
      libucx-dev ucx-utils libibverbs-dev librdmacm-dev libhwloc-dev iperf3)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
