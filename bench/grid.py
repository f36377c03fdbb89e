#!/usr/bin/env python3
"""Issue 20's grid: ferry (default configuration) beside Zenoh over TCP and
Cyclone DDS (default configuration) on links nobody tuned for, in one run.

Each cell is a link (rate x mean one-way delay with +-40 % jitter x loss in
both directions) and a stream (sample size x rate) whose offered load is a
share of the link's rate. Every peer runs the same cell back to back on a
fresh lab (`ferry-lab run`: two namespaces, side B with its own /dev/shm):

  ferry    `ferry-wireless pub/sub` (Rust, reliable + keep_all, no settings)
  zenoh    this script's `zenoh-pub/zenoh-sub` (PyPI eclipse-zenoh, peer
           mode, TCP between the two hosts, shared memory off, reliable,
           CongestionControl.BLOCK so no sample is dropped)
  cyclone  `cyclone_table2.py pub/sub` (PyPI cyclonedds, default config
           apart from the interface, Reliable + KeepAll)

plus `ferry-unloaded`: ferry with the same samples at <= 15 % of the link
(the "own unloaded latency" of the issue's target).

Every payload carries (sequence, send time) in its first 16 bytes; the two
namespaces share the machine clock, so latency = receive time - send time,
with the send time taken before the first write attempt (time a writer is
blocked counts). Wire bytes = what host A put on the link A->B (IP
packets, headers, repairs and ACK-free TCP included), over count x size.

Usage (root):
  python3 bench/grid.py run [--quick] [--only CELL,..] [--peers ..] [--out PATH]
    --quick: 2 cells x 3 peers with few samples (CI, ~2 min)
    full: every cell below (~35 min) -> bench/results/grid.{md,json,png}
"""

import argparse
import datetime
import json
import os
import shlex
import statistics
import struct
import subprocess
import sys
import threading
import time

# One JSON line per write (the roles share the lab's stdout).
from cyclone_table2 import emit_line

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SCRIPT = os.path.abspath(__file__)
LAB = os.path.join(ROOT, "target/release/ferry-lab")
WIRELESS = os.path.join(ROOT, "target/release/ferry-wireless")
CYCLONE = os.path.join(HERE, "cyclone_table2.py")
IFACE_XML = os.path.join(HERE, "cyclone_iface.xml")
SUBNET = 14
NOFEC = os.path.join(HERE, "ferry-nofec.toml")
ZENOH_PORT = 7447
IDLE_S = 12.0
KB = 1000
SIZES_KB = [32, 64, 128, 256, 512, 1000, 2000]


# ------------------------------------------------------------------ the grid


def stream_for(mbps, load, size_kb=None):
    """(size KB, Hz) offering `load` (0.3 = 30 %) of `mbps`: the given size,
    or the smallest size of SIZES_KB that needs no more than 30 Hz."""
    bytes_s = mbps * 1e6 / 8 * load
    if size_kb is None:
        size_kb = next((s for s in SIZES_KB if bytes_s / (s * KB) <= 30.0), SIZES_KB[-1])
    return size_kb, bytes_s / (size_kb * KB)


def cell(name, mbps, delay, loss, load, size_kb=None, kernel=False):
    size_kb, hz = stream_for(mbps, load, size_kb)
    return {"name": name, "mbps": mbps, "delay_ms": delay, "loss_pct": loss,
            "load": load, "size_kb": size_kb, "hz": round(hz, 2), "kernel": kernel}


