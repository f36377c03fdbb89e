"""Congestion model vs the older rule on the lab (bench/results/cc-*.json -> cc.png).

Left: the LTE-like link (50 Mbit/s, 15 + 0-20 ms one way) at 31, 63 and 126 % load.
Right: seed 001's Table II cells on the Wi-Fi-like link (300 Mbit/s, 2 +- 1 ms).
"""
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

res = "bench/results/"


def load(name):
    return {(c["condition"], c["size_kb"]): c["result"] for c in json.load(open(res + name))}


fig, axes = plt.subplots(1, 2, figsize=(11, 3.8))
for ax, link, title in (
    (axes[0], "lte", "LTE-like, 50 Mbit/s (no link hint)"),
    (axes[1], "wifi", "Wi-Fi-like, Table II cells"),
):
    model, legacy = load(f"cc-{link}-model.json"), load(f"cc-{link}-legacy.json")
    keys = sorted(model, key=lambda k: (k[0], k[1]))
    x = range(len(keys))
    w = 0.4
    for off, data, name in ((-w / 2, legacy, "older rule"), (w / 2, model, "congestion model")):
        ax.bar([i + off for i in x], [data[k]["lat_ms"] for k in keys], w, label=name)
    ax.set_xticks(list(x), [f"{c} {s} KB" for c, s in keys], fontsize=7, rotation=60, ha="right")
    ax.set_ylabel("mean latency (ms)")
    ax.set_yscale("log")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(res + "cc.png", dpi=120)
print(res + "cc.png")
