#!/usr/bin/env python3
"""pyrtt: Python publish -> Python callback latency, ferry beside Cyclone DDS and Zenoh.

Ping-pong between TWO Python processes on one host. The parent (`run`) is the
ping side of every implementation in-process; for each payload size it starts
one `pong` child per implementation, all alive at once, and interleaves blocks
of round trips across implementations (rotating order) so machine noise hits
them equally. Reported: RTT and one-way = RTT/2 (publish -> callback).

    python3 bench/python/pyrtt.py run --quick            # 200 RTs per cell, < 60 s
    python3 bench/python/pyrtt.py run                    # 5000 RTs per cell
    python3 bench/python/pyrtt.py run --impl cyclonedds,zenoh --sizes 64,1048576
    python3 bench/python/pyrtt.py run --rust-pong PATH   # + ferry Python ping -> Rust pong
    python3 bench/python/pyrtt.py report bench/results/python   # re-render .md/.png from .json

Payload: a bytes object of S bytes whose first 8 bytes are a little-endian
sequence number; the pong echoes what its callback received; the ping's
receive side extracts (sequence, length) and ignores stale replies.

Rust pong contract (`--rust-pong PATH`): the parent runs
`PATH pong --size S --ping-topic T1 --pong-topic T2` with FERRY_DOMAIN_ID and
FERRY_DISCOVERY in its environment; it must echo every T1 sample on T2, print
one line `ready` on stdout once its publisher and subscriber exist, and exit
when its stdin closes.
"""
import argparse
import contextlib
import fcntl
import gc
import json
import os
import platform
import select
import signal
import socket
import subprocess
import sys
import threading
import time

from pyrtt_report import RUST, summarize, versions, write_md, write_png

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CHILD_MAX_SECS = 3600          # a pong child never outlives this, whatever happens
READY_TIMEOUT = 30.0           # child start-up (imports, participant creation)
MATCH_TIMEOUT = 10.0           # first reply after discovery/matching
REPLY_TIMEOUT = 1.0            # one round trip; a miss counts as lost
CYCLONE_DOMAIN = 77
FERRY_DOMAIN = "152"
CYCLONE_URI = ('<CycloneDDS><Domain id="any"><General><Interfaces>'
               '<NetworkInterface name="lo" multicast="true"/></Interfaces></General>'
               '</Domain></CycloneDDS>')
# tcp: a no-middleware reference; zenoh is pinned to TCP (its shared memory off), zenoh-shm is
# Zenoh's default (shared memory for large payloads between processes of one host).
ALL_IMPLS = ("ferry", "ferry-tcp", "rust", "cyclonedds", "zenoh", "zenoh-shm", "tcp")
PY_PEER = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                       "target", "release", "examples", "py_peer")   # cargo build --release -p ferry --example py_peer


# --------------------------------------------------------------------------- adapters
class Adapter:
    """Common interface. `open(role, size)` sets up; for role "pong" the library
    echoes "ping" -> "pong" by itself (callback) or inside `pump()`. The ping side
    uses `send(payload)` and `recv(timeout) -> (seq, length) | None`."""
    name = "?"

    def __init__(self, ping_topic=None, pong_topic=None, port=None):
        """Topics default to the adapter's own; `port` is used by zenoh only."""
        self.ping_topic, self.pong_topic, self.port = ping_topic, pong_topic, port

    def open(self, role, size):
        """Create entities for `role` ("ping" or "pong") and payloads of `size` bytes."""
        raise NotImplementedError

    def send(self, payload):
        """Publish one payload (bytes) on the ping topic."""
        raise NotImplementedError

    def recv(self, timeout):
        """Wait up to `timeout` s for one reply; return (seq, length) or None."""
        raise NotImplementedError

    def pump(self, stop, until):
        """Pong side: let the library deliver callbacks until `stop` is set or `until`."""
        while not stop.is_set() and time.monotonic() < until:
            stop.wait(0.5)

    def close(self):
        """Release the library's entities."""

    @staticmethod
    def seq_of(buf):
        """(sequence number, length) of a received buffer (bytes, memoryview, ndarray)."""
        return int.from_bytes(bytes(buf[:8]), "little"), len(buf)


