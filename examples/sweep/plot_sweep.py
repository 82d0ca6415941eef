#!/usr/bin/env python3
"""Plots a run_sweep.sh sweep: output throughput per GPU against median TPOT, and TTFT against
concurrency, from the `deepinfer bench serve` JSON of each level; writes sweep.json beside them."""
import argparse
import json
import os
import sys


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("levels", nargs="+", help="bench serve JSON files, one per concurrency level")
    p.add_argument("--out", required=True, help="directory for sweep.json and the PNGs")
    p.add_argument("--gpus", type=int, default=1, help="GPUs behind the server (per-GPU figures)")
    p.add_argument("--device", default="cpu", help="label for the titles")
    a = p.parse_args()
    points = []
    for path in a.levels:
        with open(path) as f:
            r = json.load(f)
        if r["completed"] == 0:
            sys.exit(f"plot_sweep.py: {path}: no request completed ({r.get('first_error')})")
        points.append({
            "concurrency": r["max_concurrency"],
            "completed": r["completed"],
            "failed": r["failed"],
            "output_tok_s": r["output_throughput"],
            "output_tok_s_per_gpu": r["output_throughput"] / a.gpus,
            "tpot_ms_p50": r["tpot_ms"]["p50"],
            "ttft_ms_p50": r["ttft_ms"]["p50"],
            "ttft_ms_p99": r["ttft_ms"]["p99"],
            "source": os.path.basename(path),
        })
    points.sort(key=lambda x: x["concurrency"])
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump({"device": a.device, "gpus": a.gpus, "points": points}, f, indent=2)

    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 4.5))
    ax.plot([x["tpot_ms_p50"] for x in points], [x["output_tok_s_per_gpu"] for x in points],
            marker="o")
    for x in points:
        ax.annotate(str(x["concurrency"]), (x["tpot_ms_p50"], x["output_tok_s_per_gpu"]),
                    textcoords="offset points", xytext=(4, 4), fontsize=8)
    ax.set_xlabel("TPOT p50 (ms)")
    ax.set_ylabel("output tokens/s per GPU")
    ax.set_title(f"deepinfer, {a.device}: throughput per GPU vs TPOT\n(point labels: concurrency)")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "throughput_per_gpu_vs_tpot.png"), dpi=120)

    fig, ax = plt.subplots(figsize=(6, 4.5))
    c = [x["concurrency"] for x in points]
    ax.plot(c, [x["ttft_ms_p50"] for x in points], marker="o", label="TTFT p50")
    ax.plot(c, [x["ttft_ms_p99"] for x in points], marker="s", label="TTFT p99")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("concurrency (requests in flight)")
    ax.set_ylabel("TTFT (ms)")
    ax.set_title(f"deepinfer, {a.device}: TTFT vs load")
    ax.grid(True, alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(os.path.join(a.out, "ttft_vs_load.png"), dpi=120)
    print(f"plot_sweep.py: {len(points)} levels -> {a.out}/sweep.json, "
          "throughput_per_gpu_vs_tpot.png, ttft_vs_load.png")


if __name__ == "__main__":
    main()
