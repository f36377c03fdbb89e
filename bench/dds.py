#!/usr/bin/env python3
"""Issue 23's latency comparison: ferry's DDS path (ferry-dds: Cyclone DDS
carrying ferry's CDR as it is) beside Cyclone DDS's own ping/pong
(`ddsperf`, the same Debian libddsc 0.10.2), side by side in one run.

Two network namespaces joined by a veth pair (10.80.1.1 / .2): "one host"
runs both ends in the first, "two hosts" one in each. Per size and
topology the two systems alternate, `rounds` times; each run pings for
`secs` seconds after a 1 s warm-up and prints per-second percentiles of
the one-way latency (RTT/2): ddsperf's own lines, and the same line from
`dds_pingpong` (crates/ferry-dds/examples). The figure per run is the
median of its per-second p50 (p99); per cell the median over rounds.

  ddsperf   `ddsperf ping size S` / `pong`: topic KS (seq, key, octets),
            reliable, keep last 1, the next ping from the listener
  ferry     `dds_pingpong ping DOMAIN S` / `pong`: a sequence<octet> of S
            bytes as raw CDR through ferry-dds, reliable, keep last 1, the
            next ping from the listener
  node      `ros2_ping DOMAIN S` (crates/ferry/examples): a ferry node's
            publisher and inline subscriber with `[ros2]` — the application
            API over the DDS path — against `dds_pingpong pong`

Throughput, the same three side by side (`--what throughput`; results in
`dds_throughput.*`): a writer publishing flat out (reliable, keep all, as
fast as the writer takes samples) and a reader counting what arrives per
second; the figure per run is the median of its per-second rates after the
first second, per cell the median over rounds.

  ddsperf   `ddsperf pub size S` → `ddsperf sub` (topic KS); ddsperf's pub
            turns Cyclone's write batching on (many samples per datagram)
  batched   `dds_flood batch` → `dds_flood sub`: ferry-dds with the same
            batching (flushed every 100 samples)
  ferry     `dds_flood pub` → `dds_flood sub` (crates/ferry-dds/examples),
            no batching: a datagram per sample, as rmw_cyclonedds sends
  node      `ros2_flood` (a ferry node's publisher with `[ros2]`, keep all)
            → `dds_flood sub`

Usage (root): python3 bench/dds.py run [--quick] [--what latency|throughput|both] [--out PATH]
  --quick: 2 sizes, 1 round of 2 s (CI); full: 7 sizes, 3 rounds of 4 s
"""

import argparse
import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PINGPONG = os.path.join(ROOT, "target/release/examples/dds_pingpong")
NODE_PING = os.path.join(ROOT, "target/release/examples/ros2_ping")
FLOOD = os.path.join(ROOT, "target/release/examples/dds_flood")
NODE_FLOOD = os.path.join(ROOT, "target/release/examples/ros2_flood")
SYSTEMS = ("ferry", "node", "ddsperf")
FLOOD_SYSTEMS = ("ferry", "batched", "node", "ddsperf")
NS = ("fdds_a", "fdds_b")
DOMAIN = 89
SIZES = [64, 1024, 16384, 65536, 262144, 1048576, 4194304]
LINE = re.compile(r"size (\d+) .*?50% ([0-9.]+)us 90% ([0-9.]+)us 99% ([0-9.]+)us.*?cnt (\d+)")
# ddsperf sub's and dds_flood sub's per-second line.
RATE = re.compile(r"size (\d+) .*?rate ([0-9.]+) kS/s ([0-9.]+) Mb/s")


def sh(cmd):
    subprocess.run(cmd, shell=True, check=True)


def lab_up():
    lab_down()
    a, b = NS
    sh(f"ip netns add {a} && ip netns add {b} && "
       f"ip link add fdva netns {a} type veth peer name fdvb netns {b}")
    for ns, dev, host in ((a, "fdva", 1), (b, "fdvb", 2)):
        sh(f"ip -n {ns} link set lo up && ip -n {ns} addr add 10.80.1.{host}/24 dev {dev} && "
           f"ip -n {ns} link set {dev} up && ip -n {ns} route add 224.0.0.0/4 dev {dev}")


def lab_down():
    for ns in NS:
        subprocess.run(["ip", "netns", "del", ns], stderr=subprocess.DEVNULL)


