#!/usr/bin/env python3
"""What security costs (issue 22): signed discovery, TLS on TCP, AEAD on UDP;
bars from `ferry-sec-micro --out` JSON.  Usage: plot_security.py RESULT.json OUT.png"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

src, out = sys.argv[1:3]
data = json.load(open(src))
rows = data["domains"]
sizes = sorted({r["runtimes"] for r in rows})
fig, ax = plt.subplots(1, 5, figsize=(26, 3.8))
width = 0.38
for k, (key, title, unit) in enumerate([
    ("cpu_pct_of_core_per_runtime", "CPU per runtime at rest\n(% of one core)", "%"),
    ("bytes_per_s_per_runtime", "discovery bytes/s sent per runtime at rest", "B/s"),
]):
    a = ax[k]
    for j, signed in enumerate([False, True]):
        vals = [next(r[key] for r in rows if r["runtimes"] == n and r["signed"] == signed)
                for n in sizes]
        xs = [i + (j - 0.5) * width for i in range(len(sizes))]
        a.bar(xs, vals, width, label="signed" if signed else "plain",
              color="#2b7bba" if signed else "#bbbbbb")
        for x, v in zip(xs, vals):
            a.text(x, v, f"{v:.3g}", ha="center", va="bottom", fontsize=8)
    a.set_xticks(range(len(sizes)))
    a.set_xticklabels([f"{n} runtimes" for n in sizes])
    a.set_title(title, fontsize=10)
    a.legend(fontsize=8)
for k, (path, word) in enumerate([("tcp", "TLS on TCP"), ("udp", "AEAD on UDP"),
                                   ("mqtt", "MQTT: TLS + client certificates to Mosquitto")]):
    rows_p = data.get(path) or []
    if not rows_p:
        ax[2 + k].set_visible(False)
        continue
    a = ax[2 + k]
    labels = [(f"{r['size'] >> 20} MiB" if r["size"] >= 1 << 20 else
               f"{r['size'] >> 10} KiB" if r["size"] >= 1024 else f"{r['size']} B") for r in rows_p]
    prot = lambda r, key: r.get("protected_" + key, r.get("tls_" + key))  # noqa: E731
    rtt = [prot(r, "rtt_us")["p50"] / r["plain_rtt_us"]["p50"] for r in rows_p]
    tp = [(prot(r, "mb_s") / r["plain_mb_s"]) if r.get("plain_mb_s") else 0 for r in rows_p]
    xs = range(len(rows_p))
    a.bar([x - 0.2 for x in xs], rtt, 0.4, label="round trip p50 (protected / plain)", color="#d95f02")
    a.bar([x + 0.2 for x in xs], tp, 0.4, label="throughput (protected / plain)", color="#1b9e77")
    for x, v in zip(xs, rtt):
        a.text(x - 0.2, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    for x, v in zip(xs, tp):
        if v:
            a.text(x + 0.2, v, f"{v:.2f}", ha="center", va="bottom", fontsize=8)
    a.axhline(1.0, color="#888888", lw=0.8)
    a.set_xticks(list(xs))
    a.set_xticklabels(labels)
    a.set_title(f"{word} over loopback, relative to plain", fontsize=10)
    a.legend(fontsize=8)
m = data["micro"]
fig.suptitle(
    f"Ed25519: seal {m['seal_heartbeat_us']:.0f} µs, verify {m['parse_verify_heartbeat_us']:.0f} µs, "
    f"certificate check {m['check_certificate_us']:.0f} µs; heartbeat "
    f"{m['heartbeat_bytes'][0]} → {m['heartbeat_bytes'][1]} B", fontsize=10)
fig.tight_layout()
fig.savefig(out, dpi=110)
