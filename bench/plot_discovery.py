#!/usr/bin/env python3
"""Discovery cost before/after (issue 19): bars from `ferry-disco run --out`
JSON files.  Usage: plot_discovery.py BEFORE_A AFTER_A BEFORE_B AFTER_B OUT.png
(A: host 8x25 + fleet 50x20; B: fleet 20x10)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

ba, aa, bb, ab, out = sys.argv[1:6]
load = lambda p: json.load(open(p))  # noqa: E731
ba, aa, bb, ab = load(ba), load(aa), load(bb), load(ab)
fig, ax = plt.subplots(1, 4, figsize=(15, 3.8))
colors = ["#bbbbbb", "#2b7bba"]


def bars(a, title, values, unit, log=False, never=None):
    labels = ["before", "after"]
    a.bar(labels, values, color=colors)
    for i, v in enumerate(values):
        text = "never" if never and never[i] else f"{v:.3g} {unit}"
        a.text(i, v, text, ha="center", va="bottom", fontsize=9)
    a.set_title(title, fontsize=10)
    if log:
        a.set_yscale("log")


h = lambda d: d["host"]  # noqa: E731
f = lambda d: d["fleet"]  # noqa: E731
bars(ax[0], "200 participants on one host:\nCPU at rest (% of one core)",
     [h(ba)["cpu_pct_one_core"], h(aa)["cpu_pct_one_core"]], "%", log=True)
bars(ax[1], "200 on one host:\ndiscovery bytes/s sent at rest",
     [h(ba)["bytes_per_s"], h(aa)["bytes_per_s"]], "B/s", log=True)
bars(ax[2], "fleet 20 hosts x 10:\nkbit/s per host at rest",
     [f(bb)["kbit_per_s_per_host"], f(ab)["kbit_per_s_per_host"]], "kbit/s", log=True)
comp = [f(bb)["complete_ms"], f(ab)["complete_ms"]]
bars(ax[3], "fleet 20 hosts x 10:\ncomplete graph (s from first start)",
     [(c or 150000) / 1000 for c in comp], "s", never=[c is None for c in comp])
fig.tight_layout()
fig.savefig(out, dpi=110)
