#!/usr/bin/env python3
"""Cyclone DDS (default configuration) as the peer row of seed 001's Table II.

Same grid and link as `ferry-wireless run` (crates/ferry-lab/src/bin/ferry-wireless.rs):
32/64/128/256/512 KB (1 KB = 1000 B) at 30 Hz, reliable + keep_all, over the
ferry lab's emulated 802.11ac link (300 Mbit/s, 2 ms +- 1 ms one way), for
ideal / 1 % loss / 20 % loss (both directions) / a 20 s outage (8 s..28 s).

Roles:
  pub SIZE COUNT [--depth N]  host A: write COUNT samples of SIZE bytes at 30 Hz
  sub COUNT [--outage-end-ns] [--ros2]
                              host B: print one JSON line of reception stats
                              (--ros2: ROS 2's names for the topic and type, as
                              a ferry node's `[ros2]` DDS path writes them)
  run [--quick] [--count N] [--outage-count N] [--sizes ..] [--conditions ..]
      [--system cyclone|ferry-dds] [--profile default|tune] [--out PATH]
                              loop over the grid, one `ferry-lab run` per cell;
                              ferry-dds = a ferry node's DDS path sends
                              (crates/ferry/examples/ros2_rate.rs), Cyclone
                              reads; tune = `ferry tune`'s Cyclone profile for
                              the cell on both ends and keep last N_HC

bench/table2_dds.py runs ferry's UDP path, Cyclone and ferry's DDS path with
both configurations side by side through this module.

Payload: an IdlStruct with one `bytes` member (IDL sequence<octet>); bytes 0..8
= sequence number, 8..16 = send time (time.time_ns(), little endian). Both lab
namespaces share the machine clock, so latency = receive time - send time.

Cyclone is used with its DEFAULT configuration apart from pinning the network
interface (bench/cyclone_iface.xml via CYCLONEDDS_URI) and default QoS apart
from Reliability.Reliable (max_blocking_time 100 ms, the DDS default for
writers) and History.KeepAll on both ends.
"""

import argparse
import datetime
import json
import os
import re
import shlex
import statistics
import struct
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

HZ = 30.0
HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.abspath(__file__)
IFACE_XML = os.path.join(HERE, "cyclone_iface.xml")
ROOT = os.path.dirname(HERE)
LAB = os.path.join(ROOT, "target/release/ferry-lab")
FERRY = os.path.join(ROOT, "target/release/ferry")
WIRELESS = os.path.join(ROOT, "target/release/ferry-wireless")
ROS2_RATE = os.path.join(ROOT, "target/release/examples/ros2_rate")
LINK = "300Mbit"  # the wifi preset's rate: what `ferry tune --link` is told
SUBNET = 12
OUTAGE = (8.0, 28.0)
IDLE_S = 15.0
TOPIC = "table2"
# What a ferry node's `[ros2]` path writes for `/table2` of type
# `ferry_bench/msg/Blob` (ROS 2's conventions: `rt/` prefix, `dds_` type).
ROS2_TOPIC = "rt/table2"
ROS2_TYPE = "ferry_bench::msg::dds_::Blob_"


def emit_line(obj):
    """One JSON line on stdout in a single write: the publisher and the
    subscriber share the lab's stdout, and with PYTHONUNBUFFERED `print`
    writes the text and its newline apart, so a line printed at the same
    instant by the other process landed between them (two lines on one)."""
    sys.stdout.flush()
    os.write(1, (json.dumps(obj) + "\n").encode())


def deadline_s(count):
    """Each role gives up by itself a little before the lab's timeout (count/30 + 60 s)."""
    return count / HZ + 55.0


# ---------------------------------------------------------------- DDS roles

