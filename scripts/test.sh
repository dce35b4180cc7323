#!/usr/bin/env bash
# Builds kvstream (installing what is missing) and runs every test: the C++ suites through ctest.
#   KVSTREAM_TEST_LABELS  a ctest label regex to run a subset (e.g. 'codec|model')
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
build_dir=${KVSTREAM_BUILD_DIR:-build}
label_args=()
[ -z "${KVSTREAM_TEST_LABELS:-}" ] || label_args=(-L "$KVSTREAM_TEST_LABELS")
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "${label_args[@]}"
