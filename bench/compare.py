#!/usr/bin/env python3
"""compare.py: before/after table of ferry's must-not-regress benches.

Reads result files that two builds wrote in one session, alternating
(before, after, before, after ...), from one directory:

    shm-split-{before,after}-N.json   ferry-shm-rtt run --placement split --iceoryx2 ...
    shm-free-{before,after}-N.json    ferry-shm-rtt run --iceoryx2 ...   (free placement)
    zenoh-{before,after}-N.json       bench/ferry-bench --quick --rounds 2
    mqtt-{before,after}.md            ferry-mqtt-rtt run --quick
    wireless-{before,after}.md        ferry-wireless run --quick   (root: the lab)
    tp-{old,before,after}-N.json      bench/ferry-bench --sizes 64 --secs 1 --rounds 3
    py*-{before,after}*.json          bench/python/pyrtt.py run [--quick|--trials 1000] --impl ferry

and writes OUT.md and OUT.png (ratios per measurement, median over the
alternating runs; every ratio is of two things measured side by side in
the same run, so machine load cancels).

    python3 bench/compare.py DIR OUT
"""
import glob
import json
import os
import re
import statistics
import sys


def med(xs):
    return statistics.median(xs) if xs else float("nan")


def shm(d, prefix):
    rows = {}
    for side in ("before", "after"):
        for f in sorted(glob.glob(f"{d}/{prefix}-{side}-*.json")):
            j = json.load(open(f))
            for c in j["cells"]:
                r = rows.setdefault(c["size"], {})
                r.setdefault((side, "busy"), []).append(c["busy-loan_p50_us"] / c["iceoryx2_p50_us"])
                r.setdefault((side, "event"), []).append(c["shm-loan_p50_us"] / j["futex_p50_us"])
                r.setdefault((side, "busy_us"), []).append(c["busy-loan_p50_us"])
    return rows


def zenoh(d):
    lat, thr = {}, {}
    for side in ("before", "after"):
        for f in sorted(glob.glob(f"{d}/zenoh-{side}-*.json")):
            j = json.load(open(f))
            L = {(x["transport"], x["size"]): x["p50_ns"] for x in j["latency"]}
            T = {(x["transport"], x["size"]): x["msgs_per_s"] for x in j["throughput"]}
            for (t, s), v in L.items():
                if t == "ferry-tcp" and ("zenoh-tcp", s) in L:
                    lat.setdefault(s, {}).setdefault(side, []).append(v / L[("zenoh-tcp", s)])
            for (t, s), v in T.items():
                if t == "ferry-tcp" and ("zenoh-tcp", s) in T:
                    thr.setdefault(s, {}).setdefault(side, []).append(v / T[("zenoh-tcp", s)])
    return lat, thr


def md_rows(path, first_col):
    """Rows of the first Markdown table whose header starts with first_col."""
    if not os.path.exists(path):
        return [], []
    lines = open(path).read().splitlines()
    for i, l in enumerate(lines):
        if l.startswith(f"| {first_col} |"):
            head = [c.strip() for c in l.strip("|").split("|")]
            rows = []
            for r in lines[i + 2:]:
                if not r.startswith("|"):
                    break
                rows.append([c.strip() for c in r.strip("|").split("|")])
            return head, rows
    return [], []


def python_p50(d, pattern):
    """One-way p50 (µs) per (implementation, size) and side, every run."""
    out = {}
    for side in ("before", "after"):
        for f in sorted(glob.glob(f"{d}/{pattern.format(side=side)}")):
            for size, impls in json.load(open(f)).get("results", {}).items():
                for impl, cell in impls.items():
                    p50 = cell.get("summary", {}).get("oneway_us", {}).get("p50")
                    if p50 is not None:
                        out.setdefault((impl, int(size)), {}).setdefault(side, []).append(p50)
    return out