class CycloneAdapter(Adapter):
    """Cyclone DDS (PyPI `cyclonedds`): an IdlStruct with one `octet data[size]`
    field (`bytes` in Python; a `bytes` field has no XTypes type object, and
    `sequence[uint8]` maps to a list of ints: PYRTT_CYCLONE_TYPE=sequence),
    reliable keep-last 1. Both sides block in a WaitSet (GIL released) and
    take/write on their main thread (a listener echo measured slower)."""
    name = "cyclonedds"

    def open(self, role, size):
        from dataclasses import dataclass
        from cyclonedds.core import Policy, Qos, ReadCondition, SampleState, ViewState, \
            InstanceState, WaitSet
        from cyclonedds.domain import DomainParticipant
        from cyclonedds.idl import IdlStruct
        from cyclonedds.idl.types import array, sequence, uint8
        from cyclonedds.pub import DataWriter
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic
        from cyclonedds.util import duration

        if os.environ.get("PYRTT_CYCLONE_TYPE", "array") == "sequence":
            @dataclass      # sequence<octet>: the binding (de)serializes a list of ints
            class Blob(IdlStruct, typename="pyrtt::BlobSeq"):
                data: sequence[uint8]
        else:
            @dataclass      # octet data[size]: bytes in, bytes out (the binding's fast path)
            class Blob(IdlStruct, typename=f"pyrtt::Blob{size}"):
                data: array[uint8, size]

        qos = Qos(Policy.Reliability.Reliable(duration(seconds=1)), Policy.History.KeepLast(1))
        self.dp = DomainParticipant(CYCLONE_DOMAIN)
        t_ping = Topic(self.dp, self.ping_topic or "pyrtt_ping", Blob, qos=qos)
        t_pong = Topic(self.dp, self.pong_topic or "pyrtt_pong", Blob, qos=qos)
        self.Blob = Blob
        out_t, in_t = (t_pong, t_ping) if role == "pong" else (t_ping, t_pong)
        self.writer = DataWriter(self.dp, out_t, qos=qos)
        self.reader = DataReader(self.dp, in_t, qos=qos)
        self.cond = ReadCondition(self.reader, SampleState.Any | ViewState.Any | InstanceState.Any)
        self.ws = WaitSet(self.dp)
        self.ws.attach(self.cond)

    def pump(self, stop, until):
        """Pong: wait in the WaitSet, take, write back (faster than a listener here)."""
        while not stop.is_set() and time.monotonic() < until:
            self.ws.wait(200_000_000)
            for s in self.reader.take(N=16, condition=self.cond):
                if s.sample_info.valid_data:
                    self.writer.write(s)

    def send(self, payload):
        self.writer.write(self.Blob(data=payload))

    def recv(self, timeout):
        deadline = time.monotonic() + timeout
        while True:
            for s in self.reader.take(N=16, condition=self.cond):
                if s.sample_info.valid_data:
                    return self.seq_of(s.data)
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.ws.wait(int(left * 1e9))

    def close(self):
        self.dp = self.reader = self.writer = None
        gc.collect()


