"""Best effort with and without recovery shards on the lab
(bench/results/best-effort-{fec,nofec}.json -> best-effort.png)."""
import json

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

res = "bench/results/"
runs = {name: json.load(open(f"{res}best-effort-{name}.json")) for name in ("fec", "nofec")}
conds = [c["condition"] for c in runs["fec"]]
x = range(len(conds))
w = 0.38
fig, ax = plt.subplots(figsize=(6, 3.6))
for off, name, label in ((-w / 2, "nofec", "without FEC"), (w / 2, "fec", "with FEC (default)")):
    got = [c["result"]["received"] / c["count"] * 100 for c in runs[name]]
    ax.bar([i + off for i in x], got, w, label=label)
ax.set_xticks(list(x), [c.replace("loss", "") + " % loss" for c in conds])
ax.set_ylabel("samples delivered whole (%)")
ax.set_title("64 KB best effort at 30 Hz, Wi-Fi-like link, 1000 samples")
ax.legend()
fig.tight_layout()
fig.savefig(res + "best-effort.png", dpi=120)
print(res + "best-effort.png")
