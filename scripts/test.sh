#!/usr/bin/env bash
# Builds kvstream (installing what is missing) and runs every test through ctest: the C++ suites and the
# Python package's pytest suite (label python; pytest and torch go into build-deps/python).
#   KVSTREAM_TEST_LABELS  a ctest label regex to run a subset (e.g. 'codec|model')
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
scripts/python_env.sh bindings/requirements-test.txt
build_dir=${KVSTREAM_BUILD_DIR:-build}
source scripts/openblas_env.sh
kvstream_openblas_core "$build_dir/bin/kvstream"
label_args=()
[ -z "${KVSTREAM_TEST_LABELS:-}" ] || label_args=(-L "$KVSTREAM_TEST_LABELS")
# Every test runs once: a test that passes only on a retry is a bug.
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" "${label_args[@]}"
