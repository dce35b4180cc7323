"""Every bad argument raises a kvstream.Error subclass naming it, and writes nothing."""
import numpy as np
import pytest
import torch

import kvstream

CODES = {
    "InvalidArgumentError": "InvalidArgument", "CorruptDataError": "CorruptData", "UnsupportedError": "Unsupported",
    "NotFoundError": "NotFound", "ResourceExhaustedError": "ResourceExhausted", "IoError": "IoError",
    "TimeoutError": "Timeout", "UnavailableError": "Unavailable", "PermissionDeniedError": "PermissionDenied",
    "CancelledError": "Cancelled", "InternalError": "Internal",
}


def test_one_class_per_status_code():
    for name in CODES:
        assert issubclass(getattr(kvstream, name), kvstream.Error), name
    assert issubclass(kvstream.TimeoutError, TimeoutError)
    assert issubclass(kvstream.InvalidArgumentError, ValueError)


@pytest.fixture(scope="module")
def kv(dump):
    keys, values = dump["k"].astype(np.float16), dump["v"].astype(np.float16)
    return keys, values, kvstream.encode(keys, values, 2)


def raises(cls, match, call, *args, **kwargs):
    with pytest.raises(cls, match=match) as info:
        call(*args, **kwargs)
    assert info.value.code == CODES[cls.__name__]
    return info.value


def test_bad_encode_arguments(kv):
    keys, values, _ = kv
    E = kvstream.InvalidArgumentError
    raises(E, r"^keys: dtype int32, expected float16, bfloat16 or float32$", kvstream.encode, keys.astype(np.int32), values, 1)
    raises(E, r"^values: dtype float64", kvstream.encode, keys, values.astype(np.float64), 1)
    raises(E, r"^keys: 2 dimensions \(5, 9600\), expected 3", kvstream.encode, keys.reshape(5, -1), values, 1)
    raises(E, r"^keys: expected an array .* got str", kvstream.encode, "keys", values, 1)
    raises(E, r"^values: 5 layers x 299 tokens x 32 channels but keys has 5 layers x 300", kvstream.encode, keys,
           values[:, :299], 1)
    raises(E, r"^keys: stride -32 on dimension 1 is negative", kvstream.encode, keys[:, ::-1], values, 1)
    raises(E, r'^level: 0, expected "fp16"', kvstream.encode, keys, values, 0)
    raises(E, r"^level: 'L99'", kvstream.encode, keys, values, "L99")
    raises(E, r"^level: True", kvstream.encode, keys, values, True)
    raises(E, r"^scheme: .*pca", kvstream.encode, keys, values, 1, scheme="pca")
    raises(E, r"^chunk_tokens: 0, expected 1..65536", kvstream.encode, keys, values, 1, chunk_tokens=0)
    raises(E, r'^token_ids: level "text" sends token ids', kvstream.encode, keys, values, "text")
    raises(E, r"^token_ids: 3 values but the KV has 300 tokens", kvstream.encode, keys, values, "text", token_ids=[1, 2, 3])
    raises(E, r"^keys\[1\]: shape", kvstream.encode, [torch.zeros(1, 2, 4, 8), torch.zeros(1, 2, 5, 8)],
           [torch.zeros(1, 2, 4, 8)] * 2, 1)
    raises(E, r"^batch_index: 3 is outside the batch of 1 rows", kvstream.encode, [torch.zeros(1, 2, 4, 8)],
           [torch.zeros(1, 2, 4, 8)], 1, batch_index=3)
    raises(E, r"^values: one array but keys is a sequence", kvstream.encode, [torch.zeros(1, 2, 4, 8)], torch.zeros(1, 4, 16), 1)


