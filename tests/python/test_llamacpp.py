"""kvstream.llamacpp against real llama.cpp sequence states, hostile bytes, and the live handoff example."""
import ctypes
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import kvstream
from kvstream.llamacpp import MAGIC, SeqState

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def llama_state():
    import llama_cpp

    gguf = subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_model.py"), "smollm2"], capture_output=True,
                          text=True, check=True).stdout.strip()
    llm = llama_cpp.Llama(model_path=gguf, n_ctx=256, n_threads=2, verbose=False)
    llm.eval(llm.tokenize(pathlib.Path("/usr/share/common-licenses/GPL-3").read_bytes())[:100])
    size = llama_cpp.llama_state_seq_get_size(llm.ctx, 0)
    buffer = (ctypes.c_uint8 * size)()
    assert llama_cpp.llama_state_seq_get_data(llm.ctx, buffer, size, 0) == size
    return bytes(buffer)


def test_parse_views_the_bytes_and_build_lays_them_out_again(llama_state):
    state = SeqState.parse(bytearray(llama_state))
    assert (state.layers, state.tokens, state.channels) == (30, 100, 192)
    assert list(state.positions) == list(range(100)) and state.seq_id == 0
    assert np.shares_memory(state.keys, np.frombuffer(state.buffer, np.uint8))
    assert np.shares_memory(state.values, np.frombuffer(state.buffer, np.uint8))
    assert np.isfinite(state.keys).all() and state.keys.std() > 0.1
    built = SeqState.build(state.layers, state.tokens, state.channels, v_trans=state.v_trans)
    built.keys[...] = state.keys
    built.values[...] = state.values
    assert bytes(built.buffer) == llama_state


def test_codec_round_trip_through_the_views(llama_state):
    state = SeqState.parse(bytearray(llama_state))
    out = SeqState.build(state.layers, state.tokens, state.channels, v_trans=state.v_trans)
    for chunk in kvstream.encode(state.keys, state.values, "fp16"):  # read and written in place, strided
        kvstream.decode_into(chunk, out.keys, out.values)
    assert bytes(out.buffer) == llama_state


def test_hostile_states_raise_kvstream_errors(llama_state):
    with pytest.raises(kvstream.CorruptDataError, match="magic"):
        SeqState.parse(b"\0" * 64)
    with pytest.raises(kvstream.CorruptDataError, match="bytes after the last layer"):
        SeqState.parse(llama_state + b"\0\0")
    damaged = bytearray(llama_state)
    damaged[8:12] = (2).to_bytes(4, "little")
    with pytest.raises(kvstream.UnsupportedError, match="2 streams"):
        SeqState.parse(damaged)
    rng = np.random.default_rng(11)
    header = 24 + 12 * 100 + 8 + 12  # the counts, cells and layer 0's K header: where a lie matters most
    for _ in range(1500):  # random damage and truncation: a state or a kvstream.Error, never another error
        damaged = bytearray(llama_state[: int(rng.integers(0, len(llama_state) + 1))])
        for i in rng.integers(0, max(1, min(len(damaged), header * 2)), size=int(rng.integers(0, 4))):
            if i < len(damaged):
                damaged[i] = int(rng.integers(256))
        try:
            state = SeqState.parse(damaged)
            assert state.keys.shape == state.values.shape
        except kvstream.Error:
            pass
    assert int.from_bytes(llama_state[:4], "little") == MAGIC
