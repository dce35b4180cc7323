"""kvstream.encode / decode_into / inspect against the C++ command's chunk files, byte for byte."""
import pathlib
import re

import numpy as np
import pytest

import kvstream
from conftest import run_cli


def cli_chunks(dump_path, out: pathlib.Path, *flags: str) -> list[bytes]:
    run_cli("encode", "--kv-dump", str(dump_path), "--out", str(out), *flags)
    return [p.read_bytes() for p in sorted(out.glob("chunk_*.kvc"))]


@pytest.mark.parametrize("level", ["fp16", "int8", "L1", 3, "L6"])
def test_encode_matches_cli_in_chunk_tables(dump, dump_path, tmp_path, level):
    keys, values = dump["k"].astype(np.float16), dump["v"].astype(np.float16)
    ours = kvstream.encode(keys, values, level)
    theirs = cli_chunks(dump_path, tmp_path, "--level", str(level))
    assert len(ours) == len(theirs) == 2
    assert ours == theirs


@pytest.mark.parametrize("scheme", ["channel-uniform", "transform", "predicted"])
def test_encode_matches_cli_with_profile(dump, dump_path, profile_path, tmp_path, scheme):
    profile = kvstream.Profile.load(profile_path)
    keys, values = dump["k"].astype(np.float16), dump["v"].astype(np.float16)
    # The command codes the dump's most attended 8 % of tokens as fine rows (its default); so does encode.
    ours = kvstream.encode(keys, values, 4, profile, scheme, importance=dump["importance"])
    theirs = cli_chunks(dump_path, tmp_path, "--level", "4", "--scheme", scheme, "--profile", str(profile_path))
    assert ours == theirs
    if scheme != "channel-uniform":
        assert kvstream.inspect(ours[0])["fine_rows"], "the chunk should carry fine rows"


def test_text_level_matches_cli(dump, dump_path, tmp_path):
    keys, values = dump["k"].astype(np.float16), dump["v"].astype(np.float16)
    ours = kvstream.encode(keys, values, "text", token_ids=dump["tokens"])
    assert ours == cli_chunks(dump_path, tmp_path, "--level", "text")
    assert kvstream.inspect(ours[1])["level"] == "text"


@pytest.mark.parametrize("scheme", ["channel-uniform", "predicted"])
def test_decode_matches_cli(dump, dump_path, profile_path, tmp_path, scheme):
    chunk_dir = tmp_path / "chunks"
    cli_chunks(dump_path, chunk_dir, "--level", "3", "--scheme", scheme, "--profile", str(profile_path))
    files = sorted(str(p) for p in chunk_dir.glob("chunk_*.kvc"))
    raw = tmp_path / "decoded.raw"
    run_cli("decode", *files, "--profile", str(profile_path), "--out", str(raw))
    profile = kvstream.Profile.load(profile_path)
    ours = b""
    for f in files:
        chunk = pathlib.Path(f).read_bytes()
        info = kvstream.inspect(chunk)
        shape = (info["layers"], info["tokens"], info["channels"])
        k, v = np.empty(shape, np.float16), np.empty(shape, np.float16)
        kvstream.decode_into(chunk, k, v, profile, token_offset=info["token_begin"])
        ours += k.tobytes() + v.tobytes()
    assert ours == raw.read_bytes()


def test_inspect_reports_the_header(dump):
    keys, values = dump["k"].astype(np.float16), dump["v"].astype(np.float16)
    chunks = kvstream.encode(keys, values, "L2", chunk_tokens=128)
    assert [kvstream.inspect(c)["token_begin"] for c in chunks] == [0, 128, 256]
    info = kvstream.inspect(chunks[2])
    assert info["level"] == "L2" and info["scheme"] == "channel-uniform"
    assert (info["tokens"], info["layers"], info["channels"], info["bytes"]) == (44, 5, 32, len(chunks[2]))
    assert info["version"] == kvstream.CHUNK_FORMAT_VERSION
    assert info["in_chunk_tables"] and info["profile_hash"] is None
    assert 0 < info["bits_per_value"] < 16


@pytest.mark.parametrize("dtype", [np.float16, np.float32])
def test_fp16_round_trip_is_exact_whole_context(dump, dtype):
    keys, values = dump["k"].astype(np.float16), dump["v"].astype(np.float16)
    k, v = np.zeros(keys.shape, dtype), np.zeros(values.shape, dtype)
    for chunk in kvstream.encode(keys, values, "fp16", chunk_tokens=100):
        kvstream.decode_into(chunk, k, v)
    assert np.array_equal(k, keys.astype(dtype)) and np.array_equal(v, values.astype(dtype))


def test_lossy_levels_get_coarser(dump, profile_path):
    profile = kvstream.Profile.load(profile_path)
    keys, values = dump["k"], dump["v"]
    sizes, errors = [], []
    for level in profile.levels:
        chunks = kvstream.encode(keys, values, level, profile)
        k, v = np.zeros_like(keys), np.zeros_like(values)
        for c in chunks:
            kvstream.decode_into(c, k, v, profile)
        sizes.append(sum(map(len, chunks)))
        errors.append(float(np.sqrt(np.mean((k - keys) ** 2))))
    assert sizes == sorted(sizes, reverse=True)
    assert errors == sorted(errors)


