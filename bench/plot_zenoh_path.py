#!/usr/bin/env python3
"""Plots bench/results/zenoh_path.json (crates/ferry/examples/zenoh_path.rs):
ferry's Zenoh path over plain Zenoh (and over plain Zenoh carrying
rmw_zenoh's attachment), RTT p50 and throughput ratios per size,
peer and router modes. Writes bench/results/zenoh_path.png.

    python3 bench/plot_zenoh_path.py [results.json]
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(__file__), "results", "zenoh_path.json")
    rows = json.load(open(src))
    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, (metric, title, target) in zip(axes, [
        ("rtt_p50_us", "RTT p50, ferry / Zenoh (lower is better)", 1.1),
        ("mb_per_s", "throughput, ferry / Zenoh (higher is better)", 0.9),
    ]):
        for mode, marker in (("peer", "o"), ("router", "s")):
            sizes = sorted({r["size"] for r in rows if r["mode"] == mode})
            for base, ls in (("zenoh", "-"), ("zenoh-att", ":")):
                ratio = []
                for s in sizes:
                    f = next(r for r in rows if (r["mode"], r["size"], r["system"]) == (mode, s, "ferry"))
                    z = next((r for r in rows if (r["mode"], r["size"], r["system"]) == (mode, s, base)), None)
                    ratio.append(f[metric] / z[metric] if z and z[metric] else float("nan"))
                label = f"{mode}, over plain" + (" + rmw_zenoh attachment" if base == "zenoh-att" else "")
                ax.plot(sizes, ratio, marker=marker, ls=ls, label=label)
        ax.axhline(1.0, color="grey", lw=0.8)
        ax.axhline(target, color="red", lw=0.8, ls="--", label="issue 24's bound")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("payload (bytes)")
        ax.set_title(title, fontsize=9)
        ax.legend(fontsize=8)
    fig.suptitle("ferry's Zenoh path vs plain Zenoh 1.10.2, one run (crates/ferry/examples/zenoh_path.rs)",
                 fontsize=10)
    fig.tight_layout()
    out = os.path.splitext(src)[0] + ".png"
    fig.savefig(out, dpi=100)
    print(out)


if __name__ == "__main__":
    main()
