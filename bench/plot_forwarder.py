#!/usr/bin/env python3
"""bench/results/forwarder.json -> forwarder.png: seed 004 Tables II-III on
the lab (ferry-fwd). Left: mean latency per size, the forwarded path (mean
of its subscribers) beside per-subscriber unicast; right: the mean
|arrival difference| of two subscribers of each topic. The paper's figures
in grey. Other runs given as arguments (e.g. forwarder-4subs.json) are drawn
beside the first one; the figure is named after the first."""
import json, pathlib, sys
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

R = pathlib.Path(__file__).parent / "results"
srcs = [pathlib.Path(a) for a in sys.argv[1:]] or [R / "forwarder.json"]
srcs += [p for p in [R / "forwarder-4subs.json"] if len(sys.argv) < 2 and p.exists()]
runs = [(p, json.loads(p.read_text())) for p in srcs]
fig, axes = plt.subplots(1, 2, figsize=(13, 5))
markers = ["o", "s", "^", "d"]
for k, (p, d) in enumerate(runs):
    rows = d["rows"]
    kib = [r["size"] / 1024 for r in rows]
    tag = f'{d["subs"]}+{d["subs"]} subs' + (", apart" if "--apart" in d["command"] else "") + (", auto" if "--auto" in d["command"] else "") + (", UDP host stream" if "--udp-stream" in d["command"] else "") + (f", vs {d['unicast']}" if d["unicast"] != "udp" else "")
    m = markers[k % len(markers)]
    axes[0].plot(kib, [r["fwd"]["mean_us"] for r in rows], "-" + m, color=f"C{2*k}",
                 label=f"ferry fwd ({tag})")
    axes[0].plot(kib, [r["unicast"]["mean_us"] for r in rows], "--" + m, color=f"C{2*k+1}",
                 label=f'ferry {d["unicast"]} per subscriber ({tag})')
    axes[1].plot(kib, [r["fwd"]["spread_us"] for r in rows], "-" + m, color=f"C{2*k}",
                 label=f"ferry fwd Sub1–Sub2 ({tag})")
    axes[1].plot(kib, [r["unicast"]["spread_us"] for r in rows], "--" + m, color=f"C{2*k+1}",
                 label=f'ferry {d["unicast"]} Sub{d["subs"]+1}–Sub{d["subs"]+2} ({tag})')
paper = runs[0][1]["paper"]
pk = paper["sizes_kib"]
t2, t3 = paper["table2"], paper["table3"]
axes[0].plot(pk, [(a + b) / 2 for a, b in zip(t2[0], t2[1])], "-x", color="grey", label="paper bridge (Sub1, Sub2)")
axes[0].plot(pk, [(a + b) / 2 for a, b in zip(t2[2], t2[3])], ":x", color="grey", label="paper unicast (Sub3, Sub4)")
axes[1].plot(pk, t3[0], "-x", color="grey", label="paper bridge")
axes[1].plot(pk, t3[1], ":x", color="grey", label="paper unicast")
axes[1].axhline(50, color="black", lw=0.8, ls="-.", label="target: 50 µs")
for ax, title, ylab in [(axes[0], "Table II: mean latency", "latency (µs, log)"),
                        (axes[1], "Table III: mean |arrival difference|", "difference (µs, log)")]:
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xticks(pk, ["1 KB", "10 KB", "100 KB", "1 MB", "2 MB", "6 MB"])
    ax.set_xlabel("payload")
    ax.set_ylabel(ylab)
    ax.set_title(title)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
d0 = runs[0][1]
link = "veth + tbf 1 Gbit/s" if d0["link"] == "eth" else "emulated Wi-Fi 300 Mbit/s"
fig.suptitle(f"ferry forwarded path vs per-subscriber unicast, host A → host B ({link}, "
             f'{d0["trials"]} trials per size, 2 vCPUs)')
fig.tight_layout()
out = srcs[0].with_suffix(".png")
fig.savefig(out, dpi=110)
print("wrote", out)