class ZenohAdapter(Adapter):
    """Zenoh (PyPI `eclipse-zenoh`): peer mode over TCP on 127.0.0.1 with an
    explicit endpoint (pong listens, ping connects), multicast scouting and
    gossip off, publisher express + CongestionControl.BLOCK. The pong
    republishes the received ZBytes as is from the subscriber callback (Zenoh's
    thread); the ping blocks in the default FIFO handler's recv() (GIL released,
    faster than callback -> queue). recv() has no timeout, so a watchdog thread
    puts an empty wake-up sample on the reply key once a wait is overdue.
    Zenoh's shared memory is off here (`transport.shared_memory.enabled`),
    so this is the TCP path that `ferry-tcp` is compared with: since Zenoh
    1.x it otherwise moves large payloads between local processes through
    shared memory (`zenoh-shm`)."""
    name = "zenoh"
    shm = False

    def open(self, role, size):
        import zenoh
        ep = f"tcp/127.0.0.1:{self.port}"
        conf = {"mode": "peer", "scouting": {"multicast": {"enabled": False}, "gossip": {"enabled": False}},
                "listen": {"endpoints": [ep] if role == "pong" else []},
                "connect": {"endpoints": [ep] if role == "ping" else []},
                "transport": {"shared_memory": {"enabled": self.shm}}}
        self.session = zenoh.open(zenoh.Config.from_json5(json.dumps(conf)))
        ping_key, pong_key = self.ping_topic or "pyrtt/ping", self.pong_topic or "pyrtt/pong"
        out_key, self.in_key = (pong_key, ping_key) if role == "pong" else (ping_key, pong_key)
        self.pub = self.session.declare_publisher(out_key, express=True,
                                                  congestion_control=zenoh.CongestionControl.BLOCK)
        if role == "pong":
            put = self.pub.put
            self.sub = self.session.declare_subscriber(self.in_key, lambda s: put(s.payload))
        else:
            self.sub = self.session.declare_subscriber(self.in_key)      # FIFO channel
            self.deadline, self.closed = None, threading.Event()
            threading.Thread(target=self._watchdog, daemon=True).start()

    def _watchdog(self):
        """Unblock a recv() that has waited past its deadline (5 checks a second)."""
        while not self.closed.wait(0.2):
            d = self.deadline
            if d is not None and time.monotonic() > d:
                self.deadline = None
                self.session.put(self.in_key, b"")

    def send(self, payload):
        self.pub.put(payload)

    def recv(self, timeout):
        if timeout <= 0:
            s = self.sub.try_recv()
        else:
            self.deadline = time.monotonic() + timeout
            s = self.sub.recv()
            self.deadline = None
        if s is None:
            return None
        b = s.payload.to_bytes()
        return self.seq_of(b) if b else (-1, 0)      # (-1, 0): a wake-up, matches no sequence

    def close(self):
        if hasattr(self, "closed"):
            self.closed.set()
        with contextlib.suppress(Exception):
            self.sub.undeclare()
            self.pub.undeclare()
        self.session.close()


class FerryAdapter(Adapter):
    """ferry's Python bindings (rclpy-like). Callbacks run only inside
    `ferry.spin_once`, so both sides spin on their own thread. Sizes >=
    `ndarray_min` subscribe as np.ndarray (zero-copy uint8 view)."""
    name = "ferry"
    topics = ("/pyrtt/ping", "/pyrtt/pong")
    ndarray_min = 65536

    def open(self, role, size):
        import ferry
        import numpy as np
        if not hasattr(ferry, "Node"):
            raise RuntimeError(f"{ferry.__file__} is not ferry's Python package (no ferry.Node)")
        self.ferry = ferry
        self.echo_copies = False
        ping_t, pong_t = self.ping_topic or self.topics[0], self.pong_topic or self.topics[1]
        msg_type = np.ndarray if size >= self.ndarray_min else bytes
        self.msg_type = msg_type.__name__
        self.node = ferry.Node(f"pyrtt_{role}_{os.getpid()}")
        if role == "pong":
            self.pub = self.node.create_publisher(bytes, pong_t, self.qos())

            def echo(data):
                try:
                    self.pub.publish(data)
                except TypeError:       # publish() wants bytes: one copy of an ndarray view
                    self.echo_copies = True
                    self.pub.publish(bytes(data))
            self.sub = self.node.create_subscription(msg_type, ping_t, echo, self.qos())
        else:
            self.pub = self.node.create_publisher(bytes, ping_t, self.qos())
            self.reply = None

            def got(data):
                self.reply = self.seq_of(data)
            self.sub = self.node.create_subscription(msg_type, pong_t, got, self.qos())

    def qos(self):
        """QoS of both ports: ferry's default (reliable, keep_last 10)."""
        return 10

    def matched(self):
        """True once the ping publisher sees a subscription."""
        return self.pub.get_subscription_count() > 0

    def send(self, payload):
        self.pub.publish(payload)

    def recv(self, timeout):
        deadline = time.monotonic() + timeout
        while self.reply is None:
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            self.ferry.spin_once(self.node, timeout_sec=left)
        r, self.reply = self.reply, None
        return r

    def pump(self, stop, until):
        while not stop.is_set() and time.monotonic() < until:
            self.ferry.spin_once(self.node, timeout_sec=0.1)

    def close(self):
        self.node.destroy_node()


