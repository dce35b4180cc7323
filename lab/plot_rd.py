#!/usr/bin/env python3
"""Plots the rate-distortion study (kvstream_rd_study JSON lines) as bits/value against KL and top-1.

usage: lab/plot_rd.py RESULTS.jsonl OUT.png [SCHEME,SCHEME,...]
Each scheme family (the "scheme" field) is one curve; reference points (int8, cachegen-ref) are markers.
With a scheme list, only those families are drawn (e.g. the transform-coding study against its baseline).
"""
import json
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main() -> int:
    if len(sys.argv) not in (3, 4):
        print(__doc__, file=sys.stderr)
        return 2
    rows = []
    with open(sys.argv[1]) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                row = json.loads(line)
                if "scheme" in row and (len(sys.argv) == 3 or row["scheme"] in sys.argv[3].split(",")):
                    rows.append(row)
    families = defaultdict(list)
    for r in rows:
        key = r["scheme"]
        tokens = r.get("params", "").split()
        ka = [t[3:] for t in tokens if t.startswith("ka=")]
        va = [t[3:] for t in tokens if t.startswith("va=")]
        if ka and va and ka != va:  # split key/value steps are their own family, not part of the alpha sweep
            key += " (ka!=va)"
        for token in tokens:
            if (token.startswith("exp=") and token != "exp=0") or (
                token.startswith("sink=") and token not in ("sink=0", "sink=4")
            ):
                key += f" ({token})"
        families[key].append(r)
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    colors = plt.cm.tab20.colors
    for i, (name, pts) in enumerate(sorted(families.items())):
        pts.sort(key=lambda r: r["bits_per_value"])
        x = [p["bits_per_value"] for p in pts]
        style = "o" if len(pts) == 1 else "o-"
        color = colors[i % len(colors)]
        axes[0].plot(x, [max(p["kl_mean"], 1e-6) for p in pts], style, color=color, label=name)
        axes[1].plot(x, [p["top1_agreement"] for p in pts], style, color=color, label=name)
    axes[0].set_yscale("log")
    axes[0].set_ylabel("mean KL(original || compressed), nats")
    axes[1].set_ylabel("top-1 agreement")
    axes[1].axhline(0.98, color="grey", linestyle="--", linewidth=0.8)
    for ax in axes:
        ax.set_xlabel("bits per K/V value (all side information included)")
        ax.grid(True, alpha=0.3)
    axes[1].legend(fontsize=7, loc="lower right")
    fig.suptitle("SmolLM2-135M KV: rate vs quality (context 2048, eval 256, GPL-3 text)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main())
