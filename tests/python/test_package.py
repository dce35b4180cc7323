"""The package's surface: its names, version, and type stubs that match the built extension."""
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