def full_grid():
    """One axis at a time around a base cell (50 Mbit/s, 10 ms, 1 % loss,
    60 % load), the size axis at the base link, the corners that hurt
    most, and a kernel-link subset (no delay: veth + tbf + nftables)."""
    base = dict(mbps=50, delay=10, loss=1, load=0.6)
    cells = [cell("base", **base)]
    for mbps in (5, 20, 100, 300):
        cells.append(cell(f"rate{mbps}", **{**base, "mbps": mbps}))
    for delay in (1, 25, 50):
        cells.append(cell(f"delay{delay}", **{**base, "delay": delay}))
    for loss in (0, 5, 10, 20):
        cells.append(cell(f"loss{loss}", **{**base, "loss": loss}))
    for load in (0.3, 0.9, 1.2):
        cells.append(cell(f"load{int(load * 100)}", **{**base, "load": load}))
    for size in (512, 2000):
        cells.append(cell(f"size{size}", **base, size_kb=size))
    cells += [
        cell("slow-far-lossy", mbps=5, delay=50, loss=10, load=0.6),
        cell("fast-near-lossy", mbps=300, delay=1, loss=5, load=0.6),
        cell("lte-over", mbps=20, delay=25, loss=5, load=1.2),
        cell("slow-over", mbps=5, delay=50, loss=1, load=1.2),
    ]
    for name, kw in [("k-base", dict(mbps=50, loss=1, load=0.6)),
                     ("k-loss0", dict(mbps=50, loss=0, load=0.6)),
                     ("k-loss10", dict(mbps=50, loss=10, load=0.6)),
                     ("k-rate5", dict(mbps=5, loss=1, load=0.6)),
                     ("k-rate300", dict(mbps=300, loss=1, load=0.6)),
                     ("k-load120", dict(mbps=50, loss=1, load=1.2))]:
        cells.append(cell(name, delay=0, kernel=True, **kw))
    return cells


def quick_grid():
    return [cell("base", mbps=50, delay=10, loss=1, load=0.6),
            cell("k-load120", mbps=50, delay=0, loss=1, load=1.2, kernel=True)]


# ------------------------------------------------------------ Zenoh roles

def zenoh_session(listen=None, connect=None):
    import zenoh
    conf = {"mode": "peer",
            "scouting": {"multicast": {"enabled": False}, "gossip": {"enabled": False}},
            "listen": {"endpoints": [listen] if listen else []},
            "connect": {"endpoints": [connect] if connect else []},
            "transport": {"shared_memory": {"enabled": False}}}
    return zenoh.open(zenoh.Config.from_json5(json.dumps(conf)))


def role_zenoh_pub(peer, size, count, hz):
    import zenoh
    t0 = time.monotonic()
    s = zenoh_session(connect=f"tcp/{peer}:{ZENOH_PORT}")
    pub = s.declare_publisher("grid/blob", congestion_control=zenoh.CongestionControl.BLOCK)
    # Matched when the subscriber's interest has arrived (bounded wait).
    while time.monotonic() < t0 + 20.0:
        try:
            if pub.matching_status.matching:
                break
        except AttributeError:     # older bindings: the session being up is all we know
            if list(s.info.peers_zid()):
                time.sleep(1.0)
                break
        time.sleep(0.01)
    else:
        emit_line({"role": "pub", "error": "no subscriber in 20 s"})
        sys.exit(2)
    time.sleep(0.5)
    buf = bytearray(max(size, 16))
    period, nxt, slow, in_put = 1.0 / hz, time.monotonic(), 0, 0.0
    t_send = time.monotonic()
    for seq in range(count):
        struct.pack_into("<QQ", buf, 0, seq, time.time_ns())
        t = time.monotonic()
        pub.put(bytes(buf))
        took = time.monotonic() - t
        in_put += took
        if took > max(0.002, period / 10):     # held back (as ferry-wireless counts it)
            slow += 1
        nxt += period
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
        else:
            nxt = time.monotonic()             # like a ROS timer: no catch-up burst
    emit_line({"role": "pub", "attempted": count, "written": count, "blocked": slow,
               "failed": 0, "send_s": round(time.monotonic() - t_send, 2),
               "publish_s": round(in_put, 2)})
    time.sleep(IDLE_S + 3.0)                   # the session stays while TCP drains
    s.close()


def role_zenoh_sub(me, count, hz):
    t0 = time.monotonic()
    end = t0 + count / hz + 60.0
    rx, lock = [], threading.Lock()

    def on_sample(sample):
        t = time.time_ns()
        head = sample.payload.to_bytes()[:16]
        if len(head) == 16:
            seq, sent = struct.unpack("<QQ", head)
            with lock:
                rx.append((t, seq, (t - sent) / 1e6))

    s = zenoh_session(listen=f"tcp/{me}:{ZENOH_PORT}")
    sub = s.declare_subscriber("grid/blob", on_sample)
    why = "deadline"
    while time.monotonic() < end:
        with lock:
            n, last = len(rx), (rx[-1][0] if rx else None)
        if n >= count:
            why = "count"
            break
        if last is not None and time.time_ns() - last > IDLE_S * 1e9:
            why = "idle"
            break
        time.sleep(0.05)
    sub.undeclare()
    with lock:
        got = list(rx)
    emit_line(summary(got, count, why))
    s.close()


