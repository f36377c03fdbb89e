#!/usr/bin/env python3
"""bench/results/priority.json -> priority.png: seed 002 Fig. 5 on the lab.
Bars: mean RTT ± std per transport pair and load, normal vs prioritized;
dots: p99."""
import json, pathlib, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

R = pathlib.Path(__file__).parent / "results"
src = pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else R / "priority.json"
d = json.loads(src.read_text())
rows = d["rows"]
tops = sorted({r["topology"] for r in rows})
fig, axes = plt.subplots(1, len(tops), figsize=(7 * len(tops), 4.8), squeeze=False)
titles = {"a": "(a) congestion at the sender's NIC", "b": "(b) congestion at a shared link"}
for ax, t in zip(axes[0], tops):
    rs = [r for r in rows if r["topology"] == t]
    labels = [f'{r["meas"]}/{r["load"]}\n{r["load_pct"]}%' for r in rs]
    x = range(len(rs))
    w = 0.38
    for i, (key, name, col) in enumerate([("normal", "normal", "#c44e52"), ("prio", "High + fifo:30", "#4c72b0")]):
        xs = [k + (i - 0.5) * w for k in x]
        ax.bar(xs, [r[key]["mean"] for r in rs], w, yerr=[r[key]["std"] for r in rs],
               color=col, alpha=0.85, capsize=2, label=f"{name}: mean ± std")
        ax.scatter(xs, [r[key]["p99"] for r in rs], color="black", marker="_" if i == 0 else "x",
                   s=60, zorder=3, label=f"{name}: p99" )
    ax.set_xticks(list(x))
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("round trip (ms)")
    ax.set_yscale("log")
    ax.set_title(f'{titles.get(t, t)}, tbf {d["rate_mbit"]} Mbit/s + pfifo_fast')
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left")
fig.suptitle("ferry channel priority under load (measurement/load transport, load % of the cap)")
fig.tight_layout()
out = src.with_suffix(".png")
fig.savefig(out, dpi=110)
print(f"wrote {out}")
