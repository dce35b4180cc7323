"""kvstream.encode / decode_into / inspect against the C++ command's chunk files, byte for byte."""
import pathlib

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


def test_profile_learned_from_arrays_codes_like_the_cli(dump, work):
    # Samples from other text than the dump: learn on the first 200 positions of two windows of it.
    keys, values = dump["k"], dump["v"]
    profile = kvstream.Profile.learn([(keys[:, :200], values[:, :200]), (keys[:, 100:300], values[:, 100:300])],
                                     model="stories260K")
    assert profile.model == "stories260K" and profile.levels == [f"L{i}" for i in range(1, 7)]
    with_profile = kvstream.encode(keys, values, 3, profile)
    assert kvstream.inspect(with_profile[0])["profile_hash"] == profile.hash
    k, v = np.zeros_like(keys), np.zeros_like(values)
    for c in with_profile:
        kvstream.decode_into(c, k, v, profile)
    assert np.sqrt(np.mean((k - keys) ** 2)) < 0.1 * np.std(keys)
