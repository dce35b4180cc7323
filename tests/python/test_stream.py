"""kvstream.Sender and kvstream.Receiver over loopback: fetched KV equal to a local decode, the fetch's
telemetry under the names `kvstream fetch --json` uses, and every failure as its own exception."""
import asyncio
import concurrent.futures
import json
import os
import subprocess

import numpy as np
import pytest
import torch

import kvstream
import kvstream_testing


@pytest.fixture(scope="module")
def kv(dump):
    return dump["k"].astype(np.float16), dump["v"].astype(np.float16)


@pytest.fixture()
def sender(kv, dump):
    with kvstream.Sender(secret="s3cret") as s:
        s.register("ctx", kv[0], kv[1], token_ids=dump["tokens"])
        yield s


def local_decode(keys, values, level):
    k, v = np.zeros_like(keys), np.zeros_like(values)
    for chunk in kvstream.encode(keys, values, level):
        kvstream.decode_into(chunk, k, v)
    return k, v


@pytest.mark.parametrize("level", ["fp16", "int8", "L3"])
def test_fetch_equals_a_local_decode(kv, sender, level):
    keys, values = kv
    with kvstream.Receiver("127.0.0.1", sender.port, secret="s3cret") as r:
        k, v = np.zeros_like(keys), np.zeros_like(values)
        result = r.fetch("ctx", k, v, deadline_ms=2000, policy=f"fixed-{level}")
    expected = local_decode(keys, values, level)
    assert np.array_equal(k, expected[0]) and np.array_equal(v, expected[1])
    assert result["complete"] and result["retries"] == 0 and result["path"] == "host"
    assert [c["level"] for c in result["chunks"]] == [level, level]
    assert result["bytes"] == sum(c["bytes"] for c in result["chunks"]) == sum(map(len, kvstream.encode(keys, values, level)))
    assert sender.stats()["chunks_sent"] >= 2


