#!/usr/bin/env python3
"""Issue 24's fleet lab: robots reach a cloud subscriber only through a
Zenoh router, every process a ferry runtime with `[zenoh]` in a network
namespace of its own (`crates/ferry/examples/zenoh_fleet.rs`).

Namespaces `zf-r` (router, 10.81.0.1), `zf-c` (cloud, .2) and `zf-1`..
(robots, .11..) hang off one bridge in `zf-b`. Each robot publishes
telemetry (64 B, reliable, transient local: Zenoh's advanced publisher
keeps a cache of 1000) and a camera stream (best effort) for SECS
seconds; the cloud subscribes to all of them through the router (client
mode: no peer-to-peer shortcut). Two runs:

- steady: nothing happens;
- restart: the router is killed (-9) a third of the way in and started
  again 2 s later; reliable telemetry in the robots' caches must all
  arrive (recovered by the advanced subscriber), the camera loses what was
  sent during the outage.

Every robot also serves `/robotN/add` (AddTwoInts, a Zenoh queryable as
rmw_zenoh has it); the cloud calls them round-robin at 10 calls/s (2 s
timeout each) while the robots publish.

Measured per run: telemetry and camera delivered / sent, duplicates,
latency p50/p99, service calls answered and their round trip, CPU of the
router, the cloud and the mean robot (from /proc), written to bench/results/zenoh_fleet.{md,json} (+ .png with
matplotlib).

    python3 bench/zenoh_fleet.py [--quick] [--robots N] [--secs S]

--quick: 4 robots, 8 s per run (what CI runs); full: 20 and 50 robots, 20 s.
Needs root, iproute2 and the release example:
    cargo build --release -p ferry --features zenoh --example zenoh_fleet
"""

import argparse
import json
import os
import signal
import subprocess
import sys
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIN = os.path.join(ROOT, "target", "release", "examples", "zenoh_fleet")
RESULTS = os.path.join(ROOT, "bench", "results")
ROUTER = "10.81.0.1:7447"
TEL_HZ, CAM_BYTES, CAM_HZ = 50, 50_000, 5
TICK = os.sysconf("SC_CLK_TCK")


def sh(cmd, check=True):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True)
    if check and r.returncode != 0:
        raise RuntimeError("%s: %s" % (cmd, r.stderr.strip()))
    return r.stdout


def cleanup():
    for name in sh("ip netns list", check=False).split():
        if name.startswith("zf-"):
            sh("ip netns pids %s | xargs -r kill -9; ip netns del %s" % (name, name), check=False)


def lab(robots):
    cleanup()
    sh("ip netns add zf-b && ip -n zf-b link add br0 type bridge && ip -n zf-b link set br0 up")
    members = [("zf-r", 1), ("zf-c", 2)] + [("zf-%d" % i, 10 + i) for i in range(1, robots + 1)]
    for i, (ns, host) in enumerate(members):
        sh("ip netns add %s" % ns)
        sh("ip link add zv%d netns %s type veth peer name zb%d netns zf-b" % (i, ns, i))
        sh("ip -n zf-b link set zb%d master br0 && ip -n zf-b link set zb%d up" % (i, i))
        sh("ip -n %s link set lo up && ip -n %s addr add 10.81.0.%d/24 dev zv%d && "
           "ip -n %s link set zv%d up" % (ns, ns, host, i, ns, i))


class Proc:
    """A process in a namespace; its stdout lines are kept."""

    def __init__(self, ns, args):
        # ZF_LOGDIR=dir keeps every process's stderr (FERRY_LOG's output) in dir/<ns>.log.
        logdir = os.environ.get("ZF_LOGDIR")
        if logdir:
            err = open(os.path.join(logdir, "%s.log" % ns), "a")
        else:
            err = None if ns == "zf-c" else subprocess.DEVNULL
        self.p = subprocess.Popen(["ip", "netns", "exec", ns, BIN] + args,
                                  stdout=subprocess.PIPE, stderr=err, text=True)
        self.lines = []
        self.t = threading.Thread(target=self._read, daemon=True)
        self.t.start()

    def _read(self):
        for line in self.p.stdout:
            self.lines.append(line.strip())

    def wait_line(self, word, timeout):
        end = time.time() + timeout
        while time.time() < end:
            if any(word in l for l in self.lines):
                return True
            time.sleep(0.05)
        return False

    def cpu_s(self):
        try:
            with open("/proc/%d/stat" % self.p.pid) as f:
                parts = f.read().rsplit(")", 1)[1].split()
            return (int(parts[11]) + int(parts[12])) / TICK
        except OSError:
            return None

    def json(self):
        for l in reversed(self.lines):
            if l.startswith("{") and '"received"' in l or '"telemetry": ' in l and l.startswith("{"):
                try:
                    return json.loads(l)
                except ValueError:
                    pass
        return None

    def stop(self):
        if self.p.poll() is None:
            self.p.send_signal(signal.SIGKILL)
        self.p.wait()


