#!/usr/bin/env python3
"""Writes the extension's type stubs, bindings/python/kvstream/_kvstream.pyi, from the built module.

    PYTHONPATH=build/python build-deps/python/bin/python bindings/make_stubs.py [--check]

nanobind's stubgen writes the functions and classes; the exception classes, which the module creates
with the C API, are written here (stubgen would import them from the package, a cycle for type checkers).
--check compares instead of writing and exits 1 when the committed stubs are stale (tests/python).
"""
import argparse
import pathlib
import re
import sys
import tempfile

from nanobind.stubgen import main as stubgen

import kvstream._kvstream as ext

STUB = pathlib.Path(__file__).resolve().parent / "python" / "kvstream" / "_kvstream.pyi"


def exception_stubs() -> str:
    lines = ["__version__: str", "", "class Error(Exception):", f'    """{ext.Error.__doc__}"""', "    code: str", ""]
    for name in sorted(n for n in dir(ext) if n.endswith("Error") and n != "Error"):
        cls = getattr(ext, name)
        bases = ", ".join(b.__name__ if b.__module__ == "kvstream" else f"builtins.{b.__name__}" for b in cls.__bases__)
        lines += [f"class {name}({bases}):", f'    """{cls.__doc__}"""', ""]
    return "\n".join(lines) + "\n"


def generate() -> str:
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "_kvstream.pyi"
        stubgen(["-q", "-m", "kvstream._kvstream", "-o", str(out)])
        text = out.read_text()
    text, n = re.subn(r"from kvstream import \([^)]*\)\n", "import builtins\n\n" + exception_stubs(), text)
    if n != 1:
        sys.exit("make_stubs: stubgen's output has no import of the exception classes to replace")
    return text


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    text = generate()
    if args.check:
        if STUB.read_text() != text:
            print(f"{STUB} is stale: run bindings/make_stubs.py", file=sys.stderr)
            return 1
        return 0
    STUB.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