def summary(rx, count, why):
    """The subscriber's line, the same keys as ferry-wireless and Cyclone's."""
    lat = sorted(x[2] for x in rx)
    seqs = [x[1] for x in rx]
    span = (rx[-1][0] - rx[0][0]) / 1e9 if len(rx) > 1 else 0.0
    pct = (lambda q: round(lat[round((len(lat) - 1) * q)], 1)) if lat else (lambda q: None)
    return {"role": "sub", "count": count, "received": len(rx), "unique": len(set(seqs)),
            "out_of_order": sum(1 for a, b in zip(seqs, seqs[1:]) if b < a),
            "hz": round((len(rx) - 1) / span, 2) if span > 0 else 0.0,
            "lat_ms": round(statistics.fmean(lat), 1) if lat else None,
            "jitter_ms": round(statistics.pstdev(lat), 1) if lat else None,
            "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": pct(1.0), "exit": why}


# ------------------------------------------------------------------ runner

def commands(peer, c, count, hz):
    """(host A command, host B command) of one peer for one cell."""
    size = c["size_kb"] * KB
    b_ip = f"10.99.{SUBNET}.2"
    py = shlex.quote(sys.executable)
    if peer.startswith("ferry"):
        env = "FERRY_DOMAIN_ID=78 FERRY_DISCOVERY=subnet"
        if peer == "ferry-nofec":              # item 6: the same without FEC
            env += f" FERRY_CONFIG={NOFEC}"
        if peer.startswith("ferry-zenoh"):     # issue 24: ferry's Zenoh path
            a_cfg, b_cfg = zenoh_configs(pin=peer == "ferry-zenoh")
            return (f"{env} FERRY_WIRELESS_ZENOH=1 FERRY_CONFIG={a_cfg} exec {WIRELESS} "
                    f"pub {size} {count} --hz {hz}",
                    f"{env} FERRY_WIRELESS_ZENOH=1 FERRY_CONFIG={b_cfg} exec {WIRELESS} "
                    f"sub {count} --hz {hz}")
        return (f"{env} exec {WIRELESS} pub {size} {count} --hz {hz}",
                f"{env} exec {WIRELESS} sub {count} --hz {hz}")
    if peer == "zenoh":
        return (f"exec {py} {SCRIPT} zenoh-pub {b_ip} {size} {count} --hz {hz}",
                f"exec {py} {SCRIPT} zenoh-sub {b_ip} {count} --hz {hz}")
    if peer == "cyclone":
        env = f"CYCLONEDDS_URI=file://{IFACE_XML}"
        return (f"{env} exec {py} {CYCLONE} pub {size} {count} --hz {hz}",
                f"{env} exec {py} {CYCLONE} sub {count} --hz {hz}")
    raise SystemExit(f"grid: unknown peer {peer} (ferry, ferry-nofec, ferry-zenoh, "
                     "ferry-zenoh-default, zenoh, cyclone)")


def zenoh_configs(pin):
    """FERRY_CONFIG files of hosts A and B for ferry's Zenoh path: A's
    session listens, B's connects (peers over TCP between the hosts, no
    router). With `pin`, `/table2` goes over Zenoh (a `[[topics]]` pin);
    without, ferry's selection decides (its own UDP path, since its
    discovery joins the two)."""
    a_ip = f"10.99.{SUBNET}.1"
    paths = []
    for side, ends in (("a", f'listen = ["tcp/{a_ip}:{ZENOH_PORT + 1}"]'),
                       ("b", f'connect = ["tcp/{a_ip}:{ZENOH_PORT + 1}"]')):
        path = f"/tmp/ferry-grid-zenoh-{side}{'-pin' if pin else ''}.toml"
        text = f"[zenoh]\nmode = \"peer\"\n{ends}\nmulticast_scouting = false\n"
        if pin:
            text += '\n[[topics]]\npattern = "/table2"\ntransport = "zenoh"\n'
        with open(path, "w") as f:
            f.write(text)
        paths.append(path)
    return paths


def zenoh_grid():
    """Issue 24's table: the Wi-Fi-like and 4G-like links at 1 % and 5 %
    loss, a stream at 30 % of the link."""
    return [cell(f"{name}-loss{loss}", mbps=mbps, delay=delay, loss=loss, load=0.3)
            for name, mbps, delay in (("wifi", 300, 2), ("lte", 50, 25))
            for loss in (1, 5)]