def dds_setup(typename="cyclone_table2::Blob"):
    """The topic type is `struct Blob { sequence<uint8> data; };`.

    The Python binding would (de)serialize a sequence<uint8> as a list of
    ints (~10^6 Python objects per 512 KB sample, tens of ms of CPU on each
    end). The CDR encoding of an unbounded sequence<uint8> is the same as the
    binding's `bytes` machine (4-aligned uint32 length, then the octets), so
    that machine is used for it: same type object, same wire bytes, no
    per-element cost. Nothing in Cyclone itself changes.
    """
    from cyclonedds.idl import IdlStruct, _builder, _machinery
    from cyclonedds.idl import types as t

    orig = _builder.Builder.__dict__["_machine_for_type"].__func__

    def machine_for_type(cls, _type, *a, **k):
        if isinstance(_type, t.sequence) and _type.subtype in (t.uint8, t.byte) \
                and _type.max_length is None:
            return _machinery.BytesMachine()
        return orig(cls, _type, *a, **k)

    _builder.Builder._machine_for_type = classmethod(machine_for_type)

    @dataclass
    class Blob(IdlStruct, typename=typename):
        data: t.sequence[t.uint8]

    return Blob


def qos(depth=0):
    """Reliable; keep all, or keep last `depth` (the profile's N_HC)."""
    from cyclonedds.core import Qos, Policy
    from cyclonedds.util import duration
    return Qos(
        Policy.Reliability.Reliable(max_blocking_time=duration(milliseconds=100)),
        Policy.History.KeepLast(depth) if depth else Policy.History.KeepAll,
    )


def role_pub(size, count, depth=0):
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.topic import Topic
    from cyclonedds.pub import DataWriter
    from cyclonedds.core import DDSException
    from cyclonedds.util import duration

    t_start = time.monotonic()
    end = t_start + deadline_s(count)
    Blob = dds_setup()
    dp = DomainParticipant()
    tp = Topic(dp, TOPIC, Blob)
    w = DataWriter(dp, tp, qos=qos(depth))
    # Wait for the subscriber (discovery over the link), bounded.
    matched = False
    while time.monotonic() < t_start + 20.0:
        if w.get_publication_matched_status().current_count > 0:
            matched = True
            break
        time.sleep(0.01)
    t_match = time.monotonic() - t_start
    if not matched:
        emit_line({"role": "pub", "error": "no subscriber in 20 s"})
        sys.exit(2)
    time.sleep(0.5)
    period = 1.0 / HZ
    nxt = time.monotonic()
    buf = bytearray(size)
    written = 0
    errors = {}
    t_first = time.time_ns()
    t_link = t_start  # relative times below are from the pub's start
    cur = w.get_publication_matched_status().current_count
    match_events = [(round(time.monotonic() - t_link, 2), cur)]
    for seq in range(count):
        c = w.get_publication_matched_status().current_count
        if c != cur:
            cur = c
            match_events.append((round(time.monotonic() - t_link, 2), c))
        struct.pack_into("<QQ", buf, 0, seq, time.time_ns())
        try:
            w.write(Blob(data=bytes(buf)))
            written += 1
        except DDSException as e:
            k = str(getattr(e, "code", e))
            errors[k] = errors.get(k, 0) + 1
        nxt += period
        d = nxt - time.monotonic()
        if d > 0:
            time.sleep(d)
    t_send = (time.time_ns() - t_first) / 1e9
    # Let reliable repair finish before the writer goes (bounded by the deadline).
    left = max(0.5, end - time.monotonic())
    t0 = time.monotonic()
    acked = bool(w.wait_for_acks(duration(seconds=left)))
    emit_line({
        "role": "pub", "size": size, "attempted": count, "written": written,
        "write_errors": errors, "match_s": round(t_match, 2),
        "send_s": round(t_send, 2), "all_acked": acked,
        "ack_wait_s": round(time.monotonic() - t0, 2),
        "matched_readers_t_s": match_events,
    })


