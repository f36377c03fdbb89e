"""Python <-> Rust <-> CLI across processes, on every path: shared memory
(zero-copy receive), the network between two namespaces, MQTT; services;
Ctrl-C during spin."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time

import numpy as np
import pytest

import ferry
from conftest import wait_line
from ferry.msgs.example_interfaces import AddTwoInts
from ferry.msgs.geometry_msgs import Twist, Vector3
from ferry.msgs.sensor_msgs import Image, JointState, PointCloud2, PointField
from ferry.msgs.std_msgs import Header, String
from ferry.msgs.builtin_interfaces import Time
from roles import pattern, shm_mapping

MiB = 1 << 20


def address(arr: np.ndarray) -> int:
    return arr.__array_interface__["data"][0]


@pytest.mark.parametrize("as_image", ["0", "1"])
def test_shm_numpy_round_trip_zero_copy_1_to_16_mib(procs, topic, as_image):
    """Another Python process publishes 1, 4 and 16 MiB (raw arrays, then
    Images); here they arrive over shared memory, byte-exact, and the numpy
    array we get *is* the shared-memory sample (read-only mapping); we send
    each view straight back, and the other side checks the same of the echo."""
    node = ferry.Node("zc_sub")
    msg_type = Image if as_image == "1" else np.ndarray
    sub = node.create_subscription(msg_type, topic, None, 2)
    echo = node.create_publisher(np.ndarray, topic + "/echo", 2)
    sizes = [MiB, 4 * MiB, 16 * MiB]
    p = procs.python("pub-arrays", topic, ",".join(map(str, sizes)), "2", as_image)
    wait_line(p, "ready")
    k = 0
    for size in sizes:
        for _ in range(2):
            msg = sub.recv(20.0)
            assert msg is not None, f"no sample {k}"
            arr = msg.data if as_image == "1" else msg
            assert arr.nbytes == size
            assert np.array_equal(arr, pattern(size, k)), f"sample {k} differs"
            assert sub.last_info["transport"] == "shm"
            where = shm_mapping(address(arr))
            assert where is not None and "/dev/shm/" in where, f"array at {address(arr):#x} is in {where}"
            assert where.startswith("r") and "w" not in where.split()[0], f"mapping is writable: {where}"
            assert not arr.flags.writeable
            if as_image == "1":
                assert msg.width == size and msg.encoding == "mono8"
            echo.publish(arr)
            del arr, msg
            k += 1
    assert wait_line(p, "done") == f"done {k}"
    node.destroy_node()


def test_tcp_bytes_and_echoed_views_go_out_without_a_copy(procs, topic):
    """Over TCP (no shared memory to copy into) `bytes` from 4 KiB on are
    sent as they are, and the other process echoes each received read-only
    array (a view of a ferry.Buffer) by sharing its bytes: every size comes
    back byte-exact, on TCP both ways."""
    from ferry.qos import QoSProfile
    qos = QoSProfile(depth=10, transport="tcp")
    node = ferry.Node("tcp_zc")
    pub = node.create_publisher(bytes, topic, qos)
    echo = node.create_subscription(bytes, topic + "/echo", None, qos)
    sizes = [4096, 65536, MiB, 4 * MiB]
    p = procs.python("echo-tcp", topic, str(len(sizes)))
    wait_line(p, "ready")
    assert pub.wait_for_subscribers(1, 20.0) and echo.wait_for_publishers(1, 20.0)
    for k, size in enumerate(sizes):
        data = pattern(size, k).tobytes()
        pub.publish(data)
        back = echo.recv(20.0)
        assert back == data, f"echo of {size} B missing or different"
        assert echo.last_info["transport"] == "tcp"
    assert {c["transport"] for c in pub.connections()} == {"tcp"}
    assert wait_line(p, "done") == "done via tcp"
    node.destroy_node()


ECHO_CASES = {
    "String": String(data="héllo ferry"),
    "Header": Header(stamp=Time(sec=7, nanosec=9), frame_id="odd"),
    "Twist": Twist(linear=Vector3(x=1.5, y=-2.0, z=3.25), angular=Vector3(x=0.0, y=0.1, z=-0.2)),
    "Image": Image(
        header=Header(stamp=Time(sec=1, nanosec=2), frame_id="cam"),
        height=2, width=3, encoding="rgb", is_bigendian=0, step=9,
        data=np.arange(18, dtype=np.uint8),
    ),
    "JointState": JointState(
        header=Header(frame_id="arm"), name=["j1", "joint_2"],
        position=[0.5, -1.0], velocity=[1.0, 2.0], effort=[],
    ),
    "PointCloud2": PointCloud2(
        header=Header(frame_id="lidar"), height=1, width=2,
        fields=[PointField(name="x", offset=0, datatype=7, count=1),
                PointField(name="y", offset=4, datatype=7, count=1)],
        is_bigendian=False, point_step=8, row_step=16,
        data=np.arange(16, dtype=np.uint8), is_dense=True,
    ),
}


@pytest.mark.parametrize("name", list(ECHO_CASES))
def test_rust_echo_is_byte_identical(procs, bins, topic, name):
    """Python encodes, Rust decodes into its own struct and re-encodes: the
    bytes that come back are the bytes Python sent, and decode to the same
    message. Types match in discovery (same name and hash on both sides)."""
    msg = ECHO_CASES[name]
    cls = type(msg)
    node = ferry.Node("echo_py")
    back_raw = node.create_subscription(bytes, topic + "/out", None, 10)
    back = node.create_subscription(cls, topic + "/out", None, 10)
    pub = node.create_publisher(cls, topic + "/in", 10)
    p = procs.start([bins["peer"], "echo", name, topic + "/in", topic + "/out", 3, 20])
    wait_line(p, "ready")
    assert pub.wait_for_subscribers(1, 10.0)
    # The peer waits for one subscriber of its output; both of ours must be
    # connected before the first echo (under load the second came late).
    assert back_raw.wait_for_publishers(1, 10.0) and back.wait_for_publishers(1, 10.0)
    sent = cls.encode(msg)
    for _ in range(3):
        pub.publish(msg)
        raw = back_raw.recv(10.0)
        assert raw == sent, f"Rust re-encoded {name} differently:\n{raw.hex()}\n{sent.hex()}"
        got = back.recv(10.0)
        assert cls.encode(got) == sent
    assert back_raw.last_info["transport"] == "shm"
    assert wait_line(p, "done").startswith("done 3 via shm")
    node.destroy_node()


def test_type_mismatch_does_not_match(procs, bins, topic):
    """A Python String publisher and a Rust Twist subscriber on one topic
    never connect (type hash checked in discovery)."""
    node = ferry.Node("mismatch")
    pub = node.create_publisher(String, topic + "/in", 10)
    node.create_subscription(bytes, topic + "/out", None, 10)
    p = procs.start([bins["peer"], "echo", "Twist", topic + "/in", topic + "/out", 1, 3])
    wait_line(p, "ready")
    assert not pub.wait_for_subscribers(1, 1.5)
    node.destroy_node()


def test_services_python_and_rust_both_ways(procs, bins, topic):
    node = ferry.Node("srv_py")
    # Python client -> Rust service.
    server = procs.start([bins["peer"], "add-server", topic + "/rust", 20])
    wait_line(server, "ready")
    client = node.create_client(AddTwoInts, topic + "/rust")
    assert client.call(AddTwoInts.Request(a=40, b=2), timeout_sec=10.0).sum == 42
    # Rust client -> Python service (answered while we spin).
    node.create_service(AddTwoInts, topic + "/py", lambda q, r: AddTwoInts.Response(sum=q.a + q.b + 1000))
    caller = procs.start([bins["peer"], "add-call", topic + "/py", 5, 6])
    end = time.monotonic() + 15
    while caller.poll() is None and time.monotonic() < end:
        ferry.spin_once(node, timeout_sec=0.05)
    out, err = caller.communicate(timeout=5)
    assert caller.returncode == 0, err
    assert "sum 1011" in out
    node.destroy_node()


def test_cli_reads_and_writes_python_topics(procs, bins, topic):
    node = ferry.Node("cli_py")
    sub = node.create_subscription(String, topic + "/from_cli", None, 10)
    pub = node.create_publisher(String, topic + "/to_cli", 10)
    p = procs.start([bins["ferry"], "topic", "pub", topic + "/from_cli", "std_msgs/msg/String", "data: from the CLI", "--times", "3", "-r", "10"])
    got = sub.recv(10.0)
    assert got == String(data="from the CLI")
    p.wait(10)
    echo = procs.start([bins["ferry"], "topic", "echo", topic + "/to_cli", "--once", "--json", "--timeout", "10"])
    assert pub.wait_for_subscribers(1, 10.0)
    pub.publish(String(data="from python"))
    out, err = echo.communicate(timeout=15)
    assert "from python" in out, err
    node.destroy_node()


def test_ctrl_c_during_spin_exits_cleanly(procs, topic):
    p = procs.python("spin", topic)
    wait_line(p, "ready")
    time.sleep(0.3)
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 0, err
    assert "clean exit" in out
    assert "Traceback" not in err


def have_root_net() -> bool:
    return os.geteuid() == 0 and shutil.which("ip") is not None


@pytest.mark.skipif(not have_root_net(), reason="needs root and iproute2 (bash scripts/setup.sh)")
def test_network_between_two_namespaces(procs, bins, topic):
    """Python in one namespace, Rust in another, joined by a veth pair:
    the pair meets by multicast discovery and talks over the network path
    (TCP by default for a reliable topic between hosts; shared memory off:
    both namespaces are on this one host)."""
    tag = f"{os.getpid() % 10000}"
    a, b = f"pya{tag}", f"pyb{tag}"

    def sh(cmd: str) -> None:
        subprocess.run(cmd, shell=True, check=True, capture_output=True, timeout=20)

    try:
        sh(f"ip netns add {a} && ip netns add {b}")
        sh(f"ip link add pva{tag} netns {a} type veth peer name pvb{tag} netns {b}")
        for ns, dev, host in [(a, f"pva{tag}", 1), (b, f"pvb{tag}", 2)]:
            sh(f"ip -n {ns} link set lo up && ip -n {ns} addr add 10.78.9.{host}/24 dev {dev} && ip -n {ns} link set {dev} up")
        env = {"FERRY_DISCOVERY": "subnet", "FERRY_SHM": "off"}
        rust = procs.start(["ip", "netns", "exec", b, bins["peer"], "echo", "String", topic + "/in", topic + "/out", 20, 30], env=env)
        py = procs.start(["ip", "netns", "exec", a, os.sys.executable, bins["roles"], "ping", "hi", topic + "/in", topic + "/out", 20], env=env)
        line = wait_line(py, "done", 40.0)
        assert line in ("done 20 via tcp", "done 20 via udp"), line
        assert wait_line(rust, "done", 10.0) == line
    finally:
        for ns in (a, b):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_mqtt_between_processes_with_no_other_path(procs, bins, topic, tmp_path, private_domain):
    """No discovery, no shared memory: Python and Rust meet only through the
    embedded broker (`ferry broker`), the topic has the cloud scope."""
    port = free_port()
    broker = procs.start([bins["ferry"], "broker", "--listen", f"127.0.0.1:{port}", "--duration", "60"])
    end = time.monotonic() + 10
    while time.monotonic() < end:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            time.sleep(0.05)
    cfg = tmp_path / "cloud.toml"
    cfg.write_text(
        f'domain_id = {private_domain}\ndiscovery = "off"\nshared_memory = false\n\n[mqtt]\nbroker = "mqtt://127.0.0.1:{port}"\ndiscovery = "on"\n\n'
        f'[[topics]]\npattern = "{topic}/*"\nscope = "cloud"\n'
    )
    node = ferry.Node("mqtt_py", config_file=str(cfg))
    back = node.create_subscription(String, topic + "/out", None, 100)
    pub = node.create_publisher(String, topic + "/in", 100)
    rust = procs.start([bins["peer"], "echo", "String", topic + "/in", topic + "/out", 5, 30], env={"FERRY_CONFIG": str(cfg)})
    wait_line(rust, "ready", 20.0)
    # The publisher's link to the broker is not a subscriber: this waits
    # for the Rust node's reader, announced through the broker.
    assert pub.wait_for_subscribers(1, 20.0), pub.connections()
    for i in range(5):
        pub.publish(String(data=f"cloud {i}"))
        got = back.recv(10.0)
        assert got == String(data=f"cloud {i}")
    assert back.last_info["transport"] == "mqtt"
    assert wait_line(rust, "done", 10.0) == "done 5 via mqtt"
    node.destroy_node()
    assert broker.poll() is None


def test_readme_quickstart_runs(procs):
    """The README's Python example: answers 42, hears its timer, and Ctrl-C
    ends its spin cleanly."""
    from conftest import ROOT
    p = procs.start([os.sys.executable, ROOT / "crates/ferry-py/examples/quickstart.py"], env={"PYTHONUNBUFFERED": "1"})
    assert wait_line(p, "2 + 40 =") == "2 + 40 = 42"
    assert wait_line(p, "heard") == "heard hello"
    p.send_signal(signal.SIGINT)
    out, err = p.communicate(timeout=10)
    assert p.returncode == 0, err
    assert "Traceback" not in err


def _drain_slowly(sub, n: int, pause_every: int, pause: float) -> list[int]:
    """Receives `n` counters, stalling `pause` s every `pause_every`."""
    got = []
    for k in range(n):
        if k and k % pause_every == 0:
            time.sleep(pause)
        b = sub.recv(20.0)
        if b is None:
            break
        got.append(int.from_bytes(b[:8], "little"))
    return got


@pytest.mark.parametrize("transport", ["shm", "tcp", "udp"])
def test_keep_all_flood_to_a_slow_python_subscriber_loses_nothing(procs, topic, transport):
    """Another process floods reliable keep_all as fast as it can; this
    subscriber stalls again and again. Nothing is dropped: the publisher is
    held back (it blocks) instead."""
    from ferry.qos import HistoryPolicy, QoSProfile
    n = 60_000
    node = ferry.Node("slow_sub")
    qos = QoSProfile(history=HistoryPolicy.KEEP_ALL, transport=transport)
    sub = node.create_subscription(bytes, topic, None, qos)
    p = procs.python("flood", topic, str(n), transport)
    wait_line(p, "ready")
    got = _drain_slowly(sub, n, 6_000, 0.3)
    status = wait_line(p, "done", timeout=60.0)
    print(f"{transport}: received {len(got)} of {n}, dropped {sub.dropped}; publisher: {status}")
    assert sub.dropped == 0
    assert len(got) == n, f"{len(got)} of {n} received; publisher: {status}"
    assert got == list(range(n)), "samples lost or out of order"
    assert sub.last_info["transport"] == transport
    # It was held back: a publish waited for room (or gave up and retried).
    _, _, errors, _, longest = status.split()[1:6]
    assert float(longest) >= 0.1 or int(errors) > 0, status
    node.destroy_node()


def test_keep_all_flood_in_process_holds_the_publishing_thread(topic):
    """The same in one process: the publishing thread waits for room."""
    import threading
    from ferry.qos import HistoryPolicy, QoSProfile
    n = 30_000
    qos = QoSProfile(history=HistoryPolicy.KEEP_ALL)
    a, b = ferry.Node("inproc_pub"), ferry.Node("inproc_sub")
    sub = b.create_subscription(bytes, topic, None, qos)
    pub = a.create_publisher(bytes, topic, qos)
    assert pub.wait_for_subscribers(1, 10.0)
    longest = [0.0]

    def flood():
        for i in range(n):
            while True:
                t = time.monotonic()
                try:
                    pub.publish(i.to_bytes(8, "little"))
                    break
                except ferry.PublishError:
                    pass
                finally:
                    longest[0] = max(longest[0], time.monotonic() - t)

    t = threading.Thread(target=flood)
    t.start()
    got = _drain_slowly(sub, n, 5_000, 0.3)
    t.join(30)
    assert sub.dropped == 0
    assert got == list(range(n)), f"{len(got)} of {n}, in order: {got[:3]}..."
    assert sub.last_info["transport"] == "intra"
    assert longest[0] >= 0.1, "the publisher was never held back"
    a.destroy_node()
    b.destroy_node()
