#!/usr/bin/env python3
"""Hands a Hugging Face transformers KV cache from a prefill to a decode through kvstream, live.

SmolLM2-135M-Instruct is loaded from the GGUF file the project fetches (scripts/fetch_model.py) through
transformers' GGUF loader, in bfloat16 (so that its KV passes the fp16 level, which stores bf16 as bf16,
bit for bit). The prefill side runs --context-tokens of a text, registers its DynamicCache's per-layer
tensors with a kvstream.Sender (the Hugging Face layout costs the one gather into the codec's layout);
the decode side fetches each method into a receiving DynamicCache's own tensors in place (no copy) over
loopback and continues from there without prefilling:
  * it generates --generate-tokens greedily and compares them with the tokens generated from the
    prefill's own cache (identical_tokens: the lossless methods must match);
  * it scores the next --eval-tokens of the text teacher-forced with the fetched cache against the same
    with the prefill's cache: top-1 agreement and the perplexity change.
Both sides run in this process (the Sender's threads serve, the Receiver fetches); the bytes cross a real
loopback connection. Methods are spelled as `kvstream eval` spells them: fp16, int8, kvstream-L<n>.

The lossy levels use in-chunk tables unless a profile is given. Hugging Face keeps keys in rotate-half
order, so a profile for the transform and predicted schemes is learned from this engine's own caches:
--learn-profile P prefills --profile-contexts windows of --profile-text (another text than --text) with
transformers, learns the schemes from their DynamicCaches (kvstream.Profile.learn_from_samples with
rope_layout="rotate-half") and saves P; --profile P uses a saved one; --scheme picks the scheme.

    python examples/hf_handoff.py --context-tokens 2048 --eval-tokens 512 --methods fp16,int8,kvstream-L3 --json
    python examples/hf_handoff.py --learn-profile hf.kvprofile --scheme predicted --methods int8,kvstream-L4 --json
"""
from __future__ import annotations

import math
import os
import pathlib
import sys
import tempfile

import handoff_common  # beside this script
from handoff_common import level_of

os.environ.setdefault("TQDM_DISABLE", "1")  # the GGUF loader's progress bars

import torch

import kvstream


def load_model(gguf: pathlib.Path):
    import transformers

    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    folder = pathlib.Path(tempfile.mkdtemp(prefix="kvstream-hf-"))
    (folder / gguf.name).symlink_to(gguf.resolve())  # transformers reads a GGUF file from a folder
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder, gguf_file=gguf.name)
    model = transformers.AutoModelForCausalLM.from_pretrained(folder, gguf_file=gguf.name, dtype=torch.bfloat16)
    model.eval()
    return tokenizer, model


def empty_cache(model, like):
    """A DynamicCache holding zeros shaped as `like`'s layers: the tensors kvstream writes into."""
    from transformers import DynamicCache

    cache = DynamicCache(config=model.config)
    for i, layer in enumerate(like.layers):
        cache.update(torch.zeros_like(layer.keys), torch.zeros_like(layer.values), i)
    return cache


def crop_to(cache, tokens: int) -> None:
    """Drops what a decode appended, back to the context's `tokens`."""
    extra = cache.get_seq_length() - tokens
    if extra > 0:
        cache.crop(-extra)


@torch.no_grad()
def greedy(model, cache, first_token: int, steps: int) -> list[int]:
    tokens, token = [], first_token
    for _ in range(steps):
        logits = model(torch.tensor([[token]]), cache=cache, use_cache=True).logits
        token = int(logits[0, -1].argmax())
        tokens.append(token)
    return tokens


@torch.no_grad()
def teacher_forced(model, cache, ids: torch.Tensor):
    """Log-probabilities of ids[1:] and the argmax at each position, fed ids with the cache before them."""
    logits = model(ids, cache=cache, use_cache=True).logits[0, :-1].float()
    return torch.log_softmax(logits, -1), logits.argmax(-1)


