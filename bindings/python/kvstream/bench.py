"""python -m kvstream.bench: the Python API against the C++ API on the same work, in one run.

Encodes and decodes one context's chunks through ``kvstream.encode`` / ``kvstream.decode_into`` and
through the C++ command (``kvstream encode`` / ``kvstream decode``, which time the library's EncodeChunk
and DecodeChunk), checks that both wrote the same bytes, and fetches the context from a
``kvstream.Sender`` with ``kvstream fetch`` and with ``kvstream.Receiver``. Both sides time each chunk
--repetitions times in a row and sum the fastest of each (fetches: the fastest of --repetitions); the
Python/C++ ratio is printed beside them with the machine's details.

    python -m kvstream.bench --model smollm2 --tokens 2048 --json
    python -m kvstream.bench --kv-dump kv.npz --profile p.kvprofile --scheme predicted --levels L3,L4
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time

import kvstream

GPL = "/usr/share/common-licenses/GPL-3"


def machine() -> dict:
    cpu = platform.processor() or "unknown"
    try:
        for line in pathlib.Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(), "kvstream": kvstream.__version__,
            "numpy": __import__("numpy").__version__, "date": time.strftime("%Y-%m-%d")}


def run(binary: str, *args: str) -> str:
    done = subprocess.run([binary, *args], capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"kvstream {' '.join(args)} failed:\n{done.stdout}{done.stderr}")
    return done.stdout


def cpp_encode_s(binary: str, dump: pathlib.Path, out: pathlib.Path, level: str, flags: list[str]) -> float:
    text = run(binary, "encode", "--kv-dump", str(dump), "--out", str(out), "--level", level, *flags)
    return float(re.search(r"encode ([0-9.]+) ms", text).group(1)) / 1000


def cpp_decode_s(binary: str, files: list[str], flags: list[str]) -> float:
    text = run(binary, "decode", *files, *flags)
    return sum(float(ms) for ms in re.findall(r"decoded in ([0-9.]+) ms", text)) / 1000


def fastest_s(call, repetitions: int) -> float:
    best = float("inf")
    for _ in range(repetitions):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best


def main(argv: list[str] | None = None) -> int:
    import numpy as np

    parser = argparse.ArgumentParser(prog="python -m kvstream.bench", description=__doc__.splitlines()[0])
    parser.add_argument("--kv-dump", help="a KV dump (.npz, docs/kv-dump-format.md); default: prefill --model")
    parser.add_argument("--model", default="smollm2", help="model prefilled when there is no --kv-dump")
    parser.add_argument("--text", default=GPL, help="text prefilled when there is no --kv-dump")
    parser.add_argument("--tokens", type=int, default=2048, help="context tokens prefilled (default 2048)")
    parser.add_argument("--profile", help="codec profile (kvstream profile); default: in-chunk tables")
    parser.add_argument("--scheme", default="channel-uniform")
    parser.add_argument("--levels", default="fp16,int8,L3", help="comma-separated levels (default fp16,int8,L3)")
    parser.add_argument("--repetitions", type=int, default=5, help="timing repetitions, best taken (default 5)")
    parser.add_argument("--kvstream", help="the C++ command (default $KVSTREAM_BIN, else kvstream on PATH)")
    parser.add_argument("--json", action="store_true", help="one JSON object per line: a header, then one per row")
    args = parser.parse_args(argv)
    binary = args.kvstream or os.environ.get("KVSTREAM_BIN") or shutil.which("kvstream")
    if not binary:
        sys.exit("python -m kvstream.bench: no kvstream command found (--kvstream PATH)")
    if args.repetitions < 1:
        sys.exit("--repetitions must be at least 1")
    profile = kvstream.Profile.load(args.profile) if args.profile else None
    codec_flags = ["--profile", args.profile] if args.profile else []
    work = pathlib.Path(tempfile.mkdtemp(prefix="kvstream-bench-"))
    try:
        dump = pathlib.Path(args.kv_dump) if args.kv_dump else work / "kv.npz"
        if not args.kv_dump:
            run(binary, "kv", "dump", "--model", args.model, "--text", args.text, "--tokens", str(args.tokens), "--out", str(dump))
        with np.load(dump) as z:
            # The command encodes from fp16 (its --dtype default), as a serving engine hands KV over.
            keys, values = z["k"].astype(np.float16), z["v"].astype(np.float16)
            token_ids = z["tokens"] if "tokens" in z.files else None
        header = {"bench": "python", "kv": str(dump), "layers": keys.shape[0], "tokens": keys.shape[1],
                  "channels": keys.shape[2], "scheme": args.scheme, "repetitions": args.repetitions, **machine()}
        rows = []
        repeat = ["--repetitions", str(args.repetitions)]
        for level in args.levels.split(","):
            # Fine rows off on both sides: each chunk is timed alone, and fine rows rank a whole context's tokens.
            flags = codec_flags + ["--scheme", args.scheme, "--fine-fraction", "0"]
            cpp_dir = work / f"chunks-{level}"
            cpp_enc = cpp_encode_s(binary, dump, cpp_dir, level, flags + repeat)
            files = sorted(str(p) for p in cpp_dir.glob("chunk_*.kvc"))
            chunks = kvstream.encode(keys, values, level, profile, args.scheme, token_ids=token_ids)
            if chunks != [pathlib.Path(f).read_bytes() for f in files]:
                sys.exit(f"level {level}: the Python and C++ chunks differ: not the same work")
            # encode's chunking, one chunk at a time as the command times it: into one buffer kept across
            # calls (out=), as the command's repetitions reuse its heap memory, and into new bytes objects,
            # whose fresh pages the operating system faults in on first touch.
            chunk_tokens = 256
            out = np.empty(max(map(len, chunks)), np.uint8)
            for op, into in (("encode", out), ("encode-new-bytes", None)):
                py_enc = 0.0
                for t0 in range(0, keys.shape[1], chunk_tokens):
                    k, v = keys[:, t0:t0 + chunk_tokens], values[:, t0:t0 + chunk_tokens]
                    ids = None if token_ids is None else token_ids[t0:t0 + chunk_tokens]
                    py_enc += fastest_s(lambda: kvstream.encode(k, v, level, profile, args.scheme, chunk_tokens, token_ids=ids,
                                                                token_begin=t0, out=into), args.repetitions)
                rows.append({"op": op, "level": level, "chunks": len(chunks), "bytes": sum(map(len, chunks)),
                             "cpp_ms": 1000 * cpp_enc, "python_ms": 1000 * py_enc, "python_over_cpp": py_enc / cpp_enc})
            if level == "text":
                continue
            cpp_dec = cpp_decode_s(binary, files, codec_flags + repeat)
            py_dec = 0.0
            for chunk in chunks:
                info = kvstream.inspect(chunk)
                shape = (info["layers"], info["tokens"], info["channels"])
                k, v = np.zeros(shape, np.float16), np.zeros(shape, np.float16)
                py_dec += fastest_s(lambda: kvstream.decode_into(chunk, k, v, profile, token_offset=info["token_begin"]),
                                    args.repetitions)
            rows.append({"op": "decode", "level": level, "chunks": len(chunks), "bytes": sum(map(len, chunks)),
                         "cpp_ms": 1000 * cpp_dec, "python_ms": 1000 * py_dec, "python_over_cpp": py_dec / cpp_dec})
        # One sender (this process) serves the context; the C++ command and the Python Receiver fetch it.
        with kvstream.Sender(profile=profile, scheme=args.scheme) as sender:
            sender.register("bench", keys, values)
            for level in args.levels.split(","):
                if level == "text":
                    continue
                fetched = run(binary, "fetch", "--connect", f"127.0.0.1:{sender.port}", "--context", "bench", "--level", level,
                              "--repeat", str(args.repetitions), "--json", *codec_flags)
                cpp_ms = min(json.loads(line)["kv_ready_ms"] for line in fetched.splitlines() if line.startswith("{"))
                k, v = np.empty_like(keys), np.empty_like(values)
                with kvstream.Receiver("127.0.0.1", sender.port, profile=profile) as receiver:
                    results = [receiver.fetch("bench", k, v, 10000.0, f"fixed-{level}") for _ in range(args.repetitions)]
                py_ms = min(r["kv_ready_ms"] for r in results)
                rows.append({"op": "fetch", "level": level, "chunks": len(results[0]["chunks"]), "bytes": results[0]["bytes"],
                             "cpp_ms": cpp_ms, "python_ms": py_ms, "python_over_cpp": py_ms / cpp_ms})
    finally:
        shutil.rmtree(work, ignore_errors=True)
    if args.json:
        print(json.dumps(header))
        for r in rows:
            print(json.dumps(r))
        return 0
    print(f"{header['tokens']}-token context, {header['layers']} layers x {header['channels']} channels, scheme "
          f"{args.scheme}, best of {args.repetitions}; {header['cpu']}, {header['cores']} cores, Python {header['python']}")
    print(f"{'op':16} {'level':6} {'C++ ms':>10} {'Python ms':>10} {'Python/C++':>11}")
    for r in rows:
        print(f"{r['op']:16} {r['level']:6} {r['cpp_ms']:10.3f} {r['python_ms']:10.3f} {r['python_over_cpp']:11.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