def size_name(n):
    for unit, k in (("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= k and n % k == 0:
            return f"{n // k} {unit}"
    return f"{n} B"


def run_pair(system, size, secs, topo):
    """One ping run; the per-second (p50, p99) in µs."""
    ping_ns = NS[0]
    pong_ns = NS[0] if topo == "one host" else NS[1]
    if system == "ddsperf":
        pong = ["ddsperf", "-i", str(DOMAIN), "-D", str(secs + 4), "pong"]
        ping = ["ddsperf", "-i", str(DOMAIN), "-D", str(secs + 1), "ping", "size", str(size)]
    elif system == "node":
        pong = [PINGPONG, "pong", str(DOMAIN), str(secs + 4)]
        ping = [NODE_PING, str(DOMAIN), str(size), str(secs)]
    else:
        pong = [PINGPONG, "pong", str(DOMAIN), str(secs + 4)]
        ping = [PINGPONG, "ping", str(DOMAIN), str(size), str(secs)]
    p = subprocess.Popen(["ip", "netns", "exec", pong_ns] + pong,
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        out = subprocess.run(["ip", "netns", "exec", ping_ns] + ping, capture_output=True,
                             text=True, timeout=secs + 30).stdout
    finally:
        p.kill()
        p.wait()
    per_s = []
    for line in out.splitlines():
        m = LINE.search(line)
        if m and int(m.group(1)) == size and int(m.group(5)) > 0:
            per_s.append((float(m.group(2)), float(m.group(4))))
    # ddsperf's first second includes matching: drop it (ferry's ping
    # already skips its warm-up second).
    if system == "ddsperf":
        per_s = per_s[1:]
    return per_s


def run_flood(system, size, secs, topo):
    """One throughput run; the per-second received rate in Mb/s (payload)."""
    pub_ns = NS[0]
    sub_ns = NS[0] if topo == "one host" else NS[1]
    if system == "ddsperf":
        sub = ["ddsperf", "-i", str(DOMAIN), "-D", str(secs + 3), "sub"]
        pub = ["ddsperf", "-i", str(DOMAIN), "-D", str(secs + 2), "pub", "size", str(size)]
    elif system == "node":
        sub = [FLOOD, "sub", str(DOMAIN), str(size), str(secs + 3)]
        pub = [NODE_FLOOD, str(DOMAIN), str(size), str(secs + 2)]
    elif system == "batched":
        sub = [FLOOD, "sub", str(DOMAIN), str(size), str(secs + 3)]
        pub = [FLOOD, "batch", str(DOMAIN), str(size), str(secs + 2)]
    else:
        sub = [FLOOD, "sub", str(DOMAIN), str(size), str(secs + 3)]
        pub = [FLOOD, "pub", str(DOMAIN), str(size), str(secs + 2)]
    s = subprocess.Popen(["ip", "netns", "exec", sub_ns] + sub, stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, text=True)
    try:
        time.sleep(0.3)
        subprocess.run(["ip", "netns", "exec", pub_ns] + pub, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL, timeout=secs + 30)
        out = s.communicate(timeout=secs + 10)[0]
    finally:
        s.kill()
        s.wait()
    rates = [float(m.group(3)) for m in map(RATE.search, out.splitlines())
             if m and int(m.group(1)) == size]
    # The first second includes matching (ddsperf) or a partial start: drop
    # it; so is the last, cut by the writer's end.
    rates = rates[1:-1] if len(rates) > 2 else rates[1:]
    return [r for r in rates if r > 0]


def grid(sizes, rounds, secs, systems, run_one, summarize):
    """Per topology and size, `rounds` runs of every system, alternating;
    a cell per size with `summarize(per-run figures)` per system (None
    when no run gave a figure). `run_one(system, size, secs, topo)` is one
    run's figure or None."""
    cells = []
    for topo in ("one host", "two hosts"):
        for size in sizes:
            runs = {system: [] for system in systems}
            for _ in range(rounds):
                for system in systems:
                    figure = run_one(system, size, secs, topo)
                    if figure is not None:
                        runs[system].append(figure)
            cell = {"topology": topo, "size": size}
            for system, rs in runs.items():
                cell[system] = summarize(rs) if rs else None
            print(f"{topo:>9} {size_name(size):>8}: "
                  + " ".join(f"{system} {cell[system]}" for system in systems), flush=True)
            cells.append(cell)
    return cells


def measure_throughput(sizes, rounds, secs):
    def one(system, size, secs, topo):
        rates = run_flood(system, size, secs, topo)
        return statistics.median(rates) if rates else None

    cells = grid(sizes, rounds, secs, FLOOD_SYSTEMS, one,
                 lambda rs: {"mbps": statistics.median(rs), "runs": len(rs)})
    ratio = lambda x, y: round(x["mbps"] / y["mbps"], 2) if x and y else None
    for cell in cells:
        f, b, n, c = cell["ferry"], cell["batched"], cell["node"], cell["ddsperf"]
        cell["batched_ratio"] = ratio(b, c)
        cell["ratio"] = ratio(f, c)
        cell["node_ratio"] = ratio(n, c)
        cell["node_vs_unbatched"] = ratio(n, f)
    return cells


def markdown_throughput(cells, args, rev):
    fmt = lambda r: f"{r['mbps']:.0f}" if r else "**no result**"
    lines = [
        "# Issue 23: ferry's DDS path beside Cyclone DDS's own (throughput)",
        "",
        f"- command: `python3 bench/dds.py run --what throughput{' --quick' if args.quick else ''}` "
        f"at commit {rev}",
        f"- date (UTC): {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}; "
        "Cyclone DDS 0.10.2 (Debian `libddsc`, all systems)",
        f"- {args.rounds} round(s) of {args.secs} s per cell, the systems alternating; figure = median over "
        "rounds of the median per-second received rate (first and last second left out), Mb/s of "
        "payload; reliable, keep all, the writer publishing flat out",
        "- Cyclone: `ddsperf pub size S` → `ddsperf sub` (topic KS); ddsperf's pub turns Cyclone's "
        "write batching on (many samples per datagram). ferry-dds batched: `dds_flood batch` (the "
        "same batching, flushed every 100 samples) → `dds_flood sub`. ferry-dds: `dds_flood pub`, "
        "no batching — a datagram per sample, as rmw_cyclonedds and ferry's ports send. ferry node: "
        "`ros2_flood` (a ferry node's publisher with `[ros2]`, the application API, no batching) "
        "→ `dds_flood sub`",
        "- one host: both ends in one namespace (over its veth address); two hosts: a veth pair; "
        "2 cores shared by writer and reader",
        "- target (issue 23): ferry ≥ 0.8 × Cyclone's own throughput",
        "",
        "| topology | size | Cyclone (ddsperf, batched) | ferry-dds batched | ferry-dds | ferry node "
        "| batched / ddsperf | ferry-dds / ddsperf | node / ddsperf | node / ferry-dds |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    dash = lambda r: r if r is not None else "-"
    for c in cells:
        lines.append(f"| {c['topology']} | {size_name(c['size'])} | {fmt(c['ddsperf'])} | "
                     f"{fmt(c['batched'])} | {fmt(c['ferry'])} | {fmt(c['node'])} | "
                     f"{dash(c['batched_ratio'])} | {dash(c['ratio'])} | {dash(c['node_ratio'])} | "
                     f"{dash(c['node_vs_unbatched'])} |")
    lines.append("Mb/s of payload received.")
    lines.append("")
    for key, name in (("batched_ratio", "ferry-dds batched"), ("ratio", "ferry-dds unbatched"),
                      ("node_ratio", "ferry node")):
        ok = [c[key] for c in cells if c.get(key) is not None]
        lines.append(f"{name} / Cyclone throughput: {min(ok):.2f}–{max(ok):.2f} over {len(ok)} cells "
                     f"({sum(r >= 0.8 for r in ok)} at or above the 0.8× target)." if ok
                     else f"{name}: no cell measured.")
    return "\n".join(lines) + "\n"


def measure(sizes, rounds, secs):
    def one(system, size, secs, topo):
        per_s = run_pair(system, size, secs, topo)
        if not per_s:
            return None
        return (statistics.median(p for p, _ in per_s), statistics.median(q for _, q in per_s))

    cells = grid(sizes, rounds, secs, SYSTEMS, one,
                 lambda rs: {"p50_us": statistics.median(p for p, _ in rs),
                             "p99_us": statistics.median(q for _, q in rs), "runs": len(rs)})
    for cell in cells:
        f, n, c = cell["ferry"], cell["node"], cell["ddsperf"]
        cell["ratio_p50"] = round(f["p50_us"] / c["p50_us"], 2) if f and c else None
        cell["node_ratio_p50"] = round(n["p50_us"] / c["p50_us"], 2) if n and c else None
    return cells


def markdown(cells, args, rev):
    fmt = lambda r: f"{r['p50_us']:.1f} / {r['p99_us']:.1f}" if r else "**no result**"
    lines = [
        "# Issue 23: ferry's DDS path beside Cyclone DDS's own (latency)",
        "",
        f"- command: `python3 bench/dds.py run{' --quick' if args.quick else ''}` at commit {rev}",
        f"- date (UTC): {datetime.datetime.now(datetime.timezone.utc).isoformat(timespec='seconds')}; "
        "Cyclone DDS 0.10.2 (Debian `libddsc`, both systems)",
        f"- {args.rounds} round(s) of {args.secs} s per cell, the systems alternating; figure = median over "
        "rounds of the median per-second percentile; one-way = RTT/2, µs; reliable, keep last 1, "
        "the next ping sent from the listener that got the pong",
        "- ferry-dds: `dds_pingpong` (a `sequence<octet>` of the size as raw CDR); "
        "ferry node: `ros2_ping`, a ferry node's publisher and inline subscriber with `[ros2]` "
        "(the application API over the DDS path) against `dds_pingpong pong`; "
        "Cyclone: `ddsperf ping size S` / `pong` (topic KS: seq, key and the octets)",
        "- one host: both ends in one namespace (over its veth address); two hosts: a veth pair",
        "- target (issue 23): ferry ≤ 1.2 × Cyclone's own latency",
        "",
        "| topology | size | ferry-dds p50 / p99 | ferry node p50 / p99 | Cyclone (ddsperf) p50 / p99 "
        "| ferry-dds / Cyclone p50 | ferry node / Cyclone p50 |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    dash = lambda r: r if r is not None else "-"
    for c in cells:
        lines.append(f"| {c['topology']} | {size_name(c['size'])} | {fmt(c['ferry'])} | "
                     f"{fmt(c.get('node'))} | {fmt(c['ddsperf'])} | {dash(c['ratio_p50'])} | "
                     f"{dash(c.get('node_ratio_p50'))} |")
    lines.append("")
    for key, name in (("ratio_p50", "ferry-dds"), ("node_ratio_p50", "ferry node")):
        ok = [c[key] for c in cells if c.get(key) is not None]
        lines.append(f"{name} / Cyclone p50: {min(ok):.2f}–{max(ok):.2f} over {len(ok)} cells "
                     f"({sum(r <= 1.2 for r in ok)} within the 1.2× target)." if ok
                     else f"{name}: no cell measured.")
    return "\n".join(lines) + "\n"


def plot(cells, path, lines, key, ylabel):
    """Both topologies side by side: `key` of each system in `lines`
    (system, style, label) against the payload size, log-log."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("dds: no matplotlib, no plot", file=sys.stderr)
        return
    fig, axes = plt.subplots(1, 2, figsize=(10, 4), sharey=True)
    for ax, topo in zip(axes, ("one host", "two hosts")):
        cs = [c for c in cells if c["topology"] == topo]
        xs = [c["size"] for c in cs]
        for system, style, label in lines:
            ys = [c[system][key] if c.get(system) else float("nan") for c in cs]
            ax.plot(xs, ys, style, label=label)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(topo)
        ax.set_xlabel("payload (bytes)")
        ax.grid(True, which="both", alpha=0.3)
    axes[0].set_ylabel(ylabel)
    axes[0].legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def plot_latency(cells, path):
    plot(cells, path, (("ferry", "o-", "ferry-dds"), ("node", "^-", "ferry node [ros2]"),
                       ("ddsperf", "s--", "Cyclone (ddsperf)")),
         "p50_us", "one-way latency p50 (µs)")


def plot_throughput(cells, path):
    plot(cells, path, (("batched", "x-", "ferry-dds batched"), ("ferry", "o-", "ferry-dds"),
                       ("node", "^-", "ferry node [ros2]"),
                       ("ddsperf", "s--", "Cyclone (ddsperf, batched)")),
         "mbps", "received Mb/s (payload)")


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="cmd", required=True)
    r = sp.add_parser("run")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--what", choices=("latency", "throughput", "both"), default="both")
    r.add_argument("--out", default=os.path.join(HERE, "results/dds"))
    args = ap.parse_args()
    if os.geteuid() != 0:
        sys.exit("dds: needs root (network namespaces)")
    for path, build in ((PINGPONG, "-p ferry-dds --example dds_pingpong"),
                        (NODE_PING, "-p ferry --features ros2 --example ros2_ping"),
                        (FLOOD, "-p ferry-dds --example dds_flood"),
                        (NODE_FLOOD, "-p ferry --features ros2 --example ros2_flood")):
        if not os.path.exists(path):
            sys.exit(f"dds: build it first: cargo build --release {build} ({path})")
    sizes = [64, 65536] if args.quick else SIZES
    args.rounds, args.secs = (1, 2) if args.quick else (3, 4)
    rev = subprocess.run(["git", "-C", ROOT, "rev-parse", "--short", "HEAD"], capture_output=True,
                         text=True).stdout.strip() or "?"
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    missing = 0
    for what, run, md_of, plot_of, out in (
            ("latency", measure, markdown, plot_latency, args.out),
            ("throughput", measure_throughput, markdown_throughput, plot_throughput,
             args.out + "_throughput")):
        if args.what not in (what, "both"):
            continue
        lab_up()
        try:
            cells = run(sizes, args.rounds, args.secs)
        finally:
            lab_down()
        with open(out + ".json", "w") as f:
            json.dump({"commit": rev, "quick": args.quick, "rounds": args.rounds, "secs": args.secs,
                       "cells": cells}, f, indent=1)
        md = md_of(cells, args, rev)
        with open(out + ".md", "w") as f:
            f.write(md)
        plot_of(cells, out + ".png")
        print(md)
        systems = FLOOD_SYSTEMS if what == "throughput" else SYSTEMS
        missing += len([c for c in cells if not all(c[s] for s in systems)])
    if missing:
        sys.exit(f"dds: {missing} cell(s) without a result")


if __name__ == "__main__":
    main()
