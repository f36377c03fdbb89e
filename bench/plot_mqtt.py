#!/usr/bin/env python3
"""bench/results/mqtt.json -> mqtt.png: seed 000's RTT study, robot -> broker
-> cloud -> broker -> robot, medians with IQR bars per payload size for every
configuration of the run (ferry-mqtt-rtt, interleaved trial by trial): the
bare clients (rumqttc; libmosquitto with its network thread and in one
thread), ferry bridge-free and ferry bridged, plus ferry's ratio to each bare
client and the bridge's share of the bridged round trip."""
import json, pathlib, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "results" / "mqtt.json")
rows = json.loads(src.read_text())
sizes = [r["size"] for r in rows]
names = {"raw": ("rumqttc client", "^-"), "mosq": ("libmosquitto, network thread", "v-"),
         "mosq1": ("libmosquitto, one thread", "<-"), "rawp": ("rumqttc + ferry-like properties", ">:"),
         "half": ("ferry robot, rumqttc echo", "x:"), "ferry": ("ferry bridge-free", "o-"),
         "bridged": ("ferry + bridge process", "s--")}
present = [k for k in names if k in rows[0]]
fig, (ax, ax2) = plt.subplots(1, 2, figsize=(13, 5))
for key in present:
    lab, st = names[key]
    med = [r[key]["median"] for r in rows]
    lo = [r[key]["median"] - r[key]["q1"] for r in rows]
    hi = [r[key]["q3"] - r[key]["median"] for r in rows]
    ax.errorbar(sizes, med, yerr=[lo, hi], fmt=st, capsize=3, label=lab)
ax.set_xscale("log", base=2)
ax.set_yscale("log")
ax.set_xlabel("payload (bytes)"); ax.set_ylabel("round trip median, IQR bars (µs)")
ax.set_title(src.stem + ": RTT through one broker (Mosquitto)")
ax.grid(True, which="both", alpha=0.3); ax.legend(fontsize=8)
xs = [str(s) for s in sizes]
if "bridged" in present and "ferry" in present:
    share = [(r["bridged"]["median"] - r["ferry"]["median"]) / r["bridged"]["median"] * 100 for r in rows]
    ax2.bar(xs, share, color="tab:orange", alpha=0.6, label="bridge share of bridged RTT (%)")
ax2.set_xlabel("payload (bytes)"); ax2.set_ylabel("%")
ax2.tick_params(axis="x", rotation=60)
ax3 = ax2.twinx()
for key, st in [("raw", "k^-"), ("mosq", "bv-"), ("mosq1", "g<-")]:
    if key in present and "ferry" in present:
        ax3.plot(xs, [r["ferry"]["median"] / r[key]["median"] for r in rows], st,
                 label=f"ferry / {names[key][0]} (×)")
ax3.axhline(1.1, color="grey", ls=":", lw=1)
ax3.axhline(1.0, color="grey", ls="-", lw=0.5)
ax3.set_ylabel("ferry bridge-free / bare client")
ax2.set_title("what the bridge costs; ferry vs the bare clients")
h1, l1 = ax2.get_legend_handles_labels(); h2, l2 = ax3.get_legend_handles_labels()
ax2.legend(h1 + h2, l1 + l2, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2)
fig.tight_layout()
out = src.with_suffix(".png")
fig.savefig(out, dpi=110)
print(f"wrote {out}")
