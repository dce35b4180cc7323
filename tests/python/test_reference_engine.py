"""kvstream's reference engine against Hugging Face transformers on SmolLM2 (the same GGUF, fp32): the
same token ids, KV within fp16's rounding of each other, and the same greedy continuation. transformers
keeps keys in rotate-half order (docs/kv-dump-format.md, rope_layout 1) and the reference engine, like
llama.cpp, interleaved: head dimension 2i is transformers' i, 2i + 1 its i + head_dim / 2."""
import os
import pathlib
import subprocess
import sys
import tempfile

import numpy as np
import pytest
import torch

from conftest import GPL, run_cli

ROOT = pathlib.Path(__file__).resolve().parents[2]
os.environ.setdefault("TQDM_DISABLE", "1")


@pytest.fixture(scope="module")
def hf():
    import transformers

    transformers.logging.set_verbosity_error()
    gguf = pathlib.Path(subprocess.run([sys.executable, str(ROOT / "scripts" / "fetch_model.py"), "smollm2"],
                                       capture_output=True, text=True, check=True).stdout.strip())
    folder = pathlib.Path(tempfile.mkdtemp(prefix="kvstream-hf-"))
    (folder / gguf.name).symlink_to(gguf)
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf.name, dtype=torch.float32)
    return tokenizer, model.eval()


def test_same_tokens_and_kv(hf, tmp_path):
    tokenizer, model = hf
    dump = tmp_path / "kv.npz"
    run_cli("kv", "dump", "--model", "smollm2", "--text", GPL, "--tokens", "128", "--out", str(dump))
    with np.load(dump) as z:
        ids, keys, values, config = z["tokens"], z["k"], z["v"], z["config"]
    assert list(tokenizer(pathlib.Path(GPL).read_text()).input_ids[:128]) == list(ids)
    layers, tokens, channels = keys.shape
    head_dim = int(config[5])
    assert int(config[6]) == 0, "the reference engine's keys are interleaved"
    with torch.no_grad():
        cache = model(torch.tensor([ids]), use_cache=True).cache
    interleaved = np.empty(head_dim, int)
    interleaved[0::2], interleaved[1::2] = np.arange(head_dim // 2), np.arange(head_dim // 2) + head_dim // 2
    for l in range(layers):
        hk, hv = cache.layers[l].keys[0].numpy(), cache.layers[l].values[0].numpy()  # [kv_heads][tokens][head_dim]
        k = hk[:, :, interleaved].transpose(1, 0, 2).reshape(tokens, channels)
        v = hv.transpose(1, 0, 2).reshape(tokens, channels)
        for ours, theirs, name in ((keys[l], k, "keys"), (values[l], v, "values")):
            # fp16 keeps 11 significant bits: the engines agree far inside that.
            assert np.abs(ours - theirs).max() <= 2.0 ** -11 * np.abs(ours).max(), f"layer {l} {name}"


def test_same_greedy_continuation(hf):
    tokenizer, model = hf
    prompt = pathlib.Path(GPL).read_text()[:400]
    ours = run_cli("generate", "--model", "smollm2", "--prompt", prompt, "--max-tokens", "16")
    assert ours.startswith(prompt)
    ids = tokenizer(prompt, return_tensors="pt").input_ids
    with torch.no_grad():
        out = model.generate(ids, max_new_tokens=16, do_sample=False)
    assert tokenizer.decode(out[0, ids.shape[1]:]) == ours[len(prompt):].removesuffix("\n")