def run_one(peer, c, seconds):
    hz = c["hz"]
    if peer == "ferry-unloaded":
        # <= 15 % of the link, at most 2 Hz: the same samples, unloaded.
        hz = round(min(2.0, 0.15 * c["mbps"] * 1e6 / 8 / (c["size_kb"] * KB)), 3)
        count = 8
    else:
        count = max(30, round(hz * seconds))
    a, b = commands(peer, c, count, hz)
    timeout = count / hz + 75.0
    cmd = [LAB, "run", "--preset", "ideal", "--rate-mbps", f"{c['mbps']:g}",
           "--delay-ms", f"{c['delay_ms']:g}", "--loss", f"{c['loss_pct']:g}",
           "--subnet", str(SUBNET), "--a", a, "--b", b, "--timeout", f"{timeout:g}",
           "--until-b"] + (["--kernel"] if c["kernel"] else [])
    t = time.monotonic()
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout + 30)
        out, err, rc = p.stdout, p.stderr, p.returncode
    except subprocess.TimeoutExpired as e:
        out, err, rc = e.stdout or "", (e.stderr or "") + "\ngrid: lab timed out", None
        out = out.decode() if isinstance(out, bytes) else out
        err = err.decode() if isinstance(err, bytes) else err
    pub = sub = link = None
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            try:
                j = json.loads(line)
            except ValueError:
                continue
            if j.get("role") == "pub":
                pub = j
            elif j.get("role") == "sub" or ("received" in j and "role" not in j):
                sub = j
    for line in err.splitlines():
        if line.startswith("link json "):
            link = json.loads(line[len("link json "):])
    return {"peer": peer, "count": count, "hz": hz, "lab_rc": rc, "pub": pub, "sub": sub,
            "link": link, "secs": round(time.monotonic() - t, 1),
            "stdout_tail": out.splitlines()[-4:],
            "stderr_tail": [l for l in err.splitlines()
                            if not l.startswith(("link ", "lab up"))][-8:]}


# ----------------------------------------------------------- assessment

def transfer_ms(c):
    return c["size_kb"] * KB * 8 / (c["mbps"] * 1e6) * 1e3


def assess(c, runs):
    """The issue's targets for ferry in this cell, each True / False / None."""
    f = runs.get("ferry") or {}
    fs, fp = f.get("sub") or {}, f.get("pub") or {}
    out = {}
    n = f.get("count")
    out["complete_in_order"] = bool(fs) and fs.get("received") == n and fs.get("unique") == n \
        and fs.get("out_of_order") == 0
    r = ratio(f, c)
    out["wire_ratio"] = round(r, 3) if r else None
    p = c["loss_pct"] / 100
    out["wire_bound"] = round(1.05 if p == 0 else 1.15 / (1 - p), 3)
    out["wire_ok"] = out["wire_ratio"] is not None and out["wire_ratio"] <= out["wire_bound"]
    if c["load"] <= 1.0:
        peers = [(runs.get(k) or {}).get("sub") or {} for k in ("zenoh", "cyclone")]
        best = min((s["lat_ms"] for s, k in zip(peers, ("zenoh", "cyclone"))
                    if s.get("lat_ms") is not None
                    and s.get("received") == (runs.get(k) or {}).get("count")), default=None)
        out["best_peer_ms"] = best
        out["vs_best_peer"] = round(fs["lat_ms"] / best, 2) if best and fs.get("lat_ms") else None
        u = ((runs.get("ferry-unloaded") or {}).get("sub") or {}).get("lat_ms")
        out["unloaded_ms"] = u
        out["vs_unloaded"] = round(fs["lat_ms"] / u, 2) if u and fs.get("lat_ms") else None
        out["ok"] = out["complete_in_order"] \
            and (out["vs_best_peer"] is None or out["vs_best_peer"] <= 1.2) \
            and (out["vs_unloaded"] is None or out["vs_unloaded"] <= 3.0) and out["wire_ok"]
    else:
        rtt = 2 * c["delay_ms"]
        bound = 2 * transfer_ms(c) + rtt
        out["bound_ms"] = round(bound, 1)
        # The same bound with the transfer at the payload rate the path
        # actually delivered to ferry's subscriber (headers and repairs of
        # a lossy link take their share of the rate).
        if fs.get("hz"):
            goodput = fs["hz"] * c["size_kb"] * KB
            out["bound_goodput_ms"] = round(2 * c["size_kb"] * KB / goodput * 1e3 + rtt, 1)
        out["backpressure"] = (fp.get("blocked") or 0) > 0
        out["ok"] = out["complete_in_order"] and out["backpressure"] and out["wire_ok"] \
            and fs.get("lat_ms") is not None and fs["lat_ms"] <= bound
    return out