def test_fetch_into_hugging_face_layers_and_manifest(kv, sender):
    keys, values = kv
    layers, tokens, channels = keys.shape
    out_k = [torch.zeros(1, 2, tokens, channels // 2, dtype=torch.float16) for _ in range(layers)]
    out_v = [torch.zeros(1, 2, tokens, channels // 2, dtype=torch.float16) for _ in range(layers)]
    with kvstream.Receiver("127.0.0.1", sender.port, secret="s3cret") as r:
        m = r.manifest("ctx")
        r.fetch("ctx", out_k, out_v, policy="fixed-fp16")
    assert (m["layers"], m["channels"], m["tokens"], m["chunks"], m["chunk_tokens"]) == (5, 32, 300, 2, [256, 44])
    assert [lv["level"] for lv in m["levels"]][:2] == ["fp16", "int8"] and m["levels"][-1]["level"] == "text"
    for l in range(layers):
        assert np.array_equal(out_k[l][0].numpy().transpose(1, 0, 2).reshape(tokens, channels), keys[l])


def test_result_names_match_the_cli(kv, sender, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    cli = subprocess.run([os.environ["KVSTREAM_BIN"], "fetch", "--connect", f"127.0.0.1:{sender.port}", "--context", "ctx",
                          "--secret-file", str(secret), "--json"], capture_output=True, text=True, timeout=120, check=True)
    cli_fields = set(json.loads(cli.stdout.splitlines()[-1]))
    keys, values = kv
    with kvstream.Receiver("127.0.0.1", sender.port, secret="s3cret") as r:
        result = r.fetch("ctx", np.zeros_like(keys), np.zeros_like(values))
    assert cli_fields <= set(result), cli_fields - set(result)
    assert result["policy"] == "kvstream" and result["bandwidth_estimate_bps"] > 0
    assert {"chunk", "level", "bytes", "transfer_ms", "decode_ms", "ready_ms"} <= set(result["chunks"][0])


def test_corrupt_payload_is_re_requested(kv):
    keys, values = kv
    with kvstream_testing.sender_with_faults(corrupt_chunks=[1]) as s:
        s.register("ctx", keys, values)
        with kvstream.Receiver("127.0.0.1", s.port) as r:
            k, v = np.zeros_like(keys), np.zeros_like(values)
            result = r.fetch("ctx", k, v, policy="fixed-L2")
    assert result["retries"] == 1 and result["complete"]
    expected = local_decode(keys, values, "L2")
    assert np.array_equal(k, expected[0]) and np.array_equal(v, expected[1])


def test_dropped_chunk_times_out_keeping_what_arrived(kv):
    keys, values = kv
    with kvstream_testing.sender_with_faults(drop_chunks=[1]) as s:
        s.register("ctx", keys, values)
        with kvstream.Receiver("127.0.0.1", s.port, chunk_timeout_ms=300, max_inflight_chunks=1) as r:
            k, v = np.zeros_like(keys), np.zeros_like(values)
            with pytest.raises(kvstream.TimeoutError) as info:
                r.fetch("ctx", k, v, policy="fixed-fp16")
    assert isinstance(info.value, TimeoutError) and info.value.code == "Timeout"
    assert np.array_equal(k[:, :256], keys[:, :256]), "chunk 0 arrived before the drop and stays written"


def test_authentication_and_dead_peers(kv, sender):
    with pytest.raises(kvstream.PermissionDeniedError, match="shared secret"):
        kvstream.Receiver("127.0.0.1", sender.port, secret="wrong")
    with pytest.raises(kvstream.PermissionDeniedError):
        kvstream.Receiver("127.0.0.1", sender.port)
    keys, values = kv
    r = kvstream.Receiver("127.0.0.1", sender.port, secret="s3cret")
    port = sender.port
    sender.close()
    with pytest.raises(kvstream.UnavailableError):
        r.fetch("ctx", np.zeros_like(keys), np.zeros_like(values))
    with pytest.raises(kvstream.UnavailableError):
        kvstream.Receiver("127.0.0.1", port, connect_timeout_ms=2000)
    with pytest.raises(kvstream.UnavailableError, match="the sender is closed"):
        sender.register("again", keys, values)
    r.close()
    with pytest.raises(kvstream.UnavailableError, match="the receiver is closed"):
        r.manifest("ctx")


def test_bad_fetch_arguments(kv, sender):
    keys, values = kv
    with kvstream.Receiver("127.0.0.1", sender.port, secret="s3cret") as r:
        with pytest.raises(kvstream.InvalidArgumentError, match="^policy: "):
            r.fetch("ctx", np.zeros_like(keys), np.zeros_like(values), policy="fastest")
        with pytest.raises(kvstream.InvalidArgumentError, match="^deadline_ms: "):
            r.fetch("ctx", np.zeros_like(keys), np.zeros_like(values), deadline_ms=0)
        with pytest.raises(kvstream.NotFoundError, match="'nope' is not registered"):
            r.fetch("nope", np.zeros_like(keys), np.zeros_like(values))
        small = np.full((5, 100, 32), 3, np.float16)
        with pytest.raises(kvstream.InvalidArgumentError):
            r.fetch("ctx", small, small.copy())
        assert (small == 3).all()
    with pytest.raises(kvstream.InvalidArgumentError, match="^port: 70000"):
        kvstream.Receiver("127.0.0.1", 70000)
    with pytest.raises(kvstream.InvalidArgumentError, match="^levels\\[1\\]: "):
        kvstream.Sender(levels=["fp16", "L0"])
    sender.unregister("ctx")
    with pytest.raises(kvstream.NotFoundError):
        sender.unregister("ctx")


def test_async_and_threaded_fetches(kv, sender):
    keys, values = kv
    expected = local_decode(keys, values, "L3")

    async def two_at_once():
        receivers = [kvstream.Receiver("127.0.0.1", sender.port, secret="s3cret") for _ in range(2)]
        outs = [(np.zeros_like(keys), np.zeros_like(values)) for _ in receivers]
        await asyncio.gather(*(r.fetch_async("ctx", k, v, 2000.0, "fixed-L3") for r, (k, v) in zip(receivers, outs)))
        return outs

    for k, v in asyncio.run(two_at_once()):
        assert np.array_equal(k, expected[0]) and np.array_equal(v, expected[1])

    shared = kvstream.Receiver("127.0.0.1", sender.port, secret="s3cret")

    def fetch(_):
        k, v = np.zeros_like(keys), np.zeros_like(values)
        shared.fetch("ctx", k, v, policy="fixed-L3")
        return k

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        for k in pool.map(fetch, range(8)):
            assert np.array_equal(k, expected[0])
    shared.close()
