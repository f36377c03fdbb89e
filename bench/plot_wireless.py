#!/usr/bin/env python3
"""bench/results/wireless.json (+ cyclone_table2.json) -> wireless.png and wireless.md:
seed 001 Table II, ferry beside the paper's optimized profile and Cyclone DDS."""
import json, pathlib, datetime
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt

R = pathlib.Path(__file__).parent / "results"
SIZES = [32, 64, 128, 256, 512]
CONDS = ["ideal", "loss1", "loss20", "outage"]
TITLES = {"ideal": "ideal link", "loss1": "1 % loss both ways", "loss20": "20 % loss both ways", "outage": "20 s outage"}
# Seed 001, Table II, "Optimized DDS Profile" (rate Hz, avg latency ms, jitter ms).
PAPER = {
    "ideal": ([30.08, 30.08, 30.08, 30.07, 28.89], [4.59, 6.30, 7.69, 12.78, 56.25], [1.59, 2.19, 3.42, 2.39, 109.32]),
    "loss1": ([30.08, 30.05, 30.02, 29.99, 21.86], [7.77, 11.49, 14.71, 29.50, 477.56], [7.00, 8.35, 7.03, 18.18, 358.16]),
    "loss20": ([30.10, 30.07, 30.03, 30.04, 12.91], [2.27, 14.79, 22.24, 44.25, 1300.60], [8.33, 10.13, 10.13, 19.47, 701.73]),
    "outage": ([26.81, 24.22, 25.01, 24.20, 10.57], [14.61, 20.12, 26.58, 33.82, 306.38], [53.41, 51.86, 21.85, 20.69, 266.84]),
}

def load(name):
    p = R / name
    if not p.exists():
        return []
    d = json.loads(p.read_text())
    return d["cells"] if isinstance(d, dict) else d

ferry = {(c["condition"], c["size_kb"]): c["result"] for c in load("wireless.json")}
cyc = {(c["condition"], c["size_kb"]): c for c in load("cyclone_table2.json")}

def cyc_val(cond, kb, key):
    c = cyc.get((cond, kb))
    if not c:
        return None
    if key in c:
        return c[key]
    r = c.get("result") or c.get("sub") or {}
    return r.get(key)

fig, axes = plt.subplots(2, 4, figsize=(16, 7), sharex=True)
for i, cond in enumerate(CONDS):
    fr = [ferry.get((cond, s), {}).get("hz") for s in SIZES]
    fl = [ferry.get((cond, s), {}).get("lat_ms") for s in SIZES]
    cr = [cyc_val(cond, s, "hz") for s in SIZES]
    cl = [cyc_val(cond, s, "lat_ms") for s in SIZES]
    ax = axes[0][i]
    ax.plot(SIZES, fr, "o-", label="ferry")
    ax.plot(SIZES, PAPER[cond][0], "s--", label="paper: optimized DDS")
    if any(v is not None for v in cr):
        ax.plot(SIZES, [v if v is not None else float("nan") for v in cr], "^:", label="Cyclone DDS default")
    ax.set_title(TITLES[cond]); ax.set_ylim(0, 32); ax.set_xscale("log", base=2)
    if i == 0:
        ax.set_ylabel("reception rate (Hz)")
    ax = axes[1][i]
    ax.plot(SIZES, fl, "o-"); ax.plot(SIZES, PAPER[cond][1], "s--")
    if any(v is not None for v in cl):
        ax.plot(SIZES, [v if v is not None else float("nan") for v in cl], "^:")
    ax.set_yscale("log"); ax.set_xscale("log", base=2); ax.set_xticks(SIZES, [str(s) for s in SIZES])
    ax.set_xlabel("payload (KB)")
    if i == 0:
        ax.set_ylabel("mean latency (ms, log)")
axes[0][0].legend(fontsize=8)
fig.suptitle("Seed 001 Table II on the ferry lab: 30 Hz, reliable, 300 Mbit/s, 2 ± 1 ms")
fig.tight_layout()
fig.savefig(R / "wireless.png", dpi=110)