class FerryTcpAdapter(FerryAdapter):
    """ferry's Python bindings with both ports pinned to TCP (QoS
    `transport="tcp"`): the network path on loopback, like the peers'."""
    name = "ferry-tcp"
    topics = ("/pyrtt/tcp/ping", "/pyrtt/tcp/pong")

    def qos(self):
        return self.ferry.qos.QoSProfile(depth=10, transport="tcp")


class RustPingAdapter(Adapter):
    """The Rust path: a Rust ping process (`py_peer ping`) against a Rust
    pong (`py_peer pong`), driven block by block over stdin so it
    interleaves with the Python cells; it times its own round trips."""
    name = "rust"

    def open(self, role, size):
        self.proc = subprocess.Popen(
            [PY_PEER, "ping", "--size", str(size), "--ping-topic", self.ping_topic,
             "--pong-topic", self.pong_topic],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=dict(os.environ))
        if not select.select([self.proc.stdout], [], [], READY_TIMEOUT)[0] or \
                self.proc.stdout.readline().strip() != "ready":
            raise RuntimeError("rust ping not ready (no reply from its pong)")

    def block(self, n):
        """n round trips: RTTs in ns (None = lost)."""
        self.proc.stdin.write(f"{n}\n")
        self.proc.stdin.flush()
        if not select.select([self.proc.stdout], [], [], n * REPLY_TIMEOUT + 5)[0]:
            raise RuntimeError("rust ping stalled")
        return [None if x == "-" else int(x) for x in self.proc.stdout.readline().split()]

    def close(self):
        with contextlib.suppress(Exception):
            self.proc.stdin.close()
            self.proc.wait(3)
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


class TcpAdapter(Adapter):
    """Reference, no middleware: plain Python sockets, TCP on 127.0.0.1 with
    TCP_NODELAY, 4-byte length prefix, recv_into a preallocated buffer."""
    name = "tcp"

    def open(self, role, size):
        self.buf, self.sock = memoryview(bytearray(size + 4)), None
        if role == "pong":
            self.ls = socket.create_server(("127.0.0.1", self.port))
            self.ls.settimeout(0.2)
        else:
            self.sock = socket.create_connection(("127.0.0.1", self.port), timeout=MATCH_TIMEOUT)
            self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _read_frame(self):
        """One length-prefixed frame into buf; its length."""
        for off, end in ((0, 4), (4, None)):
            end = end or 4 + int.from_bytes(self.buf[:4], "little")
            while off < end:
                k = self.sock.recv_into(self.buf[off:end])
                if not k:
                    raise EOFError("tcp peer closed")
                off += k
        return end - 4

    def send(self, payload):
        self.sock.sendmsg([len(payload).to_bytes(4, "little"), payload])

    def recv(self, timeout):
        self.sock.settimeout(max(timeout, 0.001))   # a timeout inside a frame would be fatal; never seen
        try:
            n = self._read_frame()
        except socket.timeout:
            return None
        return self.seq_of(self.buf[4:4 + n])

    def pump(self, stop, until):
        while self.sock is None and not stop.is_set() and time.monotonic() < until:
            with contextlib.suppress(socket.timeout):
                self.sock = self.ls.accept()[0]       # blocking socket
                self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with contextlib.suppress(EOFError, OSError, AttributeError):
            while True:      # ends when the ping side closes its socket (or dies)
                n = self._read_frame()
                self.sock.sendall(self.buf[:4 + n])

    def close(self):
        for s in (self.sock, getattr(self, "ls", None)):
            if s:
                s.close()


class ZenohShmAdapter(ZenohAdapter):
    """Zenoh as it comes: shared memory on (its default), so large payloads
    between the two local processes skip TCP — the peer of ferry's own
    automatic path (`ferry`)."""
    name = "zenoh-shm"
    shm = True


ADAPTERS = {"ferry": FerryAdapter, "ferry-tcp": FerryTcpAdapter, "rust": RustPingAdapter,
            "cyclonedds": CycloneAdapter, "zenoh": ZenohAdapter, "zenoh-shm": ZenohShmAdapter,
            "tcp": TcpAdapter}
RUST_TOPICS = ("/pyrtt/rust/ping", "/pyrtt/rust/pong")


