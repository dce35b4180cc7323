"""The engine handoff examples on a short context (smoke tests): the lossless handoff continues with the
very tokens the prefill's own cache gives; a lossy level is smaller and close."""
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("example,engine", [("hf_handoff.py", "transformers"), ("llamacpp_handoff.py", "llama.cpp")])
def test_lossless_handoff_is_identical(example, engine):
    done = subprocess.run([sys.executable, str(ROOT / "examples" / example), "--context-tokens", "192",
                           "--eval-tokens", "32", "--generate-tokens", "12", "--methods", "fp16,kvstream-L3", "--json"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    rows = {r["method"]: r for r in map(json.loads, done.stdout.splitlines())}
    fp16, lossy = rows["fp16"], rows["kvstream-L3"]
    assert fp16["engine"] == lossy["engine"] == engine
    assert fp16["identical_tokens"] and fp16["top1_agreement"] == 1.0 and fp16["ppl_delta_pct"] == 0.0
    assert lossy["bytes"] * 3 < fp16["bytes"] and lossy["top1_agreement"] > 0.7
    assert fp16["kv_ready_ms"] > 0


def test_hf_handoff_with_a_profile_learned_on_rotate_half_keys(tmp_path):
    # The transform scheme undoes RoPE, so its profile must be learned on transformers' own (rotate-half) keys.
    profile = tmp_path / "hf.kvprofile"
    done = subprocess.run([sys.executable, str(ROOT / "examples" / "hf_handoff.py"), "--context-tokens", "192",
                           "--eval-tokens", "32", "--generate-tokens", "4", "--methods", "kvstream-L3", "--scheme", "transform",
                           "--learn-profile", str(profile), "--profile-contexts", "2", "--profile-context-tokens", "256",
                           "--json"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    row = json.loads(done.stdout.splitlines()[-1])
    assert row["scheme"] == "transform" and row["profile"] is not None and profile.exists()
    assert row["bits_per_value"] < 4 and row["top1_agreement"] > 0.7