# ---------------------------------------------------------------- report

def fmt(v, nd=1):
    if v is None:
        return "-"
    return f"{v:.{nd}f}" if isinstance(v, float) else str(v)


def peer_cell(r):
    if not r:
        return "-"
    s = r.get("sub") or {}
    if not s:
        return "no result"
    got = f"{s.get('received')}/{r['count']}"
    lat = f"{fmt(s.get('lat_ms'))} ({fmt(s.get('p99_ms'))})"
    if s.get("received") != r["count"] or s.get("out_of_order"):
        lat += f" **{got}**" + (f" ooo {s['out_of_order']}" if s.get("out_of_order") else "")
    return lat


def ratio(r, c):
    """Bytes host A put on the link A->B over the payload written."""
    link = ((r or {}).get("link") or {}).get("a_to_b") or {}
    payload = (r or {}).get("count", 0) * c["size_kb"] * KB
    return link["sent_bytes"] / payload if link.get("sent_bytes") and payload else None


def wire(r, c):
    return fmt(ratio(r, c), 2)


def table(results):
    rows = ["| cell | link | stream (load) | ferry mean (p99) ms | Zenoh TCP | Cyclone DDS "
            "| ferry unloaded | ferry / best peer | ferry / unloaded | bound (>100 %) "
            "| writer held back | wire x payload: ferry / Zenoh / Cyclone (ferry bound) | targets |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---|"]
    for x in results:
        c, runs, a = x["cell"], x["runs"], x["assess"]
        link = (f"{'kernel ' if c['kernel'] else ''}{c['mbps']:g} Mbit/s, "
                f"{c['delay_ms']:g} ms, {c['loss_pct']:g} %")
        stream = f"{c['size_kb']:g} KB @ {c['hz']:g} Hz ({c['load'] * 100:.0f} %)"
        fp = (runs.get("ferry") or {}).get("pub") or {}
        bound = fmt(a.get("bound_ms"))
        if a.get("bound_goodput_ms"):
            bound += f" / {fmt(a['bound_goodput_ms'])}"
        rows.append(
            f"| {c['name']} | {link} | {stream} | {peer_cell(runs.get('ferry'))} "
            f"| {peer_cell(runs.get('zenoh'))} | {peer_cell(runs.get('cyclone'))} "
            f"| {fmt(a.get('unloaded_ms'))} | {fmt(a.get('vs_best_peer'), 2)} "
            f"| {fmt(a.get('vs_unloaded'), 2)} | {bound} "
            f"| {fp.get('blocked', '-')} "
            f"| {wire(runs.get('ferry'), c)} / {wire(runs.get('zenoh'), c)} / "
            f"{wire(runs.get('cyclone'), c)} ({a['wire_bound']:.2f}) "
            f"| {'met' if a.get('ok') else 'MISSED'} |")
    return "\n".join(rows) + "\n"


ZENOH_PEERS = ["ferry", "ferry-zenoh", "ferry-zenoh-default", "zenoh"]


