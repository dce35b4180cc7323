#!/usr/bin/env bash
# Creates (once) the project's Python environment, build-deps/python, from Debian's python3, and installs
# into it what a requirements file names, skipping a file already installed unchanged.
#   scripts/python_env.sh bindings/requirements-build.txt [more files]
# Prints nothing on success but what pip prints; the interpreter is build-deps/python/bin/python.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
venv="$root/build-deps/python"
# llama-cpp-python compiles llama.cpp; built for the build machine's own CPU it crashes on some (design.md).
export CMAKE_ARGS="${CMAKE_ARGS:--DGGML_NATIVE=OFF}"
if [ ! -x "$venv/bin/python" ]; then
  /usr/bin/python3 -m venv "$venv"
fi
for requirements in "$@"; do
  stamp="$venv/.installed-$(basename "$requirements")"
  if [ -f "$stamp" ] && cmp -s "$stamp" "$root/$requirements"; then
    continue
  fi
  echo "python_env: installing $requirements into build-deps/python"
  "$venv/bin/python" -m pip install -q --disable-pip-version-check -r "$root/$requirements"
  cp "$root/$requirements" "$stamp"
done
