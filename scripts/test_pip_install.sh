#!/usr/bin/env bash
# Proves `pip install .` from the repository: a clean virtual environment (build-pip/venv, Debian's
# python3, nothing else installed), the C++ built by pip through scikit-build-core (build-pip/build, kept
# so that a second run rebuilds only what changed), then the package's codec tests against the installed
# package and its `kvstream` command. Needs the Debian packages scripts/bootstrap.sh installs.
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv=build-pip/venv
rm -rf "$venv"
/usr/bin/python3 -m venv "$venv"
"$venv/bin/python" -m pip install -q --disable-pip-version-check \
  --config-settings=build-dir=build-pip/build --config-settings=cmake.define.KVSTREAM_CUDA=OFF .
# The tests' own requirements only (no torch: the codec tests use numpy).
"$venv/bin/python" -m pip install -q --disable-pip-version-check numpy==2.4.6 pytest==9.2.0
"$venv/bin/kvstream" --version
cd "$root/tests/python"  # not the repository root, whose bindings/ must not shadow the installed package
KVSTREAM_BIN="$root/$venv/bin/kvstream" PYTHONDONTWRITEBYTECODE=1 \
  "$root/$venv/bin/python" -m pytest -q -p no:cacheprovider test_codec.py
"$root/$venv/bin/python" -c 'import kvstream, sys; assert "site-packages" in kvstream.__file__, kvstream.__file__; print("pip install .: kvstream", kvstream.__version__, "from", kvstream.__file__)'