def role_sub(count, outage_end_ns, ros2=False):
    from cyclonedds.domain import DomainParticipant
    from cyclonedds.topic import Topic
    from cyclonedds.sub import DataReader
    from cyclonedds.core import ReadCondition, ViewState, InstanceState, SampleState, WaitSet
    from cyclonedds.util import duration

    t_start = time.monotonic()
    end = t_start + deadline_s(count)
    Blob = dds_setup(ROS2_TYPE if ros2 else "cyclone_table2::Blob")
    dp = DomainParticipant()
    tp = Topic(dp, ROS2_TOPIC if ros2 else TOPIC, Blob)
    r = DataReader(dp, tp, qos=qos())
    rc = ReadCondition(r, ViewState.Any | InstanceState.Any | SampleState.Any)
    ws = WaitSet(dp)
    ws.attach(rc)
    rx = []  # (recv ns, seq, latency ms)
    last = None
    why = "deadline"
    while time.monotonic() < end:
        if len(rx) >= count:
            why = "count"
            break
        if last is not None:
            # 15 s without a sample ends the run -- but never while the link is
            # known to be down (the outage cell's link returns at outage_end).
            idle_from = max(last, outage_end_ns / 1e9 - time.time() + time.monotonic()) \
                if outage_end_ns else last
            if time.monotonic() - idle_from > IDLE_S:
                why = "idle"
                break
        ws.wait(duration(milliseconds=200))
        while True:
            got = r.take(N=64, condition=rc)
            if not got:
                break
            t = time.time_ns()
            for s in got:
                d = getattr(s, "data", None)
                if d is None or len(d) < 16:
                    continue
                seq, sent = struct.unpack_from("<QQ", d, 0)
                rx.append((t, seq, (t - sent) / 1e6))
            last = time.monotonic()
    n = len(rx)
    span = (rx[-1][0] - rx[0][0]) / 1e9 if n > 1 else 0.0
    lat = [x[2] for x in rx]
    seqs = [x[1] for x in rx]
    out = {
        "role": "sub", "count": count, "received": n,
        "unique": len(set(seqs)),
        "out_of_order": sum(1 for a, b in zip(seqs, seqs[1:]) if b < a),
        "hz": round((n - 1) / span, 2) if span > 0 else 0.0,
        "lat_ms": round(statistics.fmean(lat), 1) if lat else None,
        "jitter_ms": round(statistics.pstdev(lat), 1) if lat else None,
        "p50_ms": round(statistics.median(lat), 1) if lat else None,
        "p99_ms": round(sorted(lat)[round((len(lat) - 1) * 0.99)], 1) if lat else None,
        "max_ms": round(max(lat), 1) if lat else None,
        "t_first_ns": rx[0][0] if rx else None,
        "t_last_ns": rx[-1][0] if rx else None,
        "exit": why,
    }
    if outage_end_ns:
        out["rx_ns"] = [x[0] for x in rx]
        out["rx_seq"] = seqs
    emit_line(out)


# ---------------------------------------------------------------- runner

CONDS = {
    "ideal": ["--loss", "0"],
    "loss1": ["--loss", "1"],
    "loss20": ["--loss", "20"],
    "outage": ["--loss", "0", "--outage", f"{OUTAGE[0]:g}:{OUTAGE[1]:g}"],
}


def my_strays():
    """PIDs of pub/sub roles of this script still alive (we started them)."""
    pids = []
    for p in os.listdir("/proc"):
        if not p.isdigit() or int(p) == os.getpid():
            continue
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                argv = f.read().split(b"\0")
        except OSError:
            continue
        if SCRIPT.encode() in argv and (b"pub" in argv or b"sub" in argv):
            pids.append(int(p))
    return pids


def cleanup():
    for pid in my_strays():
        try:
            os.kill(pid, 9)
            print(f"killed stray {pid}", file=sys.stderr)
        except OSError:
            pass
    ns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    for name in ("flruna", "flrunb"):
        if re.search(rf"^{name}\b", ns, re.M):
            subprocess.run(f"ip netns pids {name} | xargs -r kill -9; ip netns del {name}",
                           shell=True)
            print(f"removed leftover namespace {name}", file=sys.stderr)


def recovery(rx_ns, outage_end_ns):
    """Seconds after the link returns until 30 consecutive samples arrive
    within 1 s (>= 29 Hz), as in ferry-wireless."""
    after = [t for t in rx_ns if t >= outage_end_ns]
    for i in range(len(after) - 29):
        if (after[i + 29] - after[i]) / 1e9 <= 1.0:
            return round((after[i] - outage_end_ns) / 1e9, 2)
    return None


TUNE_DIR = None


