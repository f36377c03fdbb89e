"""Summary, Markdown table and plot of pyrtt results (bench/python/pyrtt.py).

`python3 bench/python/pyrtt.py report PREFIX` re-renders PREFIX.md/.png from PREFIX.json.
"""
import contextlib

RUST = "ferry-rust-pong"       # ferry Python ping -> Rust pong (pyrtt.py --rust-pong)
DESCR = {"tcp": "plain Python sockets (reference)", "cyclonedds": "loopback UDP",
         "zenoh": "loopback TCP (Zenoh's shared memory off)",
         "zenoh-shm": "Zenoh's default: shared memory for large payloads, else TCP",
         "rust": "Rust ping ↔ Rust pong (ferry's choice: shm)"}


def summarize(rtt_ns):
    """p50/p99/IQR etc. of RTT and one-way (RTT/2), in µs."""
    import numpy as np
    a = np.asarray(rtt_ns, dtype=np.float64) / 1e3
    p = {q: float(np.percentile(a, q)) for q in (25, 50, 75, 90, 99)}
    rtt = {"p50": p[50], "p90": p[90], "p99": p[99], "iqr": p[75] - p[25],
           "min": float(a.min()), "max": float(a.max()), "mean": float(a.mean())}
    return {"n": int(a.size), "rtt_us": rtt, "oneway_us": {k: v / 2 for k, v in rtt.items()}}


def write_md(path, doc):
    """Table: size, impl, one-way p50/p99, RTT p50/p99, ratio ferry/peer, target met."""
    m = doc["meta"]
    lines = [f"# Python publish → Python callback latency (pyrtt{' --quick' if m['quick'] else ''})", "",
             f"{m['date']} on {m['host']} ({m['cpus']} CPUs), load {m['load_start']} → {m['load_end']}; "
             f"ferry commit `{m['commit']}`; Python {m['python']}; "
             + ", ".join(f"{k} {v}" for k, v in m["versions"].items()) + ".", "",
             f"{m['trials']} round trips per cell after ≥ {m['warmup']} and ≥ {m['warmup_secs']} s warm-up, "
             f"blocks of {m['block']} "
             "rotating across implementations, all pongs alive at once. One-way = RTT/2. "
             "Target: ferry-Python p50 ≤ every peer's Python p50.", "",
             "| size | impl | path | one-way p50 µs | one-way p99 µs | RTT p50 µs | RTT p99 µs | RTT IQR µs | n | lost |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for size, cells in doc["results"].items():
        for impl, c in cells.items():
            s = c.get("summary")
            if not s:
                lines.append(f"| {size} | {impl} | {c.get('skipped', '')} |" + " – |" * 7)
                continue
            o, r = s["oneway_us"], s["rtt_us"]
            path_ = "/".join(c.get("transport") or []) or DESCR.get(impl, "")
            lines.append(f"| {size} | {impl} | {path_} | {o['p50']:.1f} | {o['p99']:.1f} | {r['p50']:.1f} "
                         f"| {r['p99']:.1f} | {r['iqr']:.1f} | {s['n']} | {c['lost']} |")
    lines += ["", "Ratios of one-way p50 (≤ 1.00: ferry-Python as fast or faster):", "",
              "| size | ferry/cyclonedds | ferry/zenoh | ferry/zenoh-shm | target met | ferry-tcp/zenoh (both TCP) "
              "| ferry-Python/ferry-Rust (what Python adds) |",
              "|---:|---:|---:|---:|---|---:|---:|"]
    for size, cells in doc["results"].items():
        p50 = {k: c["summary"]["oneway_us"]["p50"] for k, c in cells.items() if c.get("summary")}

        def ratio(a, b):
            return f"{p50[a] / p50[b]:.2f}" if a in p50 and b in p50 else "–"
        peers = [k for k in ("cyclonedds", "zenoh", "zenoh-shm") if k in p50]
        met = ("yes" if all(p50["ferry"] <= p50[k] for k in peers) else "**no**") \
            if "ferry" in p50 and peers else "n/a"
        lines.append(f"| {size} | {ratio('ferry', 'cyclonedds')} | {ratio('ferry', 'zenoh')} "
                     f"| {ratio('ferry', 'zenoh-shm')} | {met} "
                     f"| {ratio('ferry-tcp', 'zenoh')} | {ratio('ferry', 'rust')} |")
    lines += ["", "Setup: " + m["setup"], ""]
    with open(path, "w") as fh:
        fh.write("\n".join(lines))


def write_png(path, doc):
    """Bars of one-way p50 with whiskers up to p99, one panel per size
    (skipped with a note when matplotlib is not installed)."""
    try:
        import matplotlib
    except ImportError:
        print(f"pyrtt: no matplotlib, {path} not drawn (bash scripts/bench-python-setup.sh)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    sizes = list(doc["results"])
    fig, axes = plt.subplots(1, len(sizes), figsize=(4.5 * len(sizes), 4), squeeze=False)
    for ax, size in zip(axes[0], sizes):
        cells = [(k, c["summary"]) for k, c in doc["results"][size].items() if c.get("summary")]
        names = [k for k, _ in cells]
        p50 = [s["oneway_us"]["p50"] for _, s in cells]
        p99 = [s["oneway_us"]["p99"] for _, s in cells]
        colors = ["tab:red" if n.startswith("ferry") else "tab:orange" if n == "rust"
                  else "tab:blue" if n == "tcp" else "tab:gray" for n in names]
        ax.bar(names, p50, color=colors, yerr=[[0] * len(p50), [b - a for a, b in zip(p50, p99)]], capsize=6)
        ax.tick_params(axis="x", rotation=35)
        for i, v in enumerate(p50):
            ax.annotate(f"{v:.0f}", (i, v), ha="right", va="bottom", fontsize=8,
                        xytext=(-3, 2), textcoords="offset points")
        ax.set_title(f"{int(size):,} B")
        ax.set_ylabel("one-way latency µs (bar p50, whisker p99)")
        ax.tick_params(axis="x", labelsize=8)
    fig.suptitle("Python publish → Python callback (RTT/2)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def versions():
    """Installed versions of the libraries under test (no import needed)."""
    from importlib import metadata
    out = {}
    for pkg in ("cyclonedds", "eclipse-zenoh", "ferry", "numpy"):
        with contextlib.suppress(metadata.PackageNotFoundError):
            out[pkg] = metadata.version(pkg)
    return out
