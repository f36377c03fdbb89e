#!/usr/bin/env python3
"""bench/results/services.json (+ services-fixed-rate.json) -> services.png:
service call round trip per path and request size, written by ferry-srv-rtt
(p50 bars, p99 whiskers; log scale)."""
import json, pathlib, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

res = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "results")
runs = [("default (udp_adaptive_rate)", res / "services.json"),
        ("--udp-fixed-rate", res / "services-fixed-rate.json")]
runs = [(t, json.loads(p.read_text())) for t, p in runs if p.exists()]
paths = ["intra", "shm", "udp", "tcp"]
colors = {"intra": "tab:green", "shm": "tab:blue", "udp": "tab:orange", "tcp": "tab:gray"}
fig, axes = plt.subplots(1, len(runs), figsize=(6.5 * len(runs), 4.5), sharey=True, squeeze=False)
for ax, (title, cells) in zip(axes[0], runs):
    sizes = sorted({c["size"] for c in cells})
    w = 0.8 / len(paths)
    for i, p in enumerate(paths):
        xs, p50, err = [], [], []
        for j, s in enumerate(sizes):
            c = next(c for c in cells if c["size"] == s and c["path"] == p)
            xs.append(j + (i - 1.5) * w)
            p50.append(c["p50_us"])
            err.append(max(c["p99_us"] - c["p50_us"], 0))
        ax.bar(xs, p50, w, yerr=[[0] * len(err), err], color=colors[p], label=p, capsize=2)
    ax.set_xticks(range(len(sizes)))
    ax.set_xticklabels([f"{s // 1024} KiB" if s >= 1024 else f"{s} B" for s in sizes])
    ax.set_yscale("log")
    ax.set_title(f"UDP pacing: {title}")
    ax.set_xlabel("request = response size")
    ax.grid(axis="y", alpha=0.3)
axes[0][0].set_ylabel("call round trip, µs (p50, whisker p99)")
axes[0][0].legend()
fig.suptitle("ferry service calls per path, one host (ferry-srv-rtt)")
fig.tight_layout()
out = res / "services.png"
fig.savefig(out, dpi=110)
print(out)