def zenoh_table(results):
    """Issue 24's table: ferry's own path (UDP) beside its Zenoh path on the
    same link, what ferry's selection picks with `[zenoh]` configured, and
    plain Zenoh over TCP."""
    rows = ["| cell | link | stream (load) | ferry UDP mean (p99) ms | ferry over Zenoh (pinned) "
            "| ferry with `[zenoh]`, no pin | paths: UDP run / pinned / no pin | plain Zenoh TCP "
            "| Zenoh path / UDP (mean) | faster | wire x payload: UDP / Zenoh path |",
            "|---|---|---|---:|---:|---:|---|---:|---:|---|---|"]
    for x in results:
        c, runs = x["cell"], x["runs"]
        link = f"{c['mbps']:g} Mbit/s, {c['delay_ms']:g} ms, {c['loss_pct']:g} %"
        stream = f"{c['size_kb']:g} KB @ {c['hz']:g} Hz ({c['load'] * 100:.0f} %)"
        udp = ((runs.get("ferry") or {}).get("sub") or {}).get("lat_ms")
        zp = ((runs.get("ferry-zenoh") or {}).get("sub") or {}).get("lat_ms")
        dflt = runs.get("ferry-zenoh-default")
        paths = " / ".join(((runs.get(k) or {}).get("sub") or {}).get("path") or "-"
                           for k in ("ferry", "ferry-zenoh", "ferry-zenoh-default"))
        r = zp / udp if udp and zp else None
        faster = "-" if r is None else ("UDP" if r > 1 else "Zenoh path")
        rows.append(
            f"| {c['name']} | {link} | {stream} | {peer_cell(runs.get('ferry'))} "
            f"| {peer_cell(runs.get('ferry-zenoh'))} | {peer_cell(dflt)} | {paths} "
            f"| {peer_cell(runs.get('zenoh'))} | {fmt(r, 2)} | {faster} "
            f"| {wire(runs.get('ferry'), c)} / {wire(runs.get('ferry-zenoh'), c)} |")
    return "\n".join(rows) + "\n"


def plot(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    names = [x["cell"]["name"] for x in results]
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(10, len(names) * 0.6), 8), sharex=True)
    w = 0.27
    for i, (peer, color) in enumerate([("ferry", "tab:blue"), ("zenoh", "tab:orange"),
                                       ("cyclone", "tab:green")]):
        lat, wr = [], []
        for x in results:
            r = x["runs"].get(peer) or {}
            s = r.get("sub") or {}
            lat.append(s.get("lat_ms") or 0.0)
            wr.append(ratio(r, x["cell"]) or 0.0)
        xs = [j + (i - 1) * w for j in range(len(names))]
        ax1.bar(xs, lat, w, label=peer, color=color)
        ax2.bar(xs, wr, w, label=peer, color=color)
    ax1.set_yscale("log")
    ax1.set_ylabel("mean latency (ms, log)")
    ax1.legend()
    ax1.set_title("issue 20 grid: reliable streams on links nobody tuned for (same run)")
    ax2.set_ylabel("wire bytes / payload")
    ax2.axhline(1.0, color="grey", lw=0.5)
    ax2.set_xticks(range(len(names)))
    ax2.set_xticklabels(names, rotation=60, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def fec_table(results):
    """Item 6: ferry with FEC (default) and without, latency vs wire bytes."""
    rows = ["| cell | link | stream | FEC on: mean (p99) ms | wire x payload | FEC off: mean (p99) ms "
            "| wire x payload | latency on/off | bytes on/off | bound at loss p |",
            "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
    for x in results:
        c, runs = x["cell"], x["runs"]
        on, off = runs.get("ferry"), runs.get("ferry-nofec")
        if not on or not off:
            continue
        lo, lf = ((on.get("sub") or {}).get("lat_ms"), (off.get("sub") or {}).get("lat_ms"))
        wo, wf = ratio(on, c), ratio(off, c)
        rows.append(
            f"| {c['name']} | {c['mbps']:g} Mbit/s, {c['delay_ms']:g} ms, {c['loss_pct']:g} % "
            f"| {c['size_kb']:g} KB @ {c['hz']:g} Hz | {peer_cell(on)} | {fmt(wo, 2)} "
            f"| {peer_cell(off)} | {fmt(wf, 2)} "
            f"| {fmt(lo / lf if lo and lf else None, 2)} | {fmt(wo / wf if wo and wf else None, 2)} "
            f"| {x['assess']['wire_bound']:.2f} |")
    return "\n".join(rows) + "\n"


def plot_fec(results, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(7, 5))
    for x in results:
        c, runs = x["cell"], x["runs"]
        pts = [(ratio(runs.get(k), c), ((runs.get(k) or {}).get("sub") or {}).get("lat_ms"))
               for k in ("ferry-nofec", "ferry")]
        if any(a is None or b is None for a, b in pts):
            continue
        (x0, y0), (x1, y1) = pts
        ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                    arrowprops=dict(arrowstyle="->", color="grey"))
        ax.scatter([x0], [y0], color="tab:red", zorder=3)
        ax.scatter([x1], [y1], color="tab:blue", zorder=3)
        ax.annotate(f"{c['loss_pct']:g} %", (x1, y1), textcoords="offset points", xytext=(6, 4))
    ax.scatter([], [], color="tab:red", label="FEC off (NACK repairs only)")
    ax.scatter([], [], color="tab:blue", label="FEC on (default)")
    ax.set_xlabel("wire bytes / payload (A to B)")
    ax.set_ylabel("mean latency (ms)")
    ax.set_title("ferry, 128 KB @ 29 Hz on 50 Mbit/s, 10 ms: FEC off -> on per loss")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)


