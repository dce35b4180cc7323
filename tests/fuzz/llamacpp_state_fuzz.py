#!/usr/bin/env python3
"""Fuzzes kvstream.llamacpp.SeqState.parse (atheris, coverage-guided): llama.cpp sequence states come from
another process, so any bytes must give a state or a kvstream.Error, never another exception.

    PYTHONPATH=build/python build-deps/python/bin/python tests/fuzz/llamacpp_state_fuzz.py CORPUS -max_total_time=60

With --write-seeds DIR it writes valid states of a few shapes (both V layouts) as the seed corpus.
"""
import sys

import atheris
import numpy  # noqa: F401  imported first so that only kvstream's own code is instrumented

with atheris.instrument_imports(include=["kvstream"]):
    import kvstream
    from kvstream.llamacpp import SeqState


def one_input(data: bytes) -> None:
    try:
        state = SeqState.parse(data)
    except kvstream.Error:
        return
    # A state that parses is wholly inside the bytes: reading every element must work.
    float(state.keys.astype("float32").sum()) + float(state.values.astype("float32").sum())
    assert state.keys.shape == state.values.shape


def write_seeds(folder: str) -> None:
    import pathlib

    import numpy as np

    out = pathlib.Path(folder)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(5)
    for i, (layers, tokens, channels, v_trans) in enumerate([(1, 1, 2, True), (2, 3, 8, False), (3, 5, 16, True)]):
        state = SeqState.build(layers, tokens, channels, v_trans=v_trans)
        state.keys[...] = rng.standard_normal(state.keys.shape)
        state.values[...] = rng.standard_normal(state.values.shape)
        (out / f"state_{i}").write_bytes(bytes(state.buffer))


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "--write-seeds":
        write_seeds(sys.argv[2])
        sys.exit(0)
    atheris.Setup(sys.argv, one_input)
    atheris.Fuzz()
