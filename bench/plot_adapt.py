#!/usr/bin/python3
"""Draws one policy's run of `kvstream bench adapt`: link rate, levels chosen, progress against the deadline.

usage: plot_adapt.py TIMELINE.json OUT.png   (the timeline is written by `kvstream bench adapt --out DIR`)
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1]) as f:
        t = json.load(f)
    # Levels ranked by quality, lowest at the bottom; text (exact recompute) sits on top beside fp16.
    levels = sorted(t["levels"], key=lambda l: (l["quality"], l["level"] != "text"))
    rank = {l["level"]: i for i, l in enumerate(levels)}
    horizon = t["horizon_s"]

    fig, (ax_bw, ax_lv, ax_pr) = plt.subplots(3, 1, figsize=(8, 8), sharex=True)
    pts = t["trace_mbps"]
    xs = [p[0] for p in pts] + [horizon]
    ys = [p[1] for p in pts] + [pts[-1][1]]
    ax_bw.step(xs, ys, where="post", color="black")
    ax_bw.set_ylabel("link Mbit/s")
    ax_bw.set_ylim(bottom=0)
    ax_bw.set_title(f"{t['policy']} on {t['trace']}")

    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, r in enumerate(t["requests"]):
        c = colors[i % len(colors)]
        a = r["arrival_s"]
        for ch in r["chunks"]:
            ax_lv.hlines(rank[ch["level"]], a + ch["requested_s"], a + ch["received_s"], color=c, linewidth=4)
        done, xs, ys = 0, [a], [0.0]
        for ch in sorted(r["chunks"], key=lambda ch: ch["decoded_s"]):
            done += ch["tokens"]
            xs.append(a + ch["decoded_s"])
            ys.append(done / r["total_tokens"])
        label = f"req {i}: ready {1e3 * r['ready_s']:.0f} ms, quality {r['quality']:.3f}" + ("" if r["met"] else " (late)")
        ax_pr.step(xs, ys, where="post", color=c, label=label)
        ax_pr.axvline(a + r["deadline_s"], color=c, linestyle="--")
    ax_lv.set_yticks(range(len(levels)))
    ax_lv.set_yticklabels([l["level"] for l in levels])
    ax_lv.set_ylabel("level on the wire")
    ax_pr.set_ylabel("context ready")
    ax_pr.set_xlabel("time (s); dashed: deadline")
    ax_pr.set_ylim(0, 1.05)
    ax_pr.legend(loc="lower right", fontsize=8)
    ax_pr.set_xlim(0, horizon)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=90)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