def test_profile_round_trips_and_summarises(profile_path, tmp_path):
    profile = kvstream.Profile.load(profile_path)
    again = kvstream.Profile.from_bytes(profile.to_bytes())
    assert again.hash == profile.hash and again.to_bytes() == profile_path.read_bytes()
    profile.save(tmp_path / "copy.kvprofile")
    assert kvstream.Profile.load(tmp_path / "copy.kvprofile").hash == profile.hash
    s = profile.summary()
    assert s["hash"] == f"{profile.hash:016x}" and s["layers"] == 5 and s["channels"] == 32
    assert s["schemes"] == ["channel-uniform", "transform", "predicted"]
    assert [lv["level"] for lv in s["levels"]] == profile.levels == [f"L{i}" for i in range(1, 7)]
    assert s["predicted"]["predictor_matrices"] > 0 and s["transform"]["rope_layout"] == "interleaved"
    assert profile.supports("predicted") and "hash=" in repr(profile)


def test_profile_learned_from_a_model_is_the_cli_profile(profile_path):
    # The same flags as the fixture's `kvstream profile`, as keywords: the same bytes.
    profile = kvstream.Profile.learn("stories260K", predict=True, contexts=4, context_tokens=256)
    assert profile.to_bytes() == profile_path.read_bytes()


def test_profile_learned_with_measure_records_each_levels_quality(dump):
    # Another engine's KV as the samples (--kv-dump), the held-out window measured with the model.
    profile = kvstream.Profile.learn("stories260K", contexts=0, samples=[(dump["k"], dump["v"])], context_tokens=64,
                                     eval_tokens=32, ladder=[0.2, 0.5, 1.0], measure=True)
    assert profile.levels == ["L1", "L2", "L3"]
    quality = [lv["quality"]["channel-uniform"] for lv in profile.summary()["levels"]]
    assert all(0 <= q["top1_agreement"] <= 1 and q["bits_per_value"] > 0 for q in quality)
    assert quality[0]["bits_per_value"] > quality[2]["bits_per_value"]


@pytest.mark.parametrize("kwargs, message", [
    (dict(contexts=0), "contexts = 0, expected 1..1024"),
    (dict(context_tokens=8), "context_tokens = 8, expected 16..65536"),
    (dict(ladder=[0.5, 0.2]), "ladder: the multipliers must increase"),
    (dict(byte_predictors=True), "byte_predictors needs predict"),
    (dict(fine_fraction=2.0), "fine_fraction = 2, expected 0..1"),
    (dict(text=["/nonexistent/text"]), "/nonexistent/text"),
    (dict(samples=[(np.zeros((2, 8, 4), np.float32), np.zeros((2, 8, 4), np.float32))]), "samples[0]"),
])
def test_profile_learn_names_the_bad_argument(kwargs, message):
    with pytest.raises(kvstream.Error, match=re.escape(message)):
        kvstream.Profile.learn("stories260K", context_tokens=kwargs.pop("context_tokens", 32), **kwargs)


def test_profile_learned_from_arrays_codes_like_the_cli(dump, work):
    # Samples from other text than the dump: learn on the first 200 positions of two windows of it.
    keys, values = dump["k"], dump["v"]
    profile = kvstream.Profile.learn_from_samples([(keys[:, :200], values[:, :200]), (keys[:, 100:300], values[:, 100:300])],
                                                  model="stories260K")
    assert profile.model == "stories260K" and profile.levels == [f"L{i}" for i in range(1, 7)]
    with_profile = kvstream.encode(keys, values, 3, profile)
    assert kvstream.inspect(with_profile[0])["profile_hash"] == profile.hash
    k, v = np.zeros_like(keys), np.zeros_like(values)
    for c in with_profile:
        kvstream.decode_into(c, k, v, profile)
    assert np.sqrt(np.mean((k - keys) ** 2)) < 0.1 * np.std(keys)


def test_encode_into_a_callers_buffer_gives_the_same_chunks(dump):
    keys, values = dump["k"], dump["v"]
    expected = kvstream.encode(keys, values, 3, chunk_tokens=128)
    out = np.zeros(sum(map(len, expected)) + 7, np.uint8)
    views = kvstream.encode(keys, values, 3, chunk_tokens=128, out=out)
    assert [bytes(v) for v in views] == expected
    assert all(isinstance(v, memoryview) for v in views)
    assert bytes(out[:len(expected[0])]) == expected[0]  # the chunks are in out itself, one after the other
    short = bytearray(len(expected[0]) + 10)
    with pytest.raises(kvstream.ResourceExhaustedError, match=r"^out: .* chunk 1 \("):
        kvstream.encode(keys, values, 3, chunk_tokens=128, out=short)
    assert bytes(short[:len(expected[0])]) == expected[0]  # what was written before stays
    with pytest.raises(kvstream.InvalidArgumentError, match=r"^out: expected a writable"):
        kvstream.encode(keys, values, 3, out=bytes(100))
