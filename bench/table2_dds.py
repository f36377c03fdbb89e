#!/usr/bin/env python3
"""Seed 001's Table II cells with ferry's DDS path (issue 23), side by side
in one run on the lab's Wi-Fi link (300 Mbit/s, 2 +- 1 ms one way):

  ferry UDP         ferry's own path, defaults (`ferry-wireless run`)
  ferry DDS         a ferry node with `[ros2]` sends over its DDS path
                    (crates/ferry/examples/ros2_rate.rs), Cyclone DDS reads
                    on the other host with ROS 2's names (`rt/table2`)
  ferry DDS + tune  the same with `ferry tune --rate 30 --payload <size>
                    --link 300Mbit`'s Cyclone XML in CYCLONEDDS_URI on both
                    ends and the publisher's history keep last N_HC
  Cyclone           Cyclone DDS's writer and reader, default configuration
  Cyclone + tune    the same with `ferry tune`'s profile

Every sender is reliable; keep all without the profile. The Cyclone reader
is the same program in every DDS row (bench/cyclone_table2.py sub).

Usage (root): python3 bench/table2_dds.py [--quick] [--count N]
              [--sizes 64,512] [--conditions ideal,loss20] [--out PATH]
  --quick: 60 messages, ideal 64 KB and 20 % loss 512 KB (Table II's quick
           cells); exits non-zero when a row measured nothing.
Writes PATH.md / PATH.json / PATH.png (default bench/results/table2_dds;
--quick with the default PATH writes nothing).
"""

import argparse
import datetime
import json
import os
import shlex
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import cyclone_table2 as ct  # noqa: E402
from cyclone_table2 import fmt  # noqa: E402

SYSTEMS = [
    ("ferry UDP", None, None),
    ("ferry DDS", "ferry-dds", "default"),
    ("ferry DDS + tune", "ferry-dds", "tune"),
    ("Cyclone", "cyclone", "default"),
    ("Cyclone + tune", "cyclone", "tune"),
]


def build():
    """The binaries the rows run (release): the lab, ferry-wireless, the
    `ferry` CLI (for `ferry tune`) and the ros2_rate example."""
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "ferry-lab", "-p", "ferry-cli"],
                   cwd=ct.ROOT, check=True)
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "ferry", "--features", "ros2",
                    "--example", "ros2_rate"], cwd=ct.ROOT, check=True)


def ferry_udp(cond, kb, count):
    """One `ferry-wireless run` cell: its subscriber's JSON result."""
    with tempfile.TemporaryDirectory(prefix="table2-udp-") as d:
        out = os.path.join(d, "w")
        p = subprocess.run([ct.WIRELESS, "run", "--sizes", str(kb), "--conditions", cond,
                            "--count", str(count), "--out", out],
                           capture_output=True, text=True)
        try:
            with open(out + ".json") as f:
                return json.load(f)[0]["result"]
        except (OSError, ValueError, IndexError, KeyError):
            print(p.stderr[-2000:], file=sys.stderr)
            return None


def wire_ratio(cell):
    """Bytes the link carried A->B per payload byte received."""
    link, sub = cell.get("link") or {}, cell.get("sub") or {}
    sent = (link.get("a_to_b") or {}).get("sent_bytes")
    got = sub.get("received")
    if not sent or not got:
        return None
    return sent / (got * cell["size_kb"] * 1000)


