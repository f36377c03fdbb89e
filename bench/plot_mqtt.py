#!/usr/bin/env python3
"""bench/results/mqtt.json -> mqtt.png: seed 000's RTT study, robot -> broker
-> cloud -> broker -> robot, medians with IQR bars per payload size for the
raw MQTT client, ferry bridge-free and ferry bridged (ferry-mqtt-rtt, one
interleaved run), plus the bridge's share of the bridged round trip."""
import json, pathlib, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "results" / "mqtt.json")
rows = json.loads(src.read_text())
sizes = [r["size"] for r in rows]
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5))
for key, lab, st in [("raw", "raw MQTT client (floor)", "^-"), ("ferry", "ferry bridge-free", "o-"),
                     ("bridged", "ferry + bridge process", "s--")]:
    med = [r[key]["median"] for r in rows]
    lo = [r[key]["median"] - r[key]["q1"] for r in rows]
    hi = [r[key]["q3"] - r[key]["median"] for r in rows]
    ax.errorbar(sizes, med, yerr=[lo, hi], fmt=st, capsize=3, label=lab)
ax.set_xscale("log", base=2)
ax.set_xlabel("payload (bytes)"); ax.set_ylabel("round trip median, IQR bars (µs)")
ax.set_title("RTT through one broker (Mosquitto, loopback)")
ax.grid(True, which="both", alpha=0.3); ax.legend(fontsize=8)
share = [(r["bridged"]["median"] - r["ferry"]["median"]) / r["bridged"]["median"] * 100 for r in rows]
ratio = [r["ferry"]["median"] / r["raw"]["median"] for r in rows]
ax2.bar([str(s) for s in sizes], share, color="tab:orange", label="bridge share of bridged RTT (%)")
ax2.set_xlabel("payload (bytes)"); ax2.set_ylabel("%")
ax2.tick_params(axis="x", rotation=60)
ax3 = ax2.twinx()
ax3.plot([str(s) for s in sizes], ratio, "ko-", label="ferry / raw (×)")
ax3.axhline(1.1, color="grey", ls=":", lw=1)
ax3.set_ylabel("ferry bridge-free / raw client")
ax2.set_title("what the bridge costs; ferry vs the floor")
h1, l1 = ax2.get_legend_handles_labels(); h2, l2 = ax3.get_legend_handles_labels()
ax2.legend(h1 + h2, l1 + l2, fontsize=8)
fig.tight_layout()
out = src.with_suffix(".png")
fig.savefig(out, dpi=110)
print(f"wrote {out}")