# --------------------------------------------------------------------------- pong role
def pong_main(args):
    """Child: open the pong side, print `ready`, echo until stdin closes."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)       # the parent ends us via stdin / SIGTERM
    ad = ADAPTERS[args.impl](args.ping_topic, args.pong_topic, args.port)
    ad.open("pong", args.size)
    stop = threading.Event()

    def lifeline():
        with contextlib.suppress(OSError):   # raw fd: no buffered-IO lock held at interpreter exit
            while os.read(0, 4096):          # b"" at EOF: the parent closed our stdin or died
                pass
        stop.set()
    threading.Thread(target=lifeline, daemon=True).start()
    print("ready", flush=True)
    try:
        ad.pump(stop, time.monotonic() + CHILD_MAX_SECS)
    finally:
        ad.close()
        # read by the parent after closing our stdin: how the echo was done
        print("stats " + json.dumps({"echo_copies": getattr(ad, "echo_copies", None),
                                     "msg_type": getattr(ad, "msg_type", None)}), flush=True)


# --------------------------------------------------------------------------- run role
def free_port():
    """A TCP port on 127.0.0.1 that is free right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def child_env(args):
    """Environment for the children (and this process): isolated domains, loopback."""
    env = dict(os.environ)
    env.setdefault("CYCLONEDDS_URI", CYCLONE_URI)
    env.setdefault("FERRY_DOMAIN_ID", FERRY_DOMAIN)
    env.setdefault("FERRY_DISCOVERY", "localhost")
    if args.zenoh_runtime:
        env["ZENOH_RUNTIME"] = args.zenoh_runtime
    return env


def spawn_pong(impl, size, args, env, children):
    """Start one pong child; return (proc, the not yet opened ping-side adapter)."""
    port = free_port() if impl in ("zenoh", "zenoh-shm", "tcp") else None
    if impl == "rust":
        topics = ("/pyrtt/rr/ping", "/pyrtt/rr/pong")
        cmd = [PY_PEER, "pong", "--size", str(size), "--ping-topic", topics[0], "--pong-topic", topics[1]]
        ad = RustPingAdapter(*topics)
    elif impl == RUST:
        cmd = [args.rust_pong, "pong", "--size", str(size), "--ping-topic", RUST_TOPICS[0],
               "--pong-topic", RUST_TOPICS[1]]
        ad = FerryAdapter(*RUST_TOPICS)
    else:
        cmd = [sys.executable, os.path.abspath(__file__), "pong", "--impl", impl, "--size", str(size)]
        if port:
            cmd += ["--port", str(port)]
        ad = ADAPTERS[impl](port=port)
    p = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    children.append(p)
    return p, ad


def wait_ready(procs):
    """Read each child's `ready` line, bounded by READY_TIMEOUT in total."""
    deadline = time.monotonic() + READY_TIMEOUT
    for impl, p in procs.items():
        line = b""
        while not line and time.monotonic() < deadline:
            if p.poll() is not None:
                raise RuntimeError(f"{impl} pong exited with code {p.returncode} before ready")
            if select.select([p.stdout.fileno()], [], [], 0.2)[0]:
                line = p.stdout.readline()
        if line.strip() != b"ready":
            raise RuntimeError(f"{impl} pong not ready within {READY_TIMEOUT:.0f} s (got {line!r})")


def remove_zenoh_leftovers(pids):
    """Zenoh leaves a `/dev/shm/<pid>.zenoh` file per process that used it:
    remove those of the processes this run started (and its own)."""
    for pid in pids:
        with contextlib.suppress(OSError):
            os.remove(f"/dev/shm/{pid}.zenoh")


def stop_children(children):
    """Close every child's stdin (life-line), then SIGTERM / SIGKILL stragglers by PID.
    Returns {pid: dict} from the `stats` lines of the children that exited by themselves."""
    for p in children:
        with contextlib.suppress(Exception):
            p.stdin.close()
    deadline, stats = time.monotonic() + 3, {}
    for p in children:
        with contextlib.suppress(subprocess.TimeoutExpired):
            p.wait(max(0.05, deadline - time.monotonic()))
        if p.poll() is not None:
            with contextlib.suppress(Exception):
                for line in p.stdout.read().decode().splitlines():
                    if line.startswith("stats "):
                        stats[p.pid] = json.loads(line[6:])
    for p in children:
        if p.poll() is None:
            p.terminate()
            with contextlib.suppress(subprocess.TimeoutExpired):
                p.wait(2)
        if p.poll() is None:
            p.kill()
            p.wait()
    remove_zenoh_leftovers([p.pid for p in children])
    children.clear()
    return stats


