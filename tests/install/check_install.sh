#!/usr/bin/env bash
# Usage: check_install.sh BUILD_DIR CMAKE C_COMPILER
# Installs BUILD_DIR into a temporary prefix, then checks that
#  (a) a CMake project using find_package(Chorus) + Chorus::chorus builds and runs,
#  (b) a plain compiler invocation using `pkg-config --cflags --libs chorus` does,
#  (c) libnccl.so.2, libchorus.so.0, the headers and the package files are installed.
set -euo pipefail

build=$1
cmake=$2
cc=$3
here=$(cd "$(dirname "$0")" && pwd)
expected_version=22809

work=$(mktemp -d "${TMPDIR:-/tmp}/chorus-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "FAIL: $*" >&2; exit 1; }
step() { echo "-- $*"; }

step "installing $build into $prefix"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log"; fail "cmake --install"; }

# (c) the installed files. The library directory depends on GNUInstallDirs.
nccl_lib=$(find "$prefix" -name libnccl.so.2 | head -n1)
[ -n "$nccl_lib" ] || fail "libnccl.so.2 not installed"
libdir=$(dirname "$nccl_lib")
for f in "$libdir/libnccl.so.2" "$libdir/libchorus.so.0" "$libdir/libchorus.so" \
         "$prefix/include/nccl.h" "$prefix/include/chorus/chorus.h" "$prefix/include/chorus/nccl_device_host.h" \
         "$libdir/pkgconfig/chorus.pc" "$libdir/cmake/Chorus/ChorusConfig.cmake" \
         "$libdir/cmake/Chorus/ChorusConfigVersion.cmake"; do
  [ -e "$f" ] || fail "missing after install: ${f#$prefix/}"
done
step "installed files present (libdir ${libdir#$prefix/})"

check_run() {  # $1: what, rest: command; its output must report the version
  local what=$1; shift
  local out
  out=$("$@" 2>&1) || fail "$what: program failed: $out"
  grep -qx "version=$expected_version" <<<"$out" || fail "$what: expected version=$expected_version, got: $out"
  step "$what: $out"
}

# (a) find_package(Chorus) consumer. It must run from its build tree without
# LD_LIBRARY_PATH: CMake's build rpath points at the imported library.
"$cmake" -S "$here/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_C_COMPILER="$cc" \
  -DCMAKE_BUILD_TYPE=Release >"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "consumer configure"; }
"$cmake" --build "$work/consumer" >>"$work/consumer.log" 2>&1 || { cat "$work/consumer.log"; fail "consumer build"; }
check_run "find_package consumer" "$work/consumer/consumer"

# (b) pkg-config consumer.
command -v pkg-config >/dev/null || fail "pkg-config not found"
flags=$(PKG_CONFIG_PATH="$libdir/pkgconfig" pkg-config --cflags --libs chorus) || fail "pkg-config --cflags --libs chorus"
step "pkg-config: $flags"
# shellcheck disable=SC2086  # the flags are meant to be split
"$cc" "$here/consumer/main.c" $flags -o "$work/pc_consumer" || fail "cc with pkg-config flags"
check_run "pkg-config consumer" env LD_LIBRARY_PATH="$libdir" "$work/pc_consumer"

echo "install checks passed"
