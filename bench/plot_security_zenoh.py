#!/usr/bin/env python3
"""What TLS costs, ferry TCP beside Zenoh TCP (issue 22): latency p50 and
delivered throughput per size, plain and TLS, from `ferry-bench --security`
JSON.  Usage: plot_security_zenoh.py RESULT.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

SYSTEMS = [("ferry-tcp", "ferry TCP", "#9ecae1"), ("ferry-tls", "ferry TLS", "#2171b5"),
           ("zenoh-tcp", "Zenoh TCP", "#fdae6b"), ("zenoh-tls", "Zenoh TLS", "#d94801")]


def size_name(s):
    if s >= 1 << 20:
        return f"{s >> 20} MiB"
    if s >= 1024:
        return f"{s >> 10} KiB"
    return f"{s} B"


src, out = sys.argv[1:3]
data = json.load(open(src))
sizes = sorted({r["size"] for r in data["latency"]})
fig, ax = plt.subplots(1, 2, figsize=(14, 4.2))
width = 0.2
for k, (key, pick, title, unit) in enumerate([
    ("latency", lambda r: r["p50_ns"] / 1000, "one-way latency p50 (RTT/2)", "µs"),
    ("throughput", lambda r: r["gbit_per_s"] * 125, "reliable throughput delivered", "MB/s"),
]):
    a = ax[k]
    for j, (name, label, color) in enumerate(SYSTEMS):
        vals = []
        for s in sizes:
            row = next((r for r in data[key] if r["transport"] == name and r["size"] == s), None)
            vals.append(pick(row) if row else 0)
        xs = [i + (j - 1.5) * width for i in range(len(sizes))]
        a.bar(xs, vals, width, label=label, color=color)
    a.set_xticks(range(len(sizes)))
    a.set_xticklabels([size_name(s) for s in sizes])
    a.set_yscale("log")
    a.set_ylabel(unit)
    a.set_title(title, fontsize=10)
    a.legend(fontsize=8)
fig.suptitle(f"TLS on ferry's TCP and Zenoh's TCP, one run ({data['mode']}, "
             f"{data['machine_start']['date_utc']})", fontsize=11)
fig.tight_layout()
fig.savefig(out, dpi=110)
print(f"wrote {out}")