def tune_profile(kb):
    """`ferry tune --rate 30 --payload <kb>KB --link 300Mbit`'s Cyclone XML
    for the cell, written to a file: (path, N_HC)."""
    global TUNE_DIR
    import tempfile
    out = subprocess.run([FERRY, "tune", "--rate", f"{HZ:g}", "--payload", f"{kb}KB",
                          "--link", LINK], capture_output=True, text=True, check=True).stdout
    xml = re.search(r"<CycloneDDS.*?</CycloneDDS>", out, re.S)
    depth = re.search(r"keep_last\((\d+)\)", out)
    if not xml or not depth:
        sys.exit(f"cyclone_table2: `ferry tune` printed no Cyclone profile:\n{out}")
    if TUNE_DIR is None:
        TUNE_DIR = tempfile.TemporaryDirectory(prefix="table2-tune-")
    path = os.path.join(TUNE_DIR.name, f"tune-{kb}KB.xml")
    with open(path, "w") as f:
        f.write(xml.group(0))
    return path, int(depth.group(1))


def run_cell(cond, kb, count, system="cyclone", profile="default"):
    """One cell: `system` (cyclone: Cyclone's writer; ferry-dds: a ferry
    node's `[ros2]` DDS path) sends on host A, Cyclone reads on host B,
    with Cyclone's default configuration or `ferry tune`'s profile."""
    py = sys.executable
    env = f"CYCLONEDDS_URI=file://{IFACE_XML}"
    depth = 0
    if profile == "tune":
        xml, depth = tune_profile(kb)
        env += f",file://{xml}"
    timeout = count / HZ + 60.0
    t_launch = time.time_ns()
    outage_arg = ""
    if cond == "outage":
        # Link start is a little after launch; the sub only uses this to not
        # count the outage as idleness, so an early estimate is safe.
        outage_arg = f" --outage-end-ns {t_launch + int(OUTAGE[1] * 1e9)}"
    if system == "ferry-dds":
        # The ferry node lingers for repair; the lab ends it 8 s after the reader.
        a = f"{env} exec {ROS2_RATE} 0 {kb * 1000} {count} {depth}"
        b = f"{env} exec {py} {SCRIPT} sub {count}{outage_arg} --ros2"
        until_b = ["--until-b"]
    else:
        a = f"{env} exec {py} {SCRIPT} pub {kb * 1000} {count} --depth {depth}"
        b = f"{env} exec {py} {SCRIPT} sub {count}{outage_arg}"
        until_b = []
    cmd = [LAB, "run", "--preset", "wifi", *CONDS[cond], "--subnet", str(SUBNET),
           "--a", a, "--b", b, "--timeout", f"{timeout:g}", *until_b]
    lab_up_ns = [None]
    err_lines = []

    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def read_err():
        for line in p.stderr:
            if line.startswith("lab up") and lab_up_ns[0] is None:
                lab_up_ns[0] = time.time_ns()
            err_lines.append(line.rstrip("\n"))

    out_lines = []

    def read_out():
        for line in p.stdout:
            out_lines.append(line)

    # One reader per pipe (communicate() would race the stderr reader).
    ths = [threading.Thread(target=read_err, daemon=True),
           threading.Thread(target=read_out, daemon=True)]
    for th in ths:
        th.start()
    try:
        p.wait(timeout=timeout + 30)
    except subprocess.TimeoutExpired:
        p.kill()  # our own child, by handle
        p.wait()
        err_lines.append("runner: ferry-lab exceeded its timeout + 30 s, killed")
    for th in ths:
        th.join(timeout=5)
    out = "".join(out_lines)
    pub = sub = None
    for line in out.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            j = json.loads(line)
        except ValueError:
            continue
        if j.get("role") == "pub":
            pub = j
        elif j.get("role") == "sub":
            sub = j
    link = None
    for l in err_lines:
        if l.startswith("link json "):
            try:
                link = json.loads(l[len("link json "):])
            except ValueError:
                pass
    res = {"condition": cond, "size_kb": kb, "count": count, "timeout_s": timeout,
           "system": system, "profile": profile, "depth": depth, "link": link,
           "lab_rc": p.returncode, "pub": pub, "sub": sub,
           "lab_stderr": [l for l in err_lines if l.startswith(("link ", "lab up", "runner"))],
           "other_stderr": [l for l in err_lines
                            if not l.startswith(("link ", "lab up", "runner"))][-20:]}
    if sub and cond == "outage" and lab_up_ns[0]:
        end_ns = lab_up_ns[0] + int(OUTAGE[1] * 1e9)
        res["recovery_s"] = recovery(sub.get("rx_ns", []), end_ns)
        rx = sub.get("rx_ns", [])
        start_ns = lab_up_ns[0] + int(OUTAGE[0] * 1e9)
        res["rx_before_outage"] = sum(1 for t in rx if t < start_ns)
        res["rx_during_outage"] = sum(1 for t in rx if start_ns <= t < end_ns)
        res["rx_after_outage"] = sum(1 for t in rx if t >= end_ns)
        sub.pop("rx_ns", None)
        sub.pop("rx_seq", None)
    res["loadavg"] = open("/proc/loadavg").read().split()[:3]
    cleanup()
    return res