def round_trip(ad, payload, seq):
    """One timed round trip: RTT in ns, or None if no matching reply within REPLY_TIMEOUT."""
    t0 = time.perf_counter_ns()
    ad.send(payload)
    deadline = time.monotonic() + REPLY_TIMEOUT
    while True:
        r = ad.recv(max(0.0, deadline - time.monotonic()))
        if r is None:
            return None
        if r[0] == seq:
            t1 = time.perf_counter_ns()
            if r[1] != len(payload):
                raise RuntimeError(f"{ad.name}: reply of {r[1]} bytes, sent {len(payload)}")
            return t1 - t0


def make_payload(seq, body):
    """8-byte little-endian sequence number followed by `body`."""
    return seq.to_bytes(8, "little") + body


def wait_match(impl, ad, body):
    """Send until the first reply arrives (discovery/matching), at most MATCH_TIMEOUT s."""
    deadline = time.monotonic() + MATCH_TIMEOUT
    if isinstance(ad, FerryAdapter):
        while not ad.matched() and time.monotonic() < deadline:
            ad.ferry.spin_once(ad.node, timeout_sec=0.05)
    seq = 1 << 62
    while time.monotonic() < deadline:
        seq += 1
        ad.send(make_payload(seq, body))
        t_end = min(deadline, time.monotonic() + 0.2)
        while time.monotonic() < t_end:
            r = ad.recv(max(0.0, t_end - time.monotonic()))
            if r and r[0] == seq:
                return
    raise RuntimeError(f"{impl}: no reply from its pong within {MATCH_TIMEOUT:.0f} s "
                       "(discovery/matching failed; see README for CYCLONEDDS_URI / ports)")


