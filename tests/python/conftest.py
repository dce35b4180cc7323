"""Shared fixtures of the Python suite: the C++ command it is compared with, a real KV dump and profile.

ctest runs each test file with PYTHONPATH at the build's python/ folder and KVSTREAM_BIN at its
bin/kvstream (tests/python/CMakeLists.txt).
"""
import os
import pathlib
import subprocess

import numpy as np
import pytest

GPL = "/usr/share/common-licenses/GPL-3"


def run_cli(*args: str) -> str:
    """Runs the C++ kvstream command; fails the test with its output if it fails."""
    done = subprocess.run([os.environ["KVSTREAM_BIN"], *args], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, f"kvstream {' '.join(args)}:\n{done.stdout}\n{done.stderr}"
    return done.stdout


@pytest.fixture(scope="session")
def work(tmp_path_factory) -> pathlib.Path:
    return tmp_path_factory.mktemp("kvstream")


@pytest.fixture(scope="session")
def dump_path(work) -> pathlib.Path:
    """300 tokens of stories260K's KV (fp32, with token ids and importance), from the reference engine."""
    path = work / "kv.npz"
    run_cli("kv", "dump", "--model", "stories260K", "--text", GPL, "--tokens", "300", "--out", str(path))
    return path


@pytest.fixture(scope="session")
def dump(dump_path):
    with np.load(dump_path) as z:
        return {name: z[name] for name in z.files}


@pytest.fixture(scope="session")
def profile_path(work) -> pathlib.Path:
    """A stories260K profile with the transform and predicted schemes (learned on other windows)."""
    path = work / "p.kvprofile"
    run_cli("profile", "--model", "stories260K", "--predict", "--contexts", "4", "--context-tokens", "256",
            "--out", str(path))
    return path
