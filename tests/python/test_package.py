"""The package's surface: its names, version, and type stubs that match the built extension."""
import json
import os
import pathlib
import subprocess
import sys

import kvstream

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_exports_and_version():
    for name in kvstream.__all__:
        assert hasattr(kvstream, name), name
    assert kvstream.__version__ == subprocess.run([os.environ["KVSTREAM_BIN"], "--version"], capture_output=True,
                                                  text=True, check=True).stdout.split()[1]
    assert kvstream.encode.__doc__ and kvstream.Profile.learn.__doc__
    assert (pathlib.Path(kvstream.__file__).parent / "py.typed").exists()


def test_type_stubs_are_current():
    done = subprocess.run([sys.executable, str(ROOT / "bindings" / "make_stubs.py"), "--check"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def test_bench_runs_both_sides_on_the_same_chunks():
    # A smoke test of python -m kvstream.bench (the figures are bench/RESULTS.md's, not asserted here).
    done = subprocess.run([sys.executable, "-m", "kvstream.bench", "--model", "stories260K", "--tokens", "300", "--levels",
                           "fp16,L2", "--repetitions", "1", "--json"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = [json.loads(line) for line in done.stdout.splitlines()][1:]
    assert {(r["op"], r["level"]) for r in rows} == {(op, level) for op in ("encode", "encode-new-bytes", "decode", "fetch")
                                                     for level in ("fp16", "L2")}
    assert all(r["cpp_ms"] > 0 and r["python_ms"] > 0 for r in rows)