def main():
    d, out = sys.argv[1], sys.argv[2]
    md = ["# Before/after: the must-not-regress benches", ""]
    md.append(f"Produced by `python3 bench/compare.py {d} {out}` from runs of two builds made")
    md.append("alternately in one session (see the commands in the table headers). Ratios are of")
    md.append("two things measured side by side in the same run; the value given is the median over")
    md.append("the alternating runs. Lower is better for latency ratios, higher for throughput ratios.")
    md.append("")
    plots = []
    for prefix, title in (("shm-split", "shared memory, both sides pinned across two CPUs"),
                          ("shm-free", "shared memory, placement left to the scheduler")):
        rows = shm(d, prefix)
        if not rows:
            continue
        n = len(glob.glob(f"{d}/{prefix}-before-*.json"))
        md.append(f"## {title} ({n}+{n} runs, `ferry-shm-rtt run{' --placement split' if prefix == 'shm-split' else ''} --count 2000 --rounds 1 --iceoryx2 …`)")
        md.append("")
        if prefix == "shm-split":
            md.append("(Pinned across CPUs the futex floor is a cross-CPU wake-up of a halted vCPU, ~40 µs,")
            md.append("while the event-driven reader's polling window catches every reply: that ratio says")
            md.append("little here; the free-placement table is the one for it.)")
            md.append("")
        md.append("| size | busy-poll loan RTT / iceoryx2: before | after | event-driven loan RTT / futex floor: before | after |")
        md.append("|---:|---:|---:|---:|---:|")
        for s in sorted(rows):
            r = rows[s]
            md.append(f"| {s} | {med(r[('before','busy')]):.2f} | {med(r[('after','busy')]):.2f} | "
                      f"{med(r[('before','event')]):.2f} | {med(r[('after','event')]):.2f} |")
            plots.append((f"{prefix} busy/iox2 {s}", med(r[("before", "busy")]), med(r[("after", "busy")])))
        md.append("")
    lat, thr = zenoh(d)
    if lat:
        n = len(glob.glob(f"{d}/zenoh-before-*.json"))
        md.append(f"## TCP beside Zenoh over TCP ({n}+{n} runs of `bench/ferry-bench --quick --rounds 2`)")
        md.append("")
        md.append("| size | one-way p50 ferry/Zenoh: before | after | throughput ferry/Zenoh: before | after |")
        md.append("|---:|---:|---:|---:|---:|")
        for s in sorted(set(lat) | set(thr)):
            g = lambda m, side: med(m.get(s, {}).get(side, []))
            md.append(f"| {s} | {g(lat,'before'):.2f} | {g(lat,'after'):.2f} | {g(thr,'before'):.2f} | {g(thr,'after'):.2f} |")
            plots.append((f"tcp thr {s}", g(thr, "before"), g(thr, "after")))
        md.append("")
    tp = {}
    for side in ("old", "before", "after"):
        for f in sorted(glob.glob(f"{d}/tp-{side}-*.json")):
            T = {(x["transport"], x["size"]): x["msgs_per_s"] for x in json.load(open(f))["throughput"]}
            tp.setdefault(side, []).append((T[("ferry-tcp", 64)], T[("zenoh-tcp", 64)]))
    if tp:
        md.append("## 64 B TCP throughput, longer runs (`bench/ferry-bench --sizes 64 --secs 1 --rounds 3`, builds alternating)")
        md.append("")
        if "old" in tp:
            md.append("`old` is 0f090c7, the commit whose 64 B figure the issue quotes (1.00×), built the same way.")
            md.append("")
        md.append("| build | runs | ferry M msg/s (median) | Zenoh M msg/s (median) | ferry/Zenoh median | every run's ferry/Zenoh |")
        md.append("|---|---:|---:|---:|---:|---|")
        for side in ("old", "before", "after"):
            v = tp.get(side, [])
            if v:
                ratios = [f / z for f, z in v]
                md.append(f"| {side} | {len(v)} | {med([f for f, _ in v]) / 1e6:.2f} | {med([z for _, z in v]) / 1e6:.2f} | "
                          f"{med(ratios):.2f} | {', '.join(f'{r:.2f}' for r in ratios)} |")
        md.append("")
    head_b, rows_b = md_rows(f"{d}/mqtt-before.md", "size")
    head_a, rows_a = md_rows(f"{d}/mqtt-after.md", "size")
    if rows_b and rows_a:
        col = head_b.index("ferry / mosq1")
        colr = head_b.index("ferry / bridged")
        md.append("## MQTT round trip (`ferry-mqtt-rtt run --quick`: 30 trials per cell, Mosquitto)")
        md.append("")
        md.append("| size | ferry / libmosquitto one thread: before | after | ferry / bridged: before | after |")
        md.append("|---:|---:|---:|---:|---:|")
        for b, a in zip(rows_b, rows_a):
            md.append(f"| {b[0]} | {b[col]} | {a[col]} | {b[colr]} | {a[colr]} |")
        md.append("")
    head_b, rows_b = md_rows(f"{d}/wireless-before.md", "condition")
    head_a, rows_a = md_rows(f"{d}/wireless-after.md", "condition")
    if rows_b and rows_a:
        md.append("## Seed 001 Table II, quick (`ferry-wireless run --quick`: the lab, 300 Mbit/s 2 ± 1 ms, 60 samples at 30 Hz)")
        md.append("")
        md.append("| condition | payload | received: before | after | mean latency ms: before | after |")
        md.append("|---|---:|---:|---:|---:|---:|")
        for b, a in zip(rows_b, rows_a):
            md.append(f"| {b[0]} | {b[1]} | {b[2]} | {a[2]} | {b[4]} | {a[4]} |")
        md.append("")
    py = python_p50(d, "py*-{side}*.json")
    if py:
        impls = sorted({impl for impl, _ in py})
        md.append("## Python publish → Python callback (`bench/python/pyrtt.py run --impl "
                  + ",".join(i for i in impls if i != "ferry-rust-pong")
                  + "`, two processes; `ferry` takes shared memory, `ferry-tcp` is pinned to TCP)")
        md.append("")
        md.append("One-way p50 in µs (runs of 200 and 1,000 round trips; the 64 B cells swing between ~5 and")
        md.append("~15 µs with the scheduler's placement on both builds, so every run is listed):")
        md.append("")
        md.append("| implementation | size | median before | median after | every run before | every run after |")
        md.append("|---|---:|---:|---:|---|---|")
        for (impl, size), v in sorted(py.items()):
            fmt = lambda xs: ", ".join(f"{x:.1f}" for x in xs)
            b, a = v.get("before", []), v.get("after", [])
            md.append(f"| {impl} | {size} | {med(b):.1f} | {med(a):.1f} | {fmt(b)} | {fmt(a)} |")
        md.append("")
    with open(out + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare: no matplotlib, no PNG")
        return
    if plots:
        fig, ax = plt.subplots(figsize=(10, 0.32 * len(plots) + 1.2))
        ys = range(len(plots))
        ax.barh([y + 0.2 for y in ys], [p[1] for p in plots], height=0.4, label="before")
        ax.barh([y - 0.2 for y in ys], [p[2] for p in plots], height=0.4, label="after")
        ax.set_yticks(list(ys))
        ax.set_yticklabels([p[0] for p in plots], fontsize=8)
        ax.axvline(1.0, color="grey", lw=0.8)
        ax.set_xlabel("ratio (busy/iceoryx2: lower is better; TCP throughput ferry/Zenoh: higher is better)")
        ax.legend()
        fig.tight_layout()
        fig.savefig(out + ".png", dpi=110)
    print(f"compare: wrote {out}.md and .png")


if __name__ == "__main__":
    main()
