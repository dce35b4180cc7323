"""examples/hf_handoff.py on a short context (a smoke test): the lossless handoff continues with the very
tokens the prefill's own cache gives; a lossy level is smaller and close."""
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_transformers_handoff_lossless_is_identical():
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "hf_handoff.py"), "--context-tokens", "192",
                           "--eval-tokens", "32", "--generate-tokens", "12", "--methods", "fp16,kvstream-L3", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["method"]: r for r in map(json.loads, done.stdout.splitlines())}
    fp16, lossy = rows["fp16"], rows["kvstream-L3"]
    assert fp16["engine"] == "transformers"
    assert fp16["identical_tokens"] and fp16["top1_agreement"] == 1.0 and fp16["ppl_delta_pct"] == 0.0
    assert lossy["bytes"] * 3 < fp16["bytes"] and lossy["top1_agreement"] > 0.8
    assert fp16["kv_ready_ms"] > 0