def run(robots, secs, restart):
    lab(robots)
    settle = 3.0
    procs = []
    try:
        router = Proc("zf-r", ["router", ROUTER, str(secs + 60)])
        procs.append(router)
        if not router.wait_line("ready", 15):
            raise RuntimeError("the router did not start")
        cloud = Proc("zf-c", ["cloud", str(robots), ROUTER, "client", str(secs + settle + 6),
                              str(secs)])
        procs.append(cloud)
        if not cloud.wait_line("ready", 15):
            raise RuntimeError("the cloud did not start")
        bots = []
        for i in range(1, robots + 1):
            bots.append(Proc("zf-%d" % i, ["robot", str(i), ROUTER, "client", str(secs),
                                           str(TEL_HZ), str(CAM_BYTES), str(CAM_HZ)]))
        procs += bots
        time.sleep(settle)
        cpu0 = {id(p): p.cpu_s() or 0.0 for p in procs}
        t0 = time.time()
        router_cpu_before = 0.0
        if restart:
            time.sleep(secs / 3)
            router_cpu_before = (router.cpu_s() or 0.0) - cpu0[id(router)]
            router.stop()
            time.sleep(2.0)
            router = Proc("zf-r", ["router", ROUTER, str(secs + 60)])
            procs.append(router)
            cpu0[id(router)] = 0.0
        # Robots publish for SECS, then stay 3 s (recovery): CPU is read
        # while they all still run.
        time.sleep(max(0.0, t0 + secs - settle + 0.5 - time.time()))
        wall = time.time() - t0
        cpu = {id(p): (p.cpu_s() or 0.0) - cpu0.get(id(p), 0.0) for p in procs}
        for b in bots:
            b.p.wait(timeout=secs + 60)
        cloud.p.wait(timeout=secs + 60)
        sent = [b.json() for b in bots]
        got = cloud.json()
        if got is None or any(s is None for s in sent):
            raise RuntimeError("missing results: cloud %r robots %r" % (cloud.lines[-3:], sent))
        tel_sent = sum(s["telemetry"] for s in sent)
        cam_sent = sum(s["camera"] for s in sent)
        return {
            "robots": robots,
            "secs": secs,
            "restart": restart,
            "telemetry": dict(got["telemetry"], sent=tel_sent),
            "camera": dict(got["camera"], sent=cam_sent),
            "calls": got["calls"],
            "cpu_pct": {
                "router": round(100 * (cpu[id(router)] + router_cpu_before) / wall, 1),
                "cloud": round(100 * cpu[id(cloud)] / wall, 1),
                "robot_mean": round(100 * sum(cpu[id(b)] for b in bots) / len(bots) / wall, 1),
            },
            "wall_s": round(wall, 1),
        }
    finally:
        for p in procs:
            p.stop()
        logdir = os.environ.get("ZF_LOGDIR")
        if logdir:
            # The kernel's TCP counters per namespace, beside the logs.
            for ns in sh("ip netns list", check=False).split():
                if ns.startswith("zf-"):
                    with open(os.path.join(logdir, "%s.nstat" % ns), "w") as f:
                        f.write(sh("ip netns exec %s nstat -az" % ns, check=False))
        cleanup()


def pct(d):
    # Rounded down: 19997 of 20000 is 99.98 %, never "100.0 %".
    return int(10000.0 * d["received"] / d["sent"]) / 100.0 if d["sent"] else 0.0


