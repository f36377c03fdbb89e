#!/usr/bin/env python3
"""bench/results/shm.json -> shm.png: round trip between two processes on one
host per payload size, ferry's shared-memory modes beside iceoryx2, ferry's
TCP path and the futex floor (written by ferry-shm-rtt in one run)."""
import json, pathlib, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

src = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent / "results" / "shm.json")
d = json.loads(src.read_text())
cells = d["cells"]
sizes = [c["size"] for c in cells]
labels = {"shm": "ferry shm event, copy", "busy": "ferry shm busy-poll, copy",
          "shm-loan": "ferry shm event, loan", "busy-loan": "ferry shm busy-poll, loan",
          "tcp": "ferry TCP", "sleep-loan": "ferry shm event, loan, no polling window",
          "iceoryx2": "iceoryx2 busy-poll, loan"}
styles = {"shm": "o--", "busy": "s--", "shm-loan": "o-", "busy-loan": "s-", "tcp": "x:", "sleep-loan": "d:",
          "iceoryx2": "^-"}
fig, axes = plt.subplots(1, 2, figsize=(13, 5), sharex=True)
for ax, q in zip(axes, ["p50", "p99"]):
    for m, lab in labels.items():
        ys = [c.get(f"{m}_{q}_us") for c in cells]
        if all(y is None or y != y for y in ys):
            continue
        ax.plot(sizes, [y if y is not None else float("nan") for y in ys], styles[m], label=lab)
    ax.axhline(d[f"futex_{q}_us"], color="grey", lw=1, ls="-.", label="futex ping-pong floor")
    ax.set_xscale("log", base=2); ax.set_yscale("log")
    ax.set_xticks(sizes, ["64 B", "4 KiB", "64 KiB", "1 MiB", "4 MiB"][:len(sizes)])
    ax.set_xlabel("payload"); ax.set_ylabel(f"round trip {q} (µs, log)"); ax.set_title(f"RTT {q}")
    ax.grid(True, which="both", alpha=0.3)
axes[0].legend(fontsize=8)
placement = {"free": "placed by the scheduler", "same": "both pinned to one CPU",
             "split": "pinned to two CPUs"}.get(d.get("placement", "free"), "")
fig.suptitle(f"Two processes on one host, {placement}: ping → echo → pong (2 vCPUs, one run)")
fig.tight_layout()
out = src.with_suffix(".png")
fig.savefig(out, dpi=110)
print("wrote", out)