# ------------------------------------------------------------------- main

def role_run(args):
    import importlib.metadata as md
    if args.set == "zenoh":
        cells = zenoh_grid()[:1] if args.quick and not args.only else zenoh_grid()
    else:
        cells = quick_grid() if args.quick else full_grid()
    if args.only:
        cells = [c for c in cells if c["name"] in args.only]
    peers = args.peers or (ZENOH_PEERS if args.set == "zenoh"
                           else ["ferry", "ferry-unloaded", "zenoh", "cyclone"])
    seconds = args.seconds or (4.0 if args.quick else 15.0)
    started = datetime.datetime.now(datetime.timezone.utc)
    results = []
    for c in cells:
        runs = {}
        for peer in peers:
            if peer == "ferry-unloaded" and c["load"] > 1.0:
                continue                       # its target is the bound there
            r = run_one(peer, c, seconds)
            runs[peer] = r
            s = r["sub"] or {}
            print(f"{c['name']:>16} {peer:>14}: {s.get('received')}/{r['count']} "
                  f"lat {s.get('lat_ms')} p99 {s.get('p99_ms')} pub {r['pub']} "
                  f"({r['secs']} s, load {open('/proc/loadavg').read().split()[0]})",
                  file=sys.stderr, flush=True)
            if not s:
                print(f"    stdout: {r['stdout_tail']}\n    stderr: {r['stderr_tail']}",
                      file=sys.stderr, flush=True)
        results.append({"cell": c, "runs": runs, "assess": assess(c, runs)})
    text = zenoh_table(results) if args.set == "zenoh" else table(results)
    if "ferry-nofec" in peers:
        text += "\nFEC on (default) and off (`udp_fec = false`), issue 20 item 6:\n\n" \
            + fec_table(results)
    print(text)
    met = sum(1 for x in results if x["assess"].get("ok"))
    print(f"targets met in {met} of {len(results)} cells")
    if args.out:
        versions = {k: md.version(k) for k in ("eclipse-zenoh", "cyclonedds")}
        cmd = "python3 " + " ".join(shlex.quote(a) for a in
                                    [os.path.relpath(SCRIPT, ROOT)] + sys.argv[1:])
        meta = {"command": cmd, "date_utc": started.isoformat(timespec="seconds"),
                "versions": versions, "seconds_per_run": seconds}
        with open(args.out + ".json", "w") as f:
            json.dump({"meta": meta, "results": results}, f, indent=1)
        with open(args.out + ".md", "w") as f:
            head = ZENOH_HEADER if args.set == "zenoh" else HEADER
            f.write(head.format(cmd=cmd, date=meta["date_utc"], z=versions["eclipse-zenoh"],
                                  c=versions["cyclonedds"], s=seconds))
            f.write(text)
            f.write(f"\nTargets met in {met} of {len(results)} cells.\n")
        if not args.quick and args.set != "zenoh":
            if "ferry-nofec" in peers:
                plot_fec(results, args.out + ".png")
            else:
                plot(results, args.out + ".png")
    # Reliable delivery is complete and in order in every ferry cell.
    if args.set == "zenoh":
        def whole(r):
            s = (r or {}).get("sub") or {}
            return s.get("received") == r["count"] and not s.get("out_of_order")
        bad = [x["cell"]["name"] for x in results
               if not all(whole(r) for k, r in x["runs"].items() if k.startswith("ferry"))]
    else:
        bad = [x["cell"]["name"] for x in results if not x["assess"]["complete_in_order"]]
    if bad:
        print(f"grid: ferry lost or reordered samples in {bad}", file=sys.stderr)
        sys.exit(1)


