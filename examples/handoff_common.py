"""What the engine handoff examples share: their flags, method names, the model file and the report."""
from __future__ import annotations

import argparse
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[1]


def parser(description: str) -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--context-tokens", type=int, default=2048)
    p.add_argument("--eval-tokens", type=int, default=512, help="continuation tokens scored teacher-forced")
    p.add_argument("--generate-tokens", type=int, default=32, help="tokens generated greedily after the handoff")
    p.add_argument("--methods", default="fp16,int8,kvstream-L3")
    p.add_argument("--text", default="/usr/share/common-licenses/GPL-3")
    p.add_argument("--gguf", help="the SmolLM2 GGUF (default: fetched into the model cache)")
    p.add_argument("--json", action="store_true", help="one JSON object per method")
    return p


def gguf_path(given: str | None) -> str:
    """--gguf, or SmolLM2's GGUF fetched into the project's model cache (scripts/fetch_model.py)."""
    if given:
        return given
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_model.py"), "smollm2"], capture_output=True,
                          text=True, check=True).stdout.strip()


def level_of(method: str) -> str:
    """The kvstream level of a method named as `kvstream eval` names it: fp16, int8, kvstream-L<n>."""
    if method in ("fp16", "int8"):
        return method
    if method.startswith("kvstream-L") and method[len("kvstream-L"):].isdigit():
        return method[len("kvstream-"):]
    sys.exit(f"--methods: {method!r}, expected fp16, int8 or kvstream-L<n>")


def report(rows: list[dict], as_json: bool) -> None:
    for r in rows:
        if as_json:
            print(json.dumps(r))
        else:
            print(f"{r['method']:14} {r['bytes']:>10} bytes {r['bits_per_value']:6.3f} bits/value  KV ready "
                  f"{r['kv_ready_ms']:8.2f} ms  identical tokens {str(r['identical_tokens']):5}  top-1 "
                  f"{r['top1_agreement']:.4f}  ppl {r['ppl_delta_pct']:+.3f} %")