def learn_profile(model, tokenizer, args) -> kvstream.Profile:
    """A profile learned from transformers' own caches of --profile-text, in their rotate-half layout."""
    ids = tokenizer(pathlib.Path(args.profile_text).read_text(), return_tensors="pt").input_ids
    t, windows = args.profile_context_tokens, args.profile_contexts
    if ids.shape[1] < windows * t:
        sys.exit(f"--profile-text has {ids.shape[1]} tokens, fewer than --profile-contexts x --profile-context-tokens")
    samples = []
    with torch.no_grad():
        for w in range(windows):
            cache = model(ids[:, w * t:(w + 1) * t], use_cache=True).cache
            samples.append(([layer.keys for layer in cache.layers], [layer.values for layer in cache.layers]))
    config = model.config
    head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
    theta = getattr(config, "rope_theta", None) or config.rope_parameters["rope_theta"]
    profile = kvstream.Profile.learn_from_samples(
        samples, model=f"{pathlib.Path(args.gguf or 'SmolLM2').stem} (transformers)", transform=args.scheme != "channel-uniform",
        predict=args.scheme == "predicted", rope_head_dim=head_dim, rope_theta=float(theta), rope_layout="rotate-half")
    profile.save(args.learn_profile)
    return profile


def main(argv=None) -> int:
    parser = handoff_common.parser(__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="channel-uniform", choices=["channel-uniform", "transform", "predicted"])
    parser.add_argument("--profile", help="a profile learned on this engine's caches (see --learn-profile)")
    parser.add_argument("--learn-profile", metavar="P", help="learn a rotate-half profile from --profile-text, save it as P")
    parser.add_argument("--profile-text", default="/usr/share/common-licenses/GFDL-1.3")
    parser.add_argument("--profile-contexts", type=int, default=4)
    parser.add_argument("--profile-context-tokens", type=int, default=1024)
    args = parser.parse_args(argv)
    if args.profile and args.learn_profile:
        parser.error("--profile and --learn-profile exclude each other")
    if args.scheme != "channel-uniform" and not (args.profile or args.learn_profile):
        parser.error(f"--scheme {args.scheme} needs --profile or --learn-profile")
    gguf = pathlib.Path(handoff_common.gguf_path(args.gguf))
    tokenizer, model = load_model(gguf)
    torch.set_num_threads(os.cpu_count() or 1)
    ids = tokenizer(pathlib.Path(args.text).read_text(), return_tensors="pt").input_ids
    n, e = args.context_tokens, args.eval_tokens
    if ids.shape[1] < n + e + 1:
        sys.exit(f"--text has {ids.shape[1]} tokens, fewer than --context-tokens + --eval-tokens + 1")
    methods = args.methods.split(",")
    profile = kvstream.Profile.load(args.profile) if args.profile else None
    if args.learn_profile:
        profile = learn_profile(model, tokenizer, args)

    # Prefill side.
    with torch.no_grad():
        prefill = model(ids[:, :n], use_cache=True).cache
    keys = [layer.keys for layer in prefill.layers]
    values = [layer.values for layer in prefill.layers]
    reference_tokens = greedy(model, prefill, int(ids[0, n]), args.generate_tokens)
    crop_to(prefill, n)
    reference_logp, reference_top1 = teacher_forced(model, prefill, ids[:, n:n + e + 1])
    crop_to(prefill, n)
    targets = ids[0, n + 1:n + e + 1]
    reference_nll = -reference_logp.gather(1, targets[:, None]).mean().item()

    rows = []
    with kvstream.Sender(levels=[level_of(m) for m in methods], profile=profile, scheme=args.scheme,
                         fine_fraction=0.0) as sender:
        sender.register("context", keys, values)
        with kvstream.Receiver("127.0.0.1", sender.port, profile=profile) as receiver:
            for method in methods:
                # Decode side: the engine's own cache tensors, written in place.
                cache = empty_cache(model, prefill)
                result = receiver.fetch("context", [l.keys for l in cache.layers], [l.values for l in cache.layers],
                                        deadline_ms=10000, policy=f"fixed-{level_of(method)}")
                tokens = greedy(model, cache, int(ids[0, n]), args.generate_tokens)
                crop_to(cache, n)
                logp, top1 = teacher_forced(model, cache, ids[:, n:n + e + 1])
                nll = -logp.gather(1, targets[:, None]).mean().item()
                rows.append({
                    "engine": "transformers", "method": method, "scheme": args.scheme if level_of(method)[0] == "L" else None,
                    "profile": f"{profile.hash:016x}" if profile else None, "context_tokens": n, "eval_tokens": e,
                    "bytes": result["bytes"], "kv_ready_ms": result["kv_ready_ms"],
                    "bits_per_value": 8 * result["bytes"] / (2 * sum(k.numel() for k in keys)),
                    "identical_tokens": tokens == reference_tokens,
                    "top1_agreement": (top1 == reference_top1).float().mean().item(),
                    "ppl_delta_pct": 100 * (math.exp(nll - reference_nll) - 1),
                })
    handoff_common.report(rows, args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
