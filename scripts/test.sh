#!/usr/bin/env bash
# Builds kvstream (installing what is missing) and runs every test: the C++ suites through ctest.
#   KVSTREAM_TEST_LABELS  a ctest label regex to run a subset (e.g. 'codec|model')
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
scripts/bootstrap.sh
build_dir=${KVSTREAM_BUILD_DIR:-build}
source scripts/openblas_env.sh
kvstream_openblas_core "$build_dir/bin/kvstream"
label_args=()
[ -z "${KVSTREAM_TEST_LABELS:-}" ] || label_args=(-L "$KVSTREAM_TEST_LABELS")
# A failed test is run up to twice more: with Debian's UCX 1.13, tearing down an endpoint whose peer died
# during wire-up sometimes trips an assertion inside UCX (docs/transport.md, "Known issues"), which aborts
# the fault-injection tests now and then. A test that fails three times in a row still fails the run.
ctest --test-dir "$build_dir" --output-on-failure -j "$(nproc)" --repeat until-pass:3 "${label_args[@]}"