md = [
    "# Seed 001 Table II on the lab: ferry beside the paper's optimized profile",
    "",
    "Command (root): `bash bench/table2.sh` — ferry (`ferry-wireless run`), ferry's outage row with",
    "`udp_history_mb = 200`, and Cyclone DDS (`bench/cyclone_table2.py run --count 1000`) back to back in one",
    f"run on the same emulated link, then this file and the plot. Rendered {datetime.date.today()} on a 2-vCPU KVM guest.",
    "Link: the lab's wifi preset (TUN emulator between two namespaces that are two hosts:",
    "separate network, IPC and /dev/shm), 300 Mbit/s, 2 ± 1 ms one way, in order, loss applied in both",
    "directions, outage 8–28 s after link start. 1000 messages per cell at 30 Hz; payload 1 KB = 1000 B.",
    "ferry: UDP path chosen automatically, reliable + keep_all with the history bounded to one second of",
    "the link (the paper's N_HC, in bytes), publisher retries a blocked publish (strict reliability, as the",
    "paper's RELIABLE + KEEP_ALL). Rate = (received − 1) / span; latency = receive − source time; jitter = std dev.",
    "Paper = seed 001 Table II, Optimized DDS Profile (real 802.11ac). Cyclone = Cyclone DDS 11 (PyPI `cyclonedds`)",
    "with its default configuration, RELIABLE + KEEP_ALL, 1000 messages per cell (details: `cyclone_table2.md`).",
    "",
    "![plot](wireless.png)",
    "",
    "| condition | payload | ferry received | ferry Hz | paper Hz | Cyclone Hz | ferry latency ms | paper latency ms | Cyclone latency ms | ferry jitter ms | paper jitter ms | Cyclone jitter ms | ferry recovery after outage (s) | Cyclone recovery (s) |",
    "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
]
for cond in CONDS:
    for j, s in enumerate(SIZES):
        r = ferry.get((cond, s), {})
        rec = r.get("recovery_s")
        crec = cyc_val(cond, s, "recovery_s")
        md.append(f"| {cond} | {s} KB | {r.get('received')}/1000 | {r.get('hz')} | {PAPER[cond][0][j]} | {cyc_val(cond, s, 'hz')} "
                  f"| {r.get('lat_ms')} | {PAPER[cond][1][j]} | {cyc_val(cond, s, 'lat_ms')} "
                  f"| {r.get('jitter_ms')} | {PAPER[cond][2][j]} | {cyc_val(cond, s, 'jitter_ms')} "
                  f"| {rec if rec is not None else '-'} | {crec if crec is not None else '-'} |")
hist = {c["size_kb"]: c["result"] for c in load("wireless-outage-history200.json")}
rerun = {c["size_kb"]: c["result"] for c in load("wireless-loss20-rerun.json")}
if hist:
    md += ["", "ferry's outage row again with `udp_history_mb = 200` (a history that holds the whole 20 s outage, so",
           "the keep_all writer never blocks), same run:", "",
           "| payload | received | Hz | paper Hz | mean latency ms | recovery after outage (s) |",
           "|---:|---:|---:|---:|---:|---:|"]
    for j, s_ in enumerate(SIZES):
        r = hist.get(s_, {})
        md.append(f"| {s_} KB | {r.get('received')}/1000 | {r.get('hz')} | {PAPER['outage'][0][j]} | {r.get('lat_ms')} | {r.get('recovery_s')} |")
if rerun:
    md += ["", "ferry's 20 % loss row re-run alone right after (`ferry-wireless run --conditions loss20`,",
           "`wireless-loss20-rerun.md`): in the run above a `cargo fetch` (crate download and unpacking) shared the",
           "2 vCPUs with the userspace link emulator during the 256 KB and 512 KB cells; undisturbed:", "",
           "| payload | received | Hz | mean latency ms | jitter ms | paper latency ms |", "|---:|---:|---:|---:|---:|---:|"]
    for j, s_ in enumerate(SIZES):
        r = rerun.get(s_, {})
        md.append(f"| {s_} KB | {r.get('received')}/1000 | {r.get('hz')} | {r.get('lat_ms')} | {r.get('jitter_ms')} | {PAPER['loss20'][1][j]} |")
md += [
    "",
    "Reading it:",
    "- Ideal, 1 % and 20 % loss: every ferry cell delivers 1000/1000 at 30 Hz. At 512 KB ferry keeps 30 Hz where",
    "  the paper's optimized profile drops to 21.9 Hz (1 %) and 12.9 Hz (20 %) and Cyclone's default to",
    "  15.5 Hz and 1.7 Hz; ferry's mean latency there is 23 ms (1 %) and 26 ms (20 %, undisturbed re-run)",
    "  against the paper's 478 ms / 1301 ms and Cyclone's 111 ms / 639 ms.",
    "- The disturbed 20 % / 512 KB cell (294 ms, jitter 276 ms, still 1000/1000 at 30 Hz) shows what CPU",
    "  contention on this 2-vCPU host does to the emulated link plus both endpoints: it is reported, not",
    "  hidden; the re-run is the figure for the target (≤ 100 ms).",
    "- 20 % loss: forward error correction (Reed-Solomon recovery shards sized to the loss the reader reports)",
    "  rebuilds most samples without a repair round trip: 5–15 ms mean latency at 32–256 KB, below the",
    "  paper's at 64 KB and up (`fec.md`: without FEC the same cells took 26–33 ms). Only the paper's",
    "  2.27 ms at 32 KB stays below ferry's; it is below the paper's own ideal-link 4.59 ms and below this",
    "  link's 4.5 ms RTT, so no protocol that repairs a 20 %-lossy 22-fragment sample can match it here.",
    "- Outage: ferry loses nothing (the writer blocks once one second of link is queued, as RELIABLE +",
    "  KEEP_ALL does) and is back at 30 Hz 0.03–0.11 s after the link returns; Cyclone needs 4.3–4.4 s and",
    "  loses every sample written during the outage (about 270 of 1000 received at every size). ferry's mean",
    "  latency is high *because* the samples queued during the outage are delivered (up to 20 s old);",
    "  Cyclone's is low because it dropped them. With the default history ferry's rate is below the paper's",
    "  at 64–256 KB (the span stretches by the time the writer was blocked); with `udp_history_mb = 200` it",
    "  is 30/30/30/29.x/24.x Hz, at or above the paper's 26.8/24.2/25.0/24.2/10.6 at every size.",
]
(R / "wireless.md").write_text("\n".join(md) + "\n")
print("wrote", R / "wireless.png", "and", R / "wireless.md")
