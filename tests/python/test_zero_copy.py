"""Arrays in, arrays out, without copies: decode_into writes the caller's numpy arrays and torch tensors
(and views of them) in place, in the codec's layout and in Hugging Face's per-layer layout."""
import numpy as np
import pytest
import torch

import kvstream


@pytest.fixture(scope="module")
def context(dump):
    keys, values = dump["k"].astype(np.float16), dump["v"].astype(np.float16)
    return keys, values, kvstream.encode(keys, values, "fp16")


def test_numpy_destination_is_written_in_place(context):
    keys, values, chunks = context
    k, v = np.zeros_like(keys), np.zeros_like(values)
    k_address, v_address = k.ctypes.data, v.ctypes.data
    for c in chunks:
        kvstream.decode_into(c, k, v)
    assert (k.ctypes.data, v.ctypes.data) == (k_address, v_address)
    assert np.array_equal(k, keys) and np.array_equal(v, values)


def test_strided_window_of_a_larger_buffer(context):
    keys, values, chunks = context
    layers, tokens, channels = keys.shape
    # A padded engine cache: [layers][512 positions][2 * channels], this context at positions 100.. of
    # the window and in the odd channels; the window holds context positions from 256 (token_offset).
    k_big = np.full((layers, 512, 2 * channels), 7, np.float16)
    v_big = np.full_like(k_big, 7)
    k_win, v_win = k_big[:, 100:, 1::2], v_big[:, 100:, 1::2]
    assert not k_win.flags.c_contiguous
    kvstream.decode_into(chunks[1], k_win, v_win, token_offset=256)
    assert np.array_equal(k_big[:, 100:144, 1::2], keys[:, 256:300])
    assert np.array_equal(v_big[:, 100:144, 1::2], values[:, 256:300])
    untouched = np.ones(k_big.shape, bool)
    untouched[:, 100:144, 1::2] = False
    assert (k_big[untouched] == 7).all() and (v_big[untouched] == 7).all()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_torch_tensor_is_written_in_place(context, dtype):
    keys, values, chunks = context
    k = torch.zeros(keys.shape, dtype=dtype)
    v = torch.zeros(values.shape, dtype=dtype)
    pointer = k.data_ptr()
    for c in chunks:
        kvstream.decode_into(c, k, v)
    assert k.data_ptr() == pointer
    expected = torch.from_numpy(keys.astype(np.float32)).to(dtype)
    assert torch.equal(k, expected) and torch.equal(v, torch.from_numpy(values.astype(np.float32)).to(dtype))


def test_torch_inputs_encode_like_numpy(context):
    keys, values, chunks = context
    assert kvstream.encode(torch.from_numpy(keys), torch.from_numpy(values), "fp16") == chunks


def test_hugging_face_layers_round_trip(context):
    keys, values, chunks = context
    layers, tokens, channels = keys.shape
    heads, head_dim = 2, channels // 2
    # DynamicCache keeps per layer [batch][kv_heads][tokens][head_dim]; channel c is head c // head_dim.
    hf_keys = [torch.from_numpy(keys[l].reshape(tokens, heads, head_dim).transpose(1, 0, 2).copy())[None] for l in range(layers)]
    hf_values = [torch.from_numpy(values[l].reshape(tokens, heads, head_dim).transpose(1, 0, 2).copy())[None] for l in range(layers)]
    assert kvstream.encode(hf_keys, hf_values, "fp16") == chunks
    out_k = [torch.zeros(2, heads, tokens, head_dim, dtype=torch.float16) for _ in range(layers)]
    out_v = [torch.zeros(2, heads, tokens, head_dim, dtype=torch.float16) for _ in range(layers)]
    pointers = [t.data_ptr() for t in out_k]
    for c in chunks:
        kvstream.decode_into(c, out_k, out_v, batch_index=1)
    assert [t.data_ptr() for t in out_k] == pointers
    for l in range(layers):
        assert torch.equal(out_k[l][1], hf_keys[l][0]) and torch.equal(out_v[l][1], hf_values[l][0])
        assert not out_k[l][0].any(), "batch row 0 must stay untouched"


def test_lossy_decode_is_the_same_in_every_layout(dump):
    keys, values = dump["k"], dump["v"]
    layers, tokens, channels = keys.shape
    chunks = kvstream.encode(keys, values, 3)
    k, v = np.zeros(keys.shape, np.float16), np.zeros(values.shape, np.float16)
    hk = [torch.zeros(1, 4, tokens, channels // 4, dtype=torch.float16) for _ in range(layers)]
    hv = [torch.zeros(1, 4, tokens, channels // 4, dtype=torch.float16) for _ in range(layers)]
    for c in chunks:
        kvstream.decode_into(c, k, v)
        kvstream.decode_into(c, hk, hv)
    for l in range(layers):
        assert np.array_equal(hk[l][0].numpy().transpose(1, 0, 2).reshape(tokens, channels), k[l])
        assert np.array_equal(hv[l][0].numpy().transpose(1, 0, 2).reshape(tokens, channels), v[l])