def fmt(v, nd=1):
    return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))


def table(cells):
    rows = ["| condition | payload | received/sent | rate (Hz) | mean latency (ms) | jitter (ms) "
            "| p50 / max latency (ms) | writes failed | sub exit | recovery after outage (s) |",
            "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|"]
    for c in cells:
        s, p = c["sub"] or {}, c["pub"] or {}
        failed = (p.get("attempted", 0) - p.get("written", 0)) if p else None
        if c["sub"] is None:
            recv = f"no result/{c['count']}"
        else:
            recv = f"{s['received']}/{c['count']}"
        rows.append(
            f"| {c['condition']} | {c['size_kb']} KB | {recv} | {fmt(s.get('hz'), 2)} "
            f"| {fmt(s.get('lat_ms'))} | {fmt(s.get('jitter_ms'))} "
            f"| {fmt(s.get('p50_ms'))} / {fmt(s.get('max_ms'))} "
            f"| {fmt(failed) if p else 'pub: ' + ('none' if not c['pub'] else '?')} "
            f"| {s.get('exit', '-')} | {fmt(c.get('recovery_s'), 2) if c['condition'] == 'outage' else '-'} |")
    out = "\n".join(rows) + "\n"
    oc = [c for c in cells if c["condition"] == "outage"]
    if oc:
        out += ("\nOutage cells in detail (times from the lab's link start; the pub's "
                "matched-reader count over time, from the pub's own start):\n\n"
                "| payload | written / attempted | received before 8 s | during 8-28 s | after 28 s "
                "| recovery (s) | pub: (t s, matched readers) |\n|---:|---:|---:|---:|---:|---:|---|\n")
        for c in oc:
            p = c["pub"] or {}
            out += (f"| {c['size_kb']} KB | {p.get('written')}/{p.get('attempted')} "
                    f"| {c.get('rx_before_outage')} | {c.get('rx_during_outage')} "
                    f"| {c.get('rx_after_outage')} | {fmt(c.get('recovery_s'), 2)} "
                    f"| {p.get('matched_readers_t_s')} |\n")
    return out


def the_grid(args):
    """(cells, count, outage count) from the run's arguments."""
    sizes = args.sizes or ([64, 512] if args.quick else [32, 64, 128, 256, 512])
    conds = args.conditions or (["ideal", "loss20"] if args.quick else
                                ["ideal", "loss1", "loss20", "outage"])
    if args.quick and not args.sizes and not args.conditions:
        grid = [("ideal", 64), ("loss20", 512)]
    else:
        grid = [(c, kb) for c in conds for kb in sizes]
    count = args.count or (60 if args.quick else 300)
    for c, _ in grid:
        if c not in CONDS:
            sys.exit(f"unknown condition {c}")
    return grid, count, args.outage_count or count