def table(rows, count):
    out = ["| condition | payload | system | received | rate (Hz) | mean latency (ms) "
           "| p50 / p99 (ms) | jitter (ms) | link bytes A→B / payload | latency / ferry UDP |",
           "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    base = {}
    for r in rows:
        s = r["sub"] or {}
        key = (r["condition"], r["size_kb"])
        if r["system"] == "ferry UDP":
            base[key] = s.get("lat_ms")
        ratio = None
        if base.get(key) and s.get("lat_ms") is not None:
            ratio = s["lat_ms"] / base[key]
        recv = f"{s['received']}/{count}" if r["sub"] else f"no result/{count}"
        out.append(
            f"| {r['condition']} | {r['size_kb']} KB | {r['system']} | {recv} "
            f"| {fmt(s.get('hz'), 2)} | {fmt(s.get('lat_ms'))} "
            f"| {fmt(s.get('p50_ms'))} / {fmt(s.get('p99_ms'))} | {fmt(s.get('jitter_ms'))} "
            f"| {fmt(r.get('wire'), 2)} | {fmt(ratio, 2)} |")
    return "\n".join(out) + "\n"


def plot(rows, path):
    """Rate and mean latency per cell, one bar per system (no plot without
    matplotlib: setup.sh does not install it, CI's smoke run needs none)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("table2_dds: no matplotlib, no plot", file=sys.stderr)
        return
    cells = list(dict.fromkeys((r["condition"], r["size_kb"]) for r in rows))
    names = [n for n, _, _ in SYSTEMS]
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.5))
    w = 0.8 / len(names)
    for i, name in enumerate(names):
        got = {(r["condition"], r["size_kb"]): r["sub"] or {} for r in rows if r["system"] == name}
        xs = [j + i * w for j in range(len(cells))]
        axes[0].bar(xs, [got.get(c, {}).get("hz") or 0 for c in cells], w, label=name)
        axes[1].bar(xs, [got.get(c, {}).get("lat_ms") or 0 for c in cells], w, label=name)
    for ax, title in zip(axes, ["delivered rate (Hz), 30 Hz sent", "mean latency (ms, log)"]):
        ax.set_xticks([j + 0.4 - w / 2 for j in range(len(cells))])
        ax.set_xticklabels([f"{c}\n{kb} KB" for c, kb in cells])
        ax.set_title(title)
    axes[1].set_yscale("log")
    axes[0].legend(fontsize=8)
    fig.suptitle("Seed 001 Table II cells: ferry's UDP path, ferry's DDS path, Cyclone DDS "
                 "(default and `ferry tune` profile), lab Wi-Fi link")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--count", type=int)
    ap.add_argument("--outage-count", type=int)
    ap.add_argument("--sizes", type=lambda x: [int(v) for v in x.split(",")])
    ap.add_argument("--conditions", type=lambda x: x.split(","))
    ap.add_argument("--out", default=os.path.join(ct.ROOT, "bench/results/table2_dds"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("table2_dds: the lab needs root")
    build()
    grid, count, ocount = ct.the_grid(args)
    started = datetime.datetime.now(datetime.timezone.utc)
    rows = []
    for cond, kb in grid:
        n = ocount if cond == "outage" else count
        for name, system, profile in SYSTEMS:
            if system is None:
                row = {"condition": cond, "size_kb": kb, "count": n,
                       "sub": ferry_udp(cond, kb, n), "pub": None, "depth": 0}
            else:
                row = ct.run_cell(cond, kb, n, system, profile)
                row["wire"] = wire_ratio(row)
            row["system"] = name
            s = row["sub"] or {}
            print(f"{cond:>7} {kb:>4} KB {name:<17} recv {s.get('received')}/{n} "
                  f"hz {s.get('hz')} lat {s.get('lat_ms')} p99 {s.get('p99_ms')} "
                  f"wire {fmt(row.get('wire'), 2)}", file=sys.stderr, flush=True)
            rows.append(row)
    md = table(rows, count)
    print(md)
    cmdline = "python3 " + " ".join(shlex.quote(a) for a in ["bench/table2_dds.py"] + sys.argv[1:])
    import importlib.metadata as meta
    info = {"command": cmdline, "date_utc": started.isoformat(timespec="seconds"),
            "cyclonedds_python": meta.version("cyclonedds"), "count": count,
            "load_after": open("/proc/loadavg").read().split()[:3]}
    if not args.quick or args.out != ap.get_default("out"):
        with open(args.out + ".json", "w") as f:
            json.dump({"meta": info, "rows": rows}, f, indent=1)
        with open(args.out + ".md", "w") as f:
            f.write(HEADER.format(**info, png=os.path.basename(args.out) + ".png") + md)
        plot(rows, args.out + ".png")
    ct.cleanup()
    missing = [r["system"] for r in rows if not (r["sub"] or {}).get("received")]
    if missing:
        sys.exit(f"table2_dds: no sample arrived in rows {missing}")


HEADER = """# Seed 001 Table II cells with ferry's DDS path

- command (root): `cd /work/main && {command}`
- date (UTC): {date_utc}; load after the run: {load_after}
- cyclonedds (PyPI, bundles the C library the DDS rows use on both ends): {cyclonedds_python}
- link: ferry-lab's wifi preset (300 Mbit/s, 2 ± 1 ms one way, 50 ms queue), loss in both
  directions; two namespaces as two hosts. {count} messages per cell at 30 Hz; 1 KB = 1000 B.
- rows: **ferry UDP** = ferry's own path with its defaults (`ferry-wireless run`);
  **ferry DDS** = a ferry node with `[ros2]` publishing `/table2` (`ferry_bench/msg/Blob`) over its
  DDS path (`crates/ferry/examples/ros2_rate.rs`), read by Cyclone DDS on the other host as a ROS 2
  node would see it (`rt/table2`, `ferry_bench::msg::dds_::Blob_`); **Cyclone** = Cyclone's own writer
  and reader (`bench/cyclone_table2.py`). Without **+ tune**: Cyclone's default configuration, reliable,
  keep all. **+ tune**: `ferry tune --rate 30 --payload <size>KB --link 300Mbit`'s Cyclone XML
  (1472 B messages, heartbeat at 2r, writer cache of one second of 60 % of the link) in
  `CYCLONEDDS_URI` on both ends, and the writer's history keep last N_HC.
- latency = receive time − send time in the payload (the namespaces share one clock);
  link bytes A→B / payload = what the emulated link was offered from the sender's side, per payload
  byte received (ferry UDP: not recorded by ferry-wireless); latency / ferry UDP = mean latency over
  ferry UDP's in the same cell.

![plot]({png})

"""

if __name__ == "__main__":
    main()
