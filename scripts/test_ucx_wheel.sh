#!/usr/bin/env bash
# The transport and stream suites built and run against another UCX than Debian's 1.13: the PyPI wheel
# libucx-cu13's 1.22 (built with CUDA; scripts/ucx_wheel.sh installs it), through -DKVSTREAM_UCX_ROOT, in
# build-ucx-wheel/ (CUDA off: only the suites and what they link are built). Checks that the binaries
# load the wheel's libucp, not the system's. CI runs it after the main suites.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ucx=$(scripts/ucx_wheel.sh)
build_dir=build-ucx-wheel
# Installs what is missing and configures; builds only the transport library at first.
KVSTREAM_BUILD_DIR=$build_dir KVSTREAM_CMAKE_ARGS="-DKVSTREAM_CUDA=OFF -DKVSTREAM_UCX_ROOT=$ucx" \
  KVSTREAM_BUILD_TARGETS=kvstream_transport scripts/bootstrap.sh
mapfile -t suites < <(ninja -C "$build_dir" -t targets all | sed -n 's/^\(\(transport\|stream\)_[a-z_]*_test\): .*/\1/p' | sort -u)
((${#suites[@]})) || { echo "test_ucx_wheel: no transport or stream suites in $build_dir" >&2; exit 1; }
cmake --build "$build_dir" -j "$(nproc)" --target "${suites[@]}"
loaded=$(ldd "$build_dir/bin/transport_data_plane_test" | awk '/libucp/ {print $3}')
case "$loaded" in
  "$ucx"/*) echo "test_ucx_wheel: the suites load $loaded (UCX $(sed -n 's/^Version: //p' "$ucx/lib/pkgconfig/ucx.pc"))" ;;
  *) echo "test_ucx_wheel: $build_dir's binaries load '$loaded', not the wheel's UCX under $ucx" >&2; exit 1 ;;
esac
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" -L '^(stream|transport)$' -LE 'slow|gpu'
