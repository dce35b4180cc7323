#!/usr/bin/env bash
# Installs what kvstream needs on Debian 12 (only what is missing), fetches the SmolLM2 model into its
# cache, then configures and builds into build/. Safe to run again: each step is skipped when done.
#
#   KVSTREAM_BUILD_DIR   build folder (default build)
#   KVSTREAM_BUILD_TYPE  CMake build type (default Release)
#   KVSTREAM_CMAKE_ARGS  extra arguments for cmake's configure step
#   KVSTREAM_BUILD_TARGETS  build only these targets (default: all)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"

apt_packages=(
  cmake ninja-build g++ clang libclang-rt-14-dev pkg-config python3 python3-pip python3-dev python3-venv
  libgtest-dev libgmock-dev libbenchmark-dev libopenblas-dev libzstd-dev pybind11-dev
  libucx-dev ucx-utils libboost-dev nlohmann-json3-dev iproute2 python3-numpy python3-matplotlib
)
missing=()
for p in "${apt_packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "bootstrap: installing ${missing[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# The realistic model for tests, benchmarks and the demo; quality claims are made on it.
/usr/bin/python3 scripts/fetch_model.py smollm2 >/dev/null

# The Python package's build requirements (nanobind), in the project's own environment build-deps/python.
scripts/python_env.sh bindings/requirements-build.txt

build_dir=${KVSTREAM_BUILD_DIR:-build}
if [ ! -f "$build_dir/CMakeCache.txt" ]; then
  # shellcheck disable=SC2086
  cmake -S . -B "$build_dir" -G Ninja -DCMAKE_BUILD_TYPE="${KVSTREAM_BUILD_TYPE:-Release}" \
    -DPython_EXECUTABLE="$root/build-deps/python/bin/python" ${KVSTREAM_CMAKE_ARGS:-} >/dev/null
fi
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$(nproc)" ${KVSTREAM_BUILD_TARGETS:+--target $KVSTREAM_BUILD_TARGETS}