def measure_size(size, impls, args, env):
    """All pongs for `size` alive at once; warm up each, then rotating blocks."""
    body = bytes(size - 8)
    children, ads, res = [], {}, {}
    try:
        procs = {}
        for impl in impls:
            procs[impl], ads[impl] = spawn_pong(impl, size, args, env, children)
        wait_ready(procs)
        for impl, ad in ads.items():
            ad.open("ping", size)
            if isinstance(ad, RustPingAdapter):    # matched and warmed up by itself
                ad.block(args.warmup)
                res[impl] = {"rtt_ns": [], "lost": 0}
                continue
            wait_match(impl, ad, body)
            n, t_warm = 0, time.monotonic() + args.warmup_secs    # >= N round trips and >= T s
            while n < args.warmup or time.monotonic() < t_warm:
                n += 1
                round_trip(ad, make_payload((1 << 61) + n, body), (1 << 61) + n)
            res[impl] = {"rtt_ns": [], "lost": 0}
            if isinstance(ad, FerryAdapter):     # which path ferry chose (shm, tcp, ...)
                with contextlib.suppress(Exception):
                    res[impl]["transport"] = sorted({c["transport"] for c in ad.pub.connections()})
        seq, order, t_end = 0, list(ads), time.monotonic() + args.max_secs
        while any(len(r["rtt_ns"]) < args.trials for r in res.values()):
            for impl in order:
                r, ad = res[impl], ads[impl]
                if isinstance(ad, RustPingAdapter):
                    got = ad.block(min(args.block, args.trials - len(r["rtt_ns"])))
                    r["rtt_ns"] += [x for x in got if x is not None]
                    r["lost"] += sum(x is None for x in got)
                    continue
                for _ in range(min(args.block, args.trials - len(r["rtt_ns"]))):
                    seq += 1
                    rtt = round_trip(ad, make_payload(seq, body), seq)
                    if rtt is None:
                        r["lost"] += 1
                        if r["lost"] > max(10, args.trials // 100):
                            raise RuntimeError(f"{impl} {size} B: {r['lost']} replies lost")
                    else:
                        r["rtt_ns"].append(rtt)
                if procs[impl].poll() is not None:
                    raise RuntimeError(f"{impl} pong died (code {procs[impl].returncode})")
            order = order[1:] + order[:1]
            if time.monotonic() > t_end:
                raise RuntimeError(f"size {size}: over --max-secs {args.max_secs}")
            print(f"  {size} B: " + ", ".join(f"{k} {len(v['rtt_ns'])}" for k, v in res.items()),
                  end="\r", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        for ad in ads.values():
            ad.close()
        ads.clear()
        stats = stop_children(children)
        for impl, p in procs.items():
            res[impl]["pong"] = stats.get(p.pid, {})
            if res[impl]["pong"].get("echo_copies"):
                print(f"  note: {impl} pong: publish() refused an ndarray, echo copied to bytes", file=sys.stderr)
        return res
    finally:
        for ad in ads.values():
            with contextlib.suppress(Exception):
                ad.close()
        stop_children(children)


def available(impls, args):
    """Split requested implementations into runnable ones and {impl: reason} skipped."""
    import importlib.util
    ok, skipped = [], {}
    for impl in impls:
        if impl == "rust":
            if os.access(PY_PEER, os.X_OK):
                ok.append(impl)
            else:
                skipped[impl] = f"skipped: no {PY_PEER} (cargo build --release -p ferry --example py_peer)"
        elif impl == RUST:
            if args.rust_pong and os.access(args.rust_pong, os.X_OK):
                ok.append(impl)
            else:
                skipped[impl] = f"skipped: no executable at {args.rust_pong}"
        elif impl not in ADAPTERS:
            raise SystemExit(f"unknown impl {impl!r}; known: {', '.join(ALL_IMPLS)}")
        elif impl not in ("tcp", "rust") and importlib.util.find_spec(impl.split("-")[0]) is None:
            skipped[impl] = "skipped: not installed"
        else:
            ok.append(impl)
    if RUST in ok and "ferry" not in ok and importlib.util.find_spec("ferry") is None:
        ok.remove(RUST)
        skipped[RUST] = "skipped: its ping side needs the ferry Python package"
    return ok, skipped


def run_main(args):
    """Parent: every size, every implementation; write <out>.json/.md/.png."""
    import atexit
    atexit.register(remove_zenoh_leftovers, [os.getpid()])
    for k, quick, full in (("trials", 200, 5000), ("warmup", 30, 300), ("warmup_secs", 0.2, 1.0)):
        if getattr(args, k) is None:
            setattr(args, k, quick if args.quick else full)
    out = args.out or os.path.join(REPO, "bench", "results", "python-quick" if args.quick else "python")
    impls = [s.strip() for s in args.impl.split(",") if s.strip()]
    if args.rust_pong and RUST not in impls:
        impls.append(RUST)
    impls, skipped = available(impls, args)
    for k, v in skipped.items():
        print(f"pyrtt: {k} {v}", file=sys.stderr)
    if not impls:
        raise SystemExit("pyrtt: nothing to run")
    env = child_env(args)
    os.environ.update({k: env[k] for k in ("CYCLONEDDS_URI", "FERRY_DOMAIN_ID", "FERRY_DISCOVERY")})
    if args.zenoh_runtime:
        os.environ["ZENOH_RUNTIME"] = args.zenoh_runtime
    lock = open("/tmp/pyrtt.lock", "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raise SystemExit("pyrtt: another run holds /tmp/pyrtt.lock (two runs would cross-match)")
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"],
                            capture_output=True, text=True).stdout.strip() or "?"
    meta = {"date": time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime()), "host": platform.node(),
            "cpus": os.cpu_count(), "python": platform.python_version(), "versions": versions(),
            "commit": commit, "quick": args.quick, "trials": args.trials, "warmup": args.warmup,
            "block": args.block, "warmup_secs": args.warmup_secs, "argv": sys.argv[1:],
            "load_start": "%.2f" % os.getloadavg()[0],
            "setup": f"Cyclone: domain {CYCLONE_DOMAIN}, `octet data[size]` (bytes), reliable keep-last 1, "
                     f"both sides block in a WaitSet, CYCLONEDDS_URI=`{env['CYCLONEDDS_URI']}`. "
                     "Zenoh: peer, TCP 127.0.0.1, scouting off, express, BLOCK; pong echoes from its "
                     "callback, ping blocks in the FIFO handler's recv(); `zenoh` with its shared memory "
                     "off (TCP only), `zenoh-shm` with it on (Zenoh's default). "
                     f"ferry: FERRY_DOMAIN_ID={env['FERRY_DOMAIN_ID']}, FERRY_DISCOVERY={env['FERRY_DISCOVERY']}, "
                     f"np.ndarray subscriptions from {FerryAdapter.ndarray_min} B. "
                     "tcp: plain Python sockets (TCP_NODELAY, length prefix, echo copies), "
                     "a no-middleware reference."
                     + (f" ZENOH_RUNTIME={args.zenoh_runtime}." if args.zenoh_runtime else "")}
    results, children_t0 = {}, time.monotonic()
    for size in [int(s) for s in args.sizes.split(",")]:
        if size < 8:
            raise SystemExit("pyrtt: sizes must be >= 8 (sequence number)")
        print(f"pyrtt: {size} B: {', '.join(impls)}", file=sys.stderr)
        cells = measure_size(size, impls, args, env)
        for impl, c in cells.items():
            c["summary"] = summarize(c["rtt_ns"])
            c["rtt_us"] = [round(x / 1e3, 2) for x in c.pop("rtt_ns")]
            s = c["summary"]["oneway_us"]
            print(f"  {impl:16s} one-way p50 {s['p50']:8.1f} µs  p99 {s['p99']:8.1f} µs  lost {c['lost']}",
                  file=sys.stderr)
        cells.update({k: {"skipped": v} for k, v in skipped.items()})
        results[str(size)] = cells
    meta["load_end"] = "%.2f" % os.getloadavg()[0]
    if "ferry" in sys.modules:          # which ferry build the ping side imported
        f = sys.modules["ferry"]
        meta["ferry_module"] = {"file": getattr(f, "__file__", None), "version": getattr(f, "__version__", None)}
    meta["secs"] = round(time.monotonic() - children_t0, 1)
    doc = {"meta": meta, "results": results}
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    with open(out + ".json", "w") as fh:
        json.dump(doc, fh)
    write_md(out + ".md", doc)
    write_png(out + ".png", doc)
    print(f"pyrtt: wrote {out}.json .md .png in {meta['secs']} s", file=sys.stderr)


def main():
    """Command line: `run` (parent, ping side), `pong` (child) or `report`."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="role", required=True)
    r = sub.add_parser("run", help="measure (parent)")
    r.add_argument("--quick", action="store_true", help="200 round trips per cell (< 60 s)")
    r.add_argument("--sizes", default="64,1048576")
    r.add_argument("--trials", type=int, default=None, help="round trips per cell (default 5000)")
    r.add_argument("--warmup", type=int, default=None, help="warm-up round trips (default 300; quick 30)")
    r.add_argument("--warmup-secs", type=float, default=None, help="and at least this long (default 1; quick 0.2)")
    r.add_argument("--block", type=int, default=100, help="round trips per block before rotating")
    r.add_argument("--impl", default=",".join(ALL_IMPLS))
    r.add_argument("--rust-pong", default=PY_PEER if os.access(PY_PEER, os.X_OK) else None,
                   help="Rust pong binary for the ferry Python ping -> Rust pong cell (default: py_peer)")
    r.add_argument("--zenoh-runtime", default=None, help="ZENOH_RUNTIME value, e.g. '(app: (worker_threads: 1))'")
    r.add_argument("--max-secs", type=float, default=900, help="abort a size after this long")
    r.add_argument("--out", default=None, help="output prefix (default bench/results/python[-quick])")
    p = sub.add_parser("pong", help="echo child (started by run)")
    p.add_argument("--impl", required=True, choices=ALL_IMPLS)
    p.add_argument("--size", type=int, required=True)
    p.add_argument("--port", type=int, default=None)
    p.add_argument("--ping-topic", default=None)
    p.add_argument("--pong-topic", default=None)
    sub.add_parser("report", help="re-render PREFIX.md/.png from PREFIX.json").add_argument("prefix")
    args = ap.parse_args()
    if args.role == "report":
        with open(args.prefix + ".json") as fh:
            doc = json.load(fh)
        return write_md(args.prefix + ".md", doc), write_png(args.prefix + ".png", doc)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))   # run finally blocks on SIGTERM too
    try:
        (run_main if args.role == "run" else pong_main)(args)
    except KeyboardInterrupt:
        sys.exit(130)


if __name__ == "__main__":
    main()
