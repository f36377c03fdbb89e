#!/usr/bin/env python3
"""Plots bench/results/foundation.json (written by ferry-bench) to a PNG.

usage: python3 bench/plot.py [results.json] [out.png]
"""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
src = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "results", "foundation.json")
dst = sys.argv[2] if len(sys.argv) > 2 else os.path.splitext(src)[0] + ".png"
with open(src) as f:
    r = json.load(f)

STYLE = {
    "ferry-intra": ("ferry in-process", "tab:green", "-"),
    "ferry-tcp": ("ferry TCP (keep_all)", "tab:blue", "-"),
    "zenoh-tcp": ("Zenoh TCP", "tab:orange", "-"),
    "ferry-tcp-keep_last": ("ferry TCP keep_last(1024), diagnostic", "tab:blue", ":"),
}


def size_label(s):
    if s >= 1 << 20:
        return f"{s >> 20} MiB"
    if s >= 1024:
        return f"{s >> 10} KiB"
    return f"{s} B"


fig, (ax_lat, ax_msg, ax_gb) = plt.subplots(1, 3, figsize=(16, 5))
for t, (label, color, _ls) in STYLE.items():
    rows = sorted((l for l in r["latency"] if l["transport"] == t), key=lambda l: l["size"])
    if not rows:
        continue
    xs = [l["size"] for l in rows]
    ax_lat.plot(xs, [l["p50_ns"] / 1e3 for l in rows], "o-", color=color, label=f"{label} p50")
    ax_lat.plot(xs, [l["p99_ns"] / 1e3 for l in rows], "x--", color=color, alpha=0.6, label=f"{label} p99")
for t, (label, color, ls) in STYLE.items():
    rows = sorted((x for x in r["throughput"] if x["transport"] == t), key=lambda x: x["size"])
    if not rows:
        continue
    # Log axes: a stalled cell (rate 0) is drawn as an x at the bottom.
    ok = [x for x in rows if x["msgs_per_s"] > 0]
    xs = [x["size"] for x in ok]
    ax_msg.plot(xs, [x["msgs_per_s"] for x in ok], "o" + ls, color=color, label=label)
    ax_gb.plot(xs, [x["gbit_per_s"] for x in ok], "o" + ls, color=color, label=label)
    for x in rows:
        if x.get("stalled_rounds", 0) > 0:
            for ax, key in ((ax_msg, "msgs_per_s"), (ax_gb, "gbit_per_s")):
                y = x[key] if x[key] > 0 else None
                ax.annotate(
                    f"{x['stalled_rounds']}/{len(x['rounds'])} stalled",
                    (x["size"], y if y else 0.03),
                    xycoords=("data", "data") if y else ("data", "axes fraction"),
                    textcoords="offset points", xytext=(0, 8),
                    fontsize=7, color=color, ha="center",
                )

sizes = sorted({l["size"] for l in r["latency"]} | {x["size"] for x in r["throughput"]})
for ax, title, ylabel in (
    (ax_lat, "latency (intra: publish→callback; TCP: one-way = RTT/2)", "µs"),
    (ax_msg, "throughput, two processes over TCP", "messages / s"),
    (ax_gb, "throughput, two processes over TCP", "payload Gbit/s"),
):
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(sizes)
    ax.set_xticklabels([size_label(s) for s in sizes])
    ax.set_xlabel("payload size")
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
m = r["machine_start"]
fig.suptitle(
    f"ferry vs Zenoh {r.get('zenoh_version', '')}, same run — {m['nproc']} CPUs, {m['date_utc']}, mode {r['mode']}",
    fontsize=11,
)
fig.tight_layout()
fig.savefig(dst, dpi=110)
print(f"wrote {dst}")