def role_run(args):
    import importlib.metadata as md
    grid, count, ocount = the_grid(args)
    if subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout.count("flrun"):
        cleanup()
    started = datetime.datetime.now(datetime.timezone.utc)
    cells = []
    for cond, kb in grid:
        n = ocount if cond == "outage" else count
        t = time.monotonic()
        r = run_cell(cond, kb, n, args.system, args.profile)
        s = r["sub"] or {}
        print(f"{cond:>7} {kb:>4} KB: recv {s.get('received')}/{n} hz {s.get('hz')} "
              f"lat {s.get('lat_ms')} jit {s.get('jitter_ms')} exit {s.get('exit')} "
              f"pub {json.dumps(r['pub'])} ({time.monotonic() - t:.0f} s, load {r['loadavg'][0]})",
              file=sys.stderr, flush=True)
        cells.append(r)
    md_text = table(cells)
    print(md_text)
    if args.out:
        ver = md.version("cyclonedds")
        cmdline = "python3 " + " ".join(shlex.quote(a) for a in
                                        [os.path.relpath(SCRIPT, "/work/main")] + sys.argv[1:])
        meta = {
            "command": cmdline, "date_utc": started.isoformat(timespec="seconds"),
            "cyclonedds_python": ver, "count": count, "outage_count": ocount,
            "config": open(IFACE_XML).read().strip(),
            "qos": "Reliability.Reliable(max_blocking_time=100 ms), History.KeepAll; all else default",
            "link": "ferry-lab --preset wifi: 300 Mbit/s, 2 ms +- 1 ms one way, 50 ms queue, "
                    "loss applied in both directions; outage 8..28 s after link start",
        }
        with open(args.out + ".json", "w") as f:
            json.dump({"meta": meta, "cells": cells}, f, indent=1)
        with open(args.out + ".md", "w") as f:
            f.write(f"# Cyclone DDS on the ferry lab: seed 001 Table II peer row\n\n"
                    f"- command: `cd /work/main && {cmdline}`\n"
                    f"- date (UTC): {meta['date_utc']}\n"
                    f"- cyclonedds (PyPI, bundles the C library): {ver}\n"
                    f"- configuration: Cyclone's DEFAULT configuration apart from pinning the "
                    f"network interface: `CYCLONEDDS_URI` = `{meta['config']}`\n"
                    f"- QoS: {meta['qos']}\n"
                    f"- link: {meta['link']}\n"
                    f"- {count} messages per cell at 30 Hz"
                    + (f" ({ocount} in the outage cells)" if ocount != count else "")
                    + "; 1 KB = 1000 B.\n"
                    "- columns: received/sent = samples the subscriber got / samples the "
                    "publisher tried to write; rate = (received-1)/(t_last-t_first) at the "
                    "subscriber; latency = receive time - send time carried in the payload "
                    "(shared clock), mean and std dev (jitter); writes failed = write() calls "
                    "that returned DDS_RETCODE_TIMEOUT (history full for max_blocking_time); "
                    "sub exit = count (all arrived), idle (15 s without a sample while the "
                    "link was up) or deadline; recovery = seconds after the link returns until "
                    "30 consecutive samples arrive within 1 s (as in ferry-wireless).\n\n")
            f.write(md_text)
    cleanup()


def main():
    global HZ
    ap = argparse.ArgumentParser()
    sp = ap.add_subparsers(dest="role", required=True)
    p = sp.add_parser("pub")
    p.add_argument("size", type=int)
    p.add_argument("count", type=int)
    p.add_argument("--hz", type=float, default=HZ)
    p.add_argument("--depth", type=int, default=0)
    s = sp.add_parser("sub")
    s.add_argument("count", type=int)
    s.add_argument("--hz", type=float, default=HZ)
    s.add_argument("--outage-end-ns", type=int, default=0)
    s.add_argument("--ros2", action="store_true")
    r = sp.add_parser("run")
    r.add_argument("--quick", action="store_true")
    r.add_argument("--count", type=int)
    r.add_argument("--outage-count", type=int)
    r.add_argument("--sizes", type=lambda x: [int(v) for v in x.split(",")])
    r.add_argument("--conditions", type=lambda x: x.split(","))
    r.add_argument("--out")
    r.add_argument("--system", choices=["cyclone", "ferry-dds"], default="cyclone")
    r.add_argument("--profile", choices=["default", "tune"], default="default")
    a = ap.parse_args()
    if a.role in ("pub", "sub"):
        # Other rates than Table II's 30 Hz (bench/grid.py); deadlines follow.
        HZ = a.hz
    if a.role == "pub":
        role_pub(a.size, a.count, a.depth)
    elif a.role == "sub":
        role_sub(a.count, a.outage_end_ns, a.ros2)
    else:
        role_run(a)


if __name__ == "__main__":
    main()
