"""How long a message takes to encode and decode in Python: ferry's pure-Python
codecs (compiled per class, ``ferry.idl``) against the Rust run-time codec
reached through PyO3 (``ferry._ferry.cdr_encode`` / ``cdr_decode``, ferry-idl),
on the same values, in one run.

    python3 bench/python/codec.py run [--quick] [--out PREFIX]

Messages: ``sensor_msgs/Image`` (640×480 rgb8, 900 KiB), ``sensor_msgs/
PointCloud2`` (1 MiB of points), a 100-field message (``bench_msgs/Hundred``,
written to a temporary FERRY_INTERFACE_PATH folder: 25 each of float64,
int32, string, uint8[]) and ``geometry_msgs/Twist``. Writes PREFIX.md,
PREFIX.json and PREFIX.png (default ``bench/results/python-codec``). Each
cell is the median of blocks of calls (time per call, µs); both paths
alternate block by block. The bytes of both paths are compared first: a
mismatch fails the run.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time


def hundred_msg():
    kinds = ["float64", "int32", "string", "uint8[]"]
    return "\n".join(f"{kinds[i % 4]} f{i:03d}" for i in range(100)) + "\n"


def setup_interfaces():
    d = tempfile.mkdtemp(prefix="ferry-codec-")
    os.makedirs(os.path.join(d, "bench_msgs", "msg"))
    with open(os.path.join(d, "bench_msgs", "msg", "Hundred.msg"), "w") as f:
        f.write(hundred_msg())
    os.environ["FERRY_INTERFACE_PATH"] = d
    return d


def values():
    import numpy as np

    import ferry.msgs as msgs
    from ferry.msgs.sensor_msgs import Image, PointCloud2, PointField
    from ferry.msgs.geometry_msgs import Twist, Vector3
    from ferry.msgs.std_msgs import Header

    rng = np.random.default_rng(3)
    h = Header(frame_id="camera")
    img = Image(header=h, height=480, width=640, encoding="rgb8", step=640 * 3,
                data=rng.integers(0, 255, 640 * 480 * 3, dtype=np.uint8))
    n = (1 << 20) // 16
    cloud = PointCloud2(header=h, height=1, width=n,
                        fields=[PointField(name=c, offset=4 * i, datatype=7, count=1)
                                for i, c in enumerate("xyz")] + [PointField("rgb", 12, 6, 1)],
                        point_step=16, row_step=16 * n,
                        data=rng.integers(0, 255, 16 * n, dtype=np.uint8), is_dense=True)
    Hundred = msgs.get("bench_msgs/msg/Hundred")
    kw = {}
    for i in range(100):
        kind = i % 4
        kw[f"f{i:03d}"] = [1.5 * i, -i, f"field {i}", bytes(range(i % 16))][kind]
    hundred = Hundred(**kw)
    twist = Twist(Vector3(1.0, 2.0, 3.0), Vector3(z=0.5))
    return [("Image 640x480 rgb8", "sensor_msgs/msg/Image", img),
            ("PointCloud2 1 MiB", "sensor_msgs/msg/PointCloud2", cloud),
            ("100 fields", "bench_msgs/msg/Hundred", hundred),
            ("Twist", "geometry_msgs/msg/Twist", twist)]


def per_call_us(fn, arg, calls):
    t0 = time.perf_counter_ns()
    for _ in range(calls):
        fn(arg)
    return (time.perf_counter_ns() - t0) / calls / 1e3


def measure(quick):
    from ferry import _ferry

    blocks = 5 if quick else 25
    out = []
    for label, full, m in values():
        cls = type(m)
        py_bytes = cls.encode(m)
        rs_bytes = _ferry.cdr_encode(full, m)
        if py_bytes != rs_bytes:
            sys.exit(f"codec: {label}: Python and Rust bytes differ")
        size = len(py_bytes)
        calls = max(1, min(2000, int(2e6 // max(size, 1)))) // (4 if quick else 1) or 1
        paths = {
            "python encode": (cls.encode, m),
            "pyo3 encode": (lambda v, full=full: _ferry.cdr_encode(full, v), m),
            "python decode": (cls.decode, py_bytes),
            "pyo3 decode": (lambda b, full=full: _ferry.cdr_decode(full, b), py_bytes),
        }
        times = {k: [] for k in paths}
        for _ in range(blocks):
            for k, (fn, arg) in paths.items():
                times[k].append(per_call_us(fn, arg, calls))
        cell = {"label": label, "type": full, "bytes": size, "calls_per_block": calls,
                "blocks": blocks}
        for k, ts in times.items():
            cell[k] = statistics.median(ts)
        out.append(cell)
        print(f"codec: {label:20s} {size:>9d} B  enc py {cell['python encode']:9.1f} µs "
              f"pyo3 {cell['pyo3 encode']:9.1f} µs | dec py {cell['python decode']:9.1f} µs "
              f"pyo3 {cell['pyo3 decode']:9.1f} µs", flush=True)
    return out


def write(prefix, doc):
    with open(prefix + ".json", "w") as f:
        json.dump(doc, f, indent=1)
    m = doc["meta"]
    lines = [f"# Python message codecs: pure Python vs Rust through PyO3"
             f"{' (--quick)' if m['quick'] else ''}", "",
             f"{m['date']} on {m['host']} ({m['cpus']} CPUs); ferry commit `{m['commit']}`; "
             f"Python {m['python']}.", "",
             "Median µs per call over blocks that alternate between the paths. Python: the "
             "codec `ferry.idl` compiles per class (numeric sequences decode as numpy views "
             "of the input). PyO3: ferry-idl's run-time codec (`_ferry.cdr_encode` from the "
             "message object, `_ferry.cdr_decode` to nested dicts — no class instances, "
             "which flatters it). Both produce the same bytes (checked first).", "",
             "| message | bytes | encode Python | encode PyO3 | PyO3/Python | decode Python "
             "| decode PyO3 | PyO3/Python |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for c in doc["results"]:
        e, d = c["pyo3 encode"] / c["python encode"], c["pyo3 decode"] / c["python decode"]
        lines.append(f"| {c['label']} | {c['bytes']} | {c['python encode']:.1f} | "
                     f"{c['pyo3 encode']:.1f} | {e:.2f}× | {c['python decode']:.1f} | "
                     f"{c['pyo3 decode']:.1f} | {d:.2f}× |")
    faster = sum(c["python encode"] <= c["pyo3 encode"] and c["python decode"] <= c["pyo3 decode"]
                 for c in doc["results"])
    lines += ["", f"Python is as fast or faster in both directions for {faster} of "
              f"{len(doc['results'])} messages: ferry keeps the Python codecs "
              "(ratios > 1 mean PyO3 is slower). Where PyO3 decodes faster it builds dicts, "
              "where Python builds the message's dataclass instance (100 `__init__` "
              "arguments); a class instance from PyO3 would cost that too.", ""]
    with open(prefix + ".md", "w") as f:
        f.write("\n".join(lines))
    try:
        import matplotlib
    except ImportError:
        print(f"codec: no matplotlib, {prefix}.png not drawn (bash scripts/bench-python-setup.sh)")
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    labels = [c["label"] for c in doc["results"]]
    for ax, what in zip(axes, ("encode", "decode")):
        xs = range(len(labels))
        ax.bar([x - 0.2 for x in xs], [c[f"python {what}"] for c in doc["results"]], 0.4,
               label="Python")
        ax.bar([x + 0.2 for x in xs], [c[f"pyo3 {what}"] for c in doc["results"]], 0.4,
               label="Rust via PyO3")
        ax.set_xticks(list(xs), labels, rotation=20, fontsize=8)
        ax.set_yscale("log")
        ax.set_ylabel("µs per call")
        ax.set_title(what)
        ax.legend()
    fig.tight_layout()
    fig.savefig(prefix + ".png", dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    run = sub.add_parser("run", help="measure and write PREFIX.md/.json/.png")
    run.add_argument("--quick", action="store_true", help="fewer blocks and calls (CI)")
    run.add_argument("--out", default="bench/results/python-codec")
    a = ap.parse_args()
    setup_interfaces()
    t0 = time.time()
    results = measure(a.quick)
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                                text=True, check=False).stdout.strip()
    except OSError:
        commit = "?"
    doc = {"meta": {"date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                    "host": platform.node(), "cpus": os.cpu_count(), "commit": commit,
                    "python": platform.python_version(), "quick": a.quick},
           "results": results}
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    write(a.out, doc)
    print(f"codec: wrote {a.out}.md .json .png in {time.time() - t0:.1f} s")


if __name__ == "__main__":
    main()
