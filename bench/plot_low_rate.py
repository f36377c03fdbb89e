"""Low-rate latency before/after (bench/results/low-rate-{before,after}.json -> low-rate.png)."""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

res = "bench/results/"
before = json.load(open(sys.argv[1] if len(sys.argv) > 1 else res + "low-rate-before.json"))
after = json.load(open(sys.argv[2] if len(sys.argv) > 2 else res + "low-rate-after.json"))
out = sys.argv[3] if len(sys.argv) > 3 else res + "low-rate.png"

labels = [f"{c['hz']} Hz" for c in after]
x = range(len(labels))
w = 0.38
fig, ax = plt.subplots(figsize=(6, 3.6))
for off, data, name in ((-w / 2, before, "before"), (w / 2, after, "after")):
    lat = [c["result"]["lat_ms"] for c in data]
    jit = [c["result"]["jitter_ms"] for c in data]
    ax.bar([i + off for i in x], lat, w, yerr=jit, capsize=3, label=name)
ax.set_xticks(list(x), labels)
ax.set_ylabel("mean latency (ms), ± jitter")
ax.set_title("32 KB reliable samples on the LTE-like link")
ax.legend()
fig.tight_layout()
fig.savefig(out, dpi=120)
print(out)