def table(rows):
    out = ["| run | robots | telemetry delivered | dup | p50 / p99 ms | camera delivered | "
           "p50 / p99 ms | service calls answered | call p50 / p99 ms | router CPU | cloud CPU "
           "| robot CPU |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        t, c, u, k = r["telemetry"], r["camera"], r["cpu_pct"], r["calls"]
        out.append("| %s | %d | %d / %d (%.2f %%) | %d | %.1f / %.1f | %d / %d (%.2f %%) | %.1f / %.1f "
                   "| %d / %d | %.1f / %.1f | %.0f %% | %.0f %% | %.1f %% |" % (
                       "router restart" if r["restart"] else "steady", r["robots"],
                       t["received"], t["sent"], pct(t), t["duplicates"] + c["duplicates"],
                       t["p50_us"] / 1e3, t["p99_us"] / 1e3,
                       c["received"], c["sent"], pct(c), c["p50_us"] / 1e3, c["p99_us"] / 1e3,
                       k["ok"], k["ok"] + k["failed"], k["p50_us"] / 1e3, k["p99_us"] / 1e3,
                       u["router"], u["cloud"], u["robot_mean"]))
    return "\n".join(out)


def plot(rows, path):
    """Delivered share and p99 latency per run (needs matplotlib)."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    labels = ["%d robots\n%s" % (r["robots"], "restart" if r["restart"] else "steady") for r in rows]
    x = range(len(rows))
    fig, (a, b) = plt.subplots(1, 2, figsize=(10, 4))
    w = 0.38
    a.bar([i - w / 2 for i in x], [pct(r["telemetry"]) for r in rows], w, label="telemetry (reliable)")
    a.bar([i + w / 2 for i in x], [pct(r["camera"]) for r in rows], w, label="camera (best effort)")
    a.set_ylim(70, 101)
    a.set_ylabel("delivered %")
    a.set_xticks(list(x))
    a.set_xticklabels(labels, fontsize=8)
    a.legend(fontsize=8)
    b.bar(list(x), [r["cpu_pct"]["router"] for r in rows], 0.5, label="router")
    b.bar(list(x), [r["cpu_pct"]["cloud"] for r in rows], 0.25, label="cloud")
    b.set_ylabel("CPU % of one core")
    b.set_xticks(list(x))
    b.set_xticklabels(labels, fontsize=8)
    b.legend(fontsize=8)
    fig.suptitle("Fleet through a Zenoh router (ferry runtimes, bench/zenoh_fleet.py)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    return True


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--robots", type=int)
    ap.add_argument("--secs", type=float)
    a = ap.parse_args()
    fleets = [a.robots] if a.robots else ([4] if a.quick else [20, 50])
    secs = a.secs or (8.0 if a.quick else 20.0)
    if os.geteuid() != 0:
        sys.exit("zenoh_fleet.py needs root (network namespaces)")
    if not os.path.exists(BIN):
        sys.exit("build it first: cargo build --release -p ferry --features zenoh --example zenoh_fleet")
    rows = []
    for robots in fleets:
        for restart in (False, True):
            r = run(robots, secs, restart)
            print(json.dumps(r), flush=True)
            rows.append(r)
    md = table(rows)
    print(md)
    if a.quick:
        # CI's checks: everything arrived once in the steady run, and the
        # reliable telemetry survived the router restart.
        steady, again = rows
        ok = (steady["telemetry"]["received"] == steady["telemetry"]["sent"]
              and steady["telemetry"]["duplicates"] == 0
              and again["telemetry"]["received"] == again["telemetry"]["sent"])
        if not ok:
            sys.exit("zenoh_fleet --quick: telemetry lost or duplicated")
        # Every call of the steady run answered.
        k = steady["calls"]
        if k["ok"] == 0 or k["failed"] != 0:
            sys.exit("zenoh_fleet --quick: service calls failed: %r" % k)
        return
    os.makedirs(RESULTS, exist_ok=True)
    with open(os.path.join(RESULTS, "zenoh_fleet.json"), "w") as f:
        json.dump(rows, f, indent=1)
    plot(rows, os.path.join(RESULTS, "zenoh_fleet.png"))
    with open(os.path.join(RESULTS, "zenoh_fleet.md"), "w") as f:
        f.write("# Fleet through a Zenoh router (issue 24)\n\n"
                "`python3 bench/zenoh_fleet.py` (%s robots, %g s per run; telemetry %d Hz x 64 B "
                "reliable transient local, camera %d Hz x %d B best effort; every robot also serves "
                "`/robotN/add` (AddTwoInts) and the cloud calls them round-robin at 10 calls/s "
                "with a 2 s timeout; robots and cloud are Zenoh clients of a ferry router; veth, "
                "no delay).\n\n%s\n"
                % (" and ".join(map(str, fleets)), secs, TEL_HZ, CAM_HZ, CAM_BYTES, md))


if __name__ == "__main__":
    main()
