#!/usr/bin/env bash
# Installs the PyPI wheel libucx-cu13 (UCX 1.22 built with CUDA: cuda_copy and cuda_ipc, no InfiniBand;
# headers, libraries, ucx_info and ucx_perftest) into build-deps/libucx-cu13 and prints the UCX root to
# configure with: cmake -DKVSTREAM_UCX_ROOT=$(scripts/ucx_wheel.sh). Safe to run again.
#   KVSTREAM_UCX_WHEEL  the pip requirement (default libucx-cu13==1.22.*)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
target=$PWD/build-deps/libucx-cu13
if [ ! -f "$target/libucx/lib/pkgconfig/ucx.pc" ]; then
  rm -rf "$target"
  PIP_BREAK_SYSTEM_PACKAGES=1 /usr/bin/python3 -m pip install --quiet --disable-pip-version-check \
    --root-user-action=ignore --no-deps --target "$target" \
    "${KVSTREAM_UCX_WHEEL:-libucx-cu13==1.22.*}" >&2
fi
echo "$target/libucx"
