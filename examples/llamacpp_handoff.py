#!/usr/bin/env python3
"""Hands a llama.cpp KV cache from a prefill process to a decode process through kvstream, live.

The prefill process (this one) runs --context-tokens of a text through SmolLM2-135M-Instruct (the GGUF the
project fetches) in llama.cpp (llama-cpp-python), takes the sequence's KV out with
``llama_state_seq_get_data``, parses it in place (kvstream.llamacpp: K and V are views of llama.cpp's
bytes, no copy) and serves it with a kvstream.Sender. A decode process (another OS process, started by
this one) loads the same model, lays out an empty sequence state (kvstream.llamacpp.SeqState.build),
fetches each method over loopback into its views, hands the bytes to ``llama_state_seq_set_data`` (the
one copy, llama.cpp's own) and continues without prefilling:
  * --generate-tokens greedily from the context's next token, compared with what the prefill process's
    own cache generated (identical_tokens: the lossless fp16 method must match);
  * the next --eval-tokens of the text teacher-forced, against the same with the prefill's cache: top-1
    agreement and the perplexity change.
Methods are spelled as `kvstream eval` spells them: fp16, int8, kvstream-L<n>.

    python examples/llamacpp_handoff.py --context-tokens 2048 --eval-tokens 512 --methods fp16,int8,kvstream-L3 --json

llama-cpp-python builds llama.cpp from source; on a CPU whose native build crashes (design.md) install it
with CMAKE_ARGS=-DGGML_NATIVE=OFF (bindings/requirements-test.txt does).
"""
from __future__ import annotations

import argparse
import ctypes
import json
import math
import os
import pathlib
import subprocess
import sys
import tempfile

import handoff_common  # beside this script
from handoff_common import level_of

import numpy as np


def load(gguf: str, n_ctx: int):
    import llama_cpp

    return llama_cpp.Llama(model_path=gguf, n_ctx=n_ctx, n_threads=os.cpu_count() or 1, verbose=False)


def last_logits(llm) -> np.ndarray:
    """The logits of the last token evaluated (llama-cpp-python keeps no scores without logits_all)."""
    import llama_cpp

    return np.ctypeslib.as_array(llama_cpp.llama_get_logits(llm.ctx), shape=(llm.n_vocab(),)).astype(np.float64)


def continue_from(llm, context_tokens: int, ids: list[int], generate: int, evaluate: int) -> dict:
    """Greedy tokens after the context, then teacher-forced argmax and mean NLL over the next tokens."""
    llm.n_tokens = context_tokens  # llama-cpp-python drops the cache past n_tokens before its next eval
    tokens, token = [], ids[context_tokens]
    for _ in range(generate):
        llm.eval([token])
        token = int(np.argmax(last_logits(llm)))
        tokens.append(token)
    llm.n_tokens = context_tokens
    top1, nll = [], 0.0
    for i in range(evaluate):
        llm.eval([ids[context_tokens + i]])
        logits = last_logits(llm)
        top1.append(int(np.argmax(logits)))
        target = ids[context_tokens + i + 1]
        nll -= logits[target] - (logits.max() + math.log(np.exp(logits - logits.max()).sum()))
    return {"tokens": tokens, "top1": top1, "nll": nll / max(1, evaluate)}


def decode_role(args) -> int:
    import llama_cpp

    import kvstream
    from kvstream.llamacpp import SeqState

    shape = json.loads(args.shape)
    reference = json.loads(pathlib.Path(args.reference).read_text())
    ids = reference["ids"]
    n = args.context_tokens
    llm = load(args.gguf, args.n_ctx)
    with kvstream.Receiver("127.0.0.1", args.port) as receiver:
        for method in args.methods.split(","):
            state = SeqState.build(shape["layers"], n, shape["channels"], v_trans=shape["v_trans"])
            result = receiver.fetch("context", state.keys, state.values, deadline_ms=10000,
                                    policy=f"fixed-{level_of(method)}")
            llm.reset()
            buffer = (ctypes.c_uint8 * len(state.buffer)).from_buffer(state.buffer)
            if llama_cpp.llama_state_seq_set_data(llm.ctx, buffer, len(state.buffer), 0) != len(state.buffer):
                sys.exit("llama_state_seq_set_data refused the fetched state")
            llm.input_ids[:n] = ids[:n]
            got = continue_from(llm, n, ids, args.generate_tokens, args.eval_tokens)
            print(json.dumps({
                "engine": "llama.cpp", "method": method, "context_tokens": n, "eval_tokens": args.eval_tokens,
                "bytes": result["bytes"], "kv_ready_ms": result["kv_ready_ms"],
                "bits_per_value": 8 * result["bytes"] / (2 * shape["layers"] * n * shape["channels"]),
                "identical_tokens": got["tokens"] == reference["tokens"],
                "top1_agreement": float(np.mean(np.array(got["top1"]) == np.array(reference["top1"]))),
                "ppl_delta_pct": 100 * (math.exp(got["nll"] - reference["nll"]) - 1),
            }), flush=True)
    return 0


def main(argv=None) -> int:
    parser = handoff_common.parser(__doc__.splitlines()[0])
    # The decode process's own arguments (set by the prefill process).
    parser.add_argument("--role", choices=["prefill", "decode"], default="prefill", help=argparse.SUPPRESS)
    for hidden in ("--port", "--shape", "--reference", "--n-ctx"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.gguf = handoff_common.gguf_path(args.gguf)
    if args.role == "decode":
        args.port, args.n_ctx = int(args.port), int(args.n_ctx)
        return decode_role(args)

    import llama_cpp

    import kvstream
    from kvstream.llamacpp import SeqState

    n, e = args.context_tokens, args.eval_tokens
    n_ctx = n + max(e, args.generate_tokens) + 8
    llm = load(args.gguf, n_ctx)
    ids = llm.tokenize(pathlib.Path(args.text).read_bytes())
    if len(ids) < n + e + 1:
        sys.exit(f"--text has {len(ids)} tokens, fewer than --context-tokens + --eval-tokens + 1")
    ids = ids[:n + e + 1]
    llm.eval(ids[:n])
    size = llama_cpp.llama_state_seq_get_size(llm.ctx, 0)
    buffer = (ctypes.c_uint8 * size)()
    if llama_cpp.llama_state_seq_get_data(llm.ctx, buffer, size, 0) != size:
        sys.exit("llama_state_seq_get_data wrote less than its size")
    state = SeqState.parse(buffer)  # K and V: views of llama.cpp's bytes
    reference = continue_from(llm, n, ids, args.generate_tokens, e)
    methods = args.methods.split(",")
    with tempfile.TemporaryDirectory() as tmp, kvstream.Sender(levels=[level_of(m) for m in methods]) as sender:
        sender.register("context", state.keys, state.values)
        reference_path = pathlib.Path(tmp) / "reference.json"
        reference_path.write_text(json.dumps({**reference, "ids": ids}))
        shape = json.dumps({"layers": state.layers, "channels": state.channels, "v_trans": state.v_trans})
        decode = subprocess.run(
            [sys.executable, __file__, "--role", "decode", "--port", str(sender.port), "--shape", shape,
             "--reference", str(reference_path), "--n-ctx", str(n_ctx), "--gguf", args.gguf, "--methods", args.methods,
             "--context-tokens", str(n), "--eval-tokens", str(e), "--generate-tokens", str(args.generate_tokens)],
            capture_output=True, text=True, timeout=3600)
    if decode.returncode != 0:
        sys.exit(f"the decode process failed:\n{decode.stdout}{decode.stderr}")
    handoff_common.report([json.loads(line) for line in decode.stdout.splitlines()], args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