def test_bad_destinations_write_nothing(kv):
    keys, values, chunks = kv
    E = kvstream.InvalidArgumentError

    def sentinel(shape=keys.shape):
        return np.full(shape, 3, np.float16), np.full(shape, 3, np.float16)

    k, v = sentinel()
    k.setflags(write=False)
    raises(E, r"^keys_out: the array is read-only", kvstream.decode_into, chunks[0], k, v)
    k, v = sentinel()
    raises(E, r"^values_out: stride 0 on dimension 1 \(a broadcast view", kvstream.decode_into, chunks[0], k,
           np.lib.stride_tricks.as_strided(np.zeros((5, 1, 32), np.float16), keys.shape, (64, 0, 2)))
    k, v = sentinel((5, 200, 32))
    raises(E, r"^keys_out: holds context positions \[0, 200\) .* but the chunk has \[256, 300\)", kvstream.decode_into,
           chunks[1], k, v)
    raises(E, r"^keys_out: holds context positions \[10, 210\) \(token_offset 10\) but the chunk has \[0, 256\)",
           kvstream.decode_into, chunks[0], k, v, token_offset=10)
    assert (k == 3).all() and (v == 3).all()
    k, v = sentinel((4, 300, 32))
    raises(E, r"layers", kvstream.decode_into, chunks[0], k, v)
    assert (k == 3).all() and (v == 3).all()
    raises(E, r"^chunk: expected bytes .* got int", kvstream.decode_into, 5, k, v)
    raises(E, r"^threads: 0", kvstream.decode_into, chunks[0], k, v, threads=0)


def test_corrupt_and_truncated_chunks(kv):
    keys, values, chunks = kv
    k, v = np.full(keys.shape, 3, np.float16), np.full(keys.shape, 3, np.float16)
    raises(kvstream.CorruptDataError, r"^chunk header: total bytes", kvstream.decode_into, chunks[0][:-5], k, v)
    raises(kvstream.CorruptDataError, r"^chunk header: fixed header needs 56 bytes", kvstream.inspect, chunks[0][:40])
    raises(kvstream.CorruptDataError, r"^chunk header: magic needs 4 bytes at offset 0 but only 0 remain$", kvstream.inspect, b"")
    assert (k == 3).all() and (v == 3).all()
    flipped = bytearray(chunks[0])
    flipped[len(flipped) // 2] ^= 0x40
    raises(kvstream.CorruptDataError, r"CRC", kvstream.inspect, flipped)
    raises(kvstream.CorruptDataError, r"CRC", kvstream.decode_into, bytes(flipped), k, v)
    rng = np.random.default_rng(7)
    for _ in range(200):  # random damage never crashes: every outcome is a decode or a kvstream.Error
        damaged = bytearray(chunks[int(rng.integers(2))])
        for i in rng.integers(0, len(damaged), size=int(rng.integers(1, 8))):
            damaged[i] = int(rng.integers(256))
        try:
            kvstream.decode_into(bytes(damaged[: int(rng.integers(1, len(damaged) + 1))]), k, v)
        except kvstream.Error:
            pass


def test_profile_errors(kv, profile_path, tmp_path):
    keys, values, _ = kv
    raises(kvstream.NotFoundError, r"nowhere\.kvprofile", kvstream.Profile.load, str(tmp_path / "nowhere.kvprofile"))
    raises(kvstream.CorruptDataError, r"^profile: bad magic", kvstream.Profile.from_bytes, b"KVSP" + bytes(60))
    profile = kvstream.Profile.load(profile_path)
    chunks = kvstream.encode(keys, values, 2, profile)
    k, v = np.zeros_like(keys), np.zeros_like(values)
    raises(kvstream.InvalidArgumentError, r"profile", kvstream.decode_into, chunks[0], k, v)
    raises(kvstream.InvalidArgumentError, r"^profile: ", kvstream.encode, keys[:4], values[:4], 2, profile)
    raises(kvstream.InvalidArgumentError, r"^samples: empty", kvstream.Profile.learn_from_samples, [])
    raises(kvstream.InvalidArgumentError, r"^samples\[0\]: expected a \(keys, values\) pair", kvstream.Profile.learn_from_samples, [keys])
    raises(kvstream.InvalidArgumentError, r"^rope_layout: ", kvstream.Profile.learn_from_samples, [(keys, values)], rope_layout="x")
    raises(kvstream.InvalidArgumentError, r"^model: expected a path, got int", kvstream.Profile.learn, 123)