ZENOH_HEADER = """# Issue 24: ferry's own UDP path beside its Zenoh path on lossy links

- command: `cd /work/main && {cmd}` (root; after
  `cargo build --release -p ferry-lab --features zenoh`)
- date (UTC): {date}; eclipse-zenoh {z} (plain Zenoh's row; cyclonedds {c} unused)
- every peer runs each cell back to back on a fresh lab (`ferry-lab run`: two
  namespaces, a userspace link emulator with rate, delay +-40 % and loss in both
  directions), ~{s:g} s of samples per run; `ferry-wireless pub/sub`, reliable +
  keep_all, default configuration but for: **ferry over Zenoh** = `[zenoh]` (A's
  session listens, B's connects, peers over TCP) and a `[[topics]]` pin of
  `/table2` to Zenoh; **ferry with `[zenoh]`, no pin** = the same without the pin
  (ferry's selection; the path column says which path the samples took); plain
  Zenoh = PyPI eclipse-zenoh peers over TCP, reliable, `CongestionControl.BLOCK`.
- latency = receive time - send time (one machine clock); a bold count = samples
  missing or out of order.

"""


HEADER = """# Issue 20 grid: ferry beside Zenoh (TCP) and Cyclone DDS on untuned links

- command: `cd /work/main && {cmd}` (root; after `cargo build --release -p ferry-lab`)
- date (UTC): {date}; eclipse-zenoh {z}, cyclonedds {c} (PyPI; the C library bundled)
- every peer runs each cell back to back on a fresh lab, ~{s:g} s of samples per run
  (at least 30 samples); ferry with its **default configuration** (no `udp_link_mbps`:
  it does not know the link), reliable + keep_all; Zenoh peer mode over TCP between
  the hosts, shared memory off, reliable, `CongestionControl.BLOCK`; Cyclone DDS with
  its default configuration apart from the interface, Reliable + KeepAll.
- links: the lab's userspace emulator (rate, 50 ms queue, mean one-way delay with each
  packet's delay uniform in ±40 % of it, in order, loss in both directions) or, for
  `k-` cells, the kernel (veth + `tbf` 50 ms queue + nftables loss, no delay).
- columns: mean latency (p99) in ms over the samples that arrived; **received/sent**
  when not all arrived; ferry unloaded = ferry with the same samples at ≤ 15 % of the
  link (8 samples); bound (> 100 % load) = 2 × one sample's transfer time + RTT (the
  link's nominal rate and mean delay) / the same with the transfer at the payload rate
  ferry's subscriber received (what the path delivers after headers and repairs);
  writer held back = samples whose `publish` blocked for more than a tenth of the
  period (≥ 2 ms) or was refused (back-pressure; Zenoh's `put` counted alike in the JSON); wire × payload = bytes host
  A put on the link A→B (IP packets) / (count × size), ferry's bound 1.05 at 0 % loss,
  1.15 / (1 − p) at loss p.
- targets (issue 20): below capacity, ferry ≤ 1.2 × the better peer that delivered every
  sample and ≤ 3 × its unloaded latency; above capacity, ≤ the bound with back-pressure;
  every cell complete and in order.

"""


def main():
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="role", required=True)
    p = sp.add_parser("zenoh-pub")
    p.add_argument("peer")
    p.add_argument("size", type=int)
    p.add_argument("count", type=int)
    p.add_argument("--hz", type=float, required=True)
    s = sp.add_parser("zenoh-sub")
    s.add_argument("me")
    s.add_argument("count", type=int)
    s.add_argument("--hz", type=float, required=True)
    r = sp.add_parser("run")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--only", type=lambda x: x.split(","))
    r.add_argument("--set", choices=["grid", "zenoh"], default="grid",
                   help="zenoh: issue 24's cells (Wi-Fi/4G-like, 1 %% / 5 %% loss); "
                        "use with --peers ferry,ferry-zenoh,ferry-zenoh-default,zenoh "
                        "after `cargo build --release -p ferry-lab --features zenoh`")
    r.add_argument("--peers", type=lambda x: x.split(","))
    r.add_argument("--seconds", type=float)
    r.add_argument("--out")
    a = ap.parse_args()
    if a.role == "zenoh-pub":
        role_zenoh_pub(a.peer, a.size, a.count, a.hz)
    elif a.role == "zenoh-sub":
        role_zenoh_sub(a.me, a.count, a.hz)
    else:
        role_run(a)


if __name__ == "__main__":
    main()
