"""Child-process roles of the Python tests: `python3 roles.py <role> args...`.

Each role prints `ready` once its ports exist and a final status line, and
bounds every wait in time.
"""

from __future__ import annotations

import sys
import time

import numpy as np

import ferry
from ferry.msgs.sensor_msgs import Image
from ferry.msgs.std_msgs import String


def pattern(size: int, i: int) -> np.ndarray:
    """The deterministic payload number `i` of `size` bytes."""
    return ((np.arange(size, dtype=np.uint32) * 7 + i) & 0xFF).astype(np.uint8)


def shm_mapping(address: int) -> str | None:
    """`perms path` of this process's mapping that holds `address`."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split()
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= address < hi:
                return f"{parts[1]} {parts[5] if len(parts) > 5 else ''}"
    return None


def pub_arrays(topic: str, sizes: str, count: str, as_image: str = "0") -> None:
    """Publishes `count` payloads of each size (raw arrays or Images), each
    after the previous one came back on `<topic>/echo`: byte-exact, over
    shared memory, and received as a view of a read-only /dev/shm mapping."""
    node = ferry.Node("pub_arrays")
    image = as_image == "1"
    pub = node.create_publisher(Image if image else np.ndarray, topic, 2)
    echo = node.create_subscription(np.ndarray, topic + "/echo", None, 2)
    print("ready", flush=True)
    if not (pub.wait_for_subscribers(1, 20.0) and echo.wait_for_publishers(1, 20.0)):
        print("not matched", flush=True)
        sys.exit(2)
    k = 0
    for size in [int(s) for s in sizes.split(",")]:
        for _ in range(int(count)):
            data = pattern(size, k)
            if image:
                pub.publish(Image(height=1, width=size, encoding="mono8", step=size, data=data))
            else:
                pub.publish(data)
            back = echo.recv(20.0)
            if back is None or not np.array_equal(back, data):
                print(f"echo {k} missing or different", flush=True)
                sys.exit(3)
            where = shm_mapping(back.__array_interface__["data"][0]) or ""
            transport = echo.last_info["transport"]
            if transport != "shm" or "/dev/shm/" not in where or "w" in where.split()[0]:
                print(f"echo {k} via {transport} in {where!r}", flush=True)
                sys.exit(4)
            del back
            k += 1
    print(f"done {k}", flush=True)
    node.destroy_node()


def spin(topic: str) -> None:
    """Spins a node with a subscription until Ctrl-C, then reports."""
    node = ferry.Node("spinner")
    node.create_subscription(String, topic, lambda m: print("got", m.data, flush=True), 10)
    node.create_timer(0.05, lambda: None)
    print("ready", flush=True)
    ferry.spin(node)
    node.destroy_node()
    ferry.shutdown()
    print("clean exit", flush=True)


def ping(msg: str, out_topic: str, in_topic: str, count: str) -> None:
    """Publishes `count` Strings and waits for each echo; reports the path."""
    node = ferry.Node("pinger")
    sub = node.create_subscription(String, in_topic, None, 100)
    pub = node.create_publisher(String, out_topic, 100)
    print("ready", flush=True)
    if not (sub.wait_for_publishers(1, 30.0) and pub.wait_for_subscribers(1, 30.0)):
        print("not matched", flush=True)
        sys.exit(2)
    n = 0
    for i in range(int(count)):
        pub.publish(String(data=f"{msg} {i}"))
        got = sub.recv(10.0)
        if got is None or got.data != f"{msg} {i}":
            print(f"lost {i}: {got}", flush=True)
            sys.exit(3)
        n += 1
    print(f"done {n} via {sub.last_info['transport']}", flush=True)
    node.destroy_node()


def echo_tcp(topic: str, count: str) -> None:
    """Receives `count` raw samples over TCP as read-only arrays and sends
    each view straight back on `<topic>/echo` over TCP (its bytes shared,
    not copied); reports the paths it saw."""
    from ferry.qos import QoSProfile
    node = ferry.Node("echo_tcp")
    qos = QoSProfile(depth=10, transport="tcp")
    sub = node.create_subscription(np.ndarray, topic, None, qos)
    pub = node.create_publisher(np.ndarray, topic + "/echo", qos)
    print("ready", flush=True)
    seen = set()
    for _ in range(int(count)):
        arr = sub.recv(20.0)
        if arr is None:
            print("missing", flush=True)
            sys.exit(3)
        seen.add(sub.last_info["transport"])
        if arr.flags.writeable or not isinstance(arr.base, ferry.Buffer):
            print(f"not a read-only view of a ferry.Buffer: {type(arr.base)}", flush=True)
            sys.exit(4)
        pub.publish(arr)
        del arr
    print("done via " + ",".join(sorted(seen)), flush=True)
    time.sleep(1.0)   # the last echo leaves before the node goes
    node.destroy_node()


def flood(topic: str, count: str, transport: str) -> None:
    """Publishes `count` counters (1 KiB samples, more than the socket
    buffers hold) reliable keep_all as fast as it can; a publish that stays blocked past keep_all_block_ms raises
    PublishError, and the same counter is published again. Prints
    `done N errors E longest S`."""
    from ferry.qos import HistoryPolicy, QoSProfile
    node = ferry.Node("flood")
    qos = QoSProfile(history=HistoryPolicy.KEEP_ALL, transport=transport or None)
    pub = node.create_publisher(bytes, topic, qos)
    end = time.monotonic() + 20
    while pub.get_subscription_count() < 1 and time.monotonic() < end:
        time.sleep(0.01)
    print("ready", flush=True)
    errors, longest, i, n = 0, 0.0, 0, int(count)
    while i < n and time.monotonic() < end + 120:
        t = time.monotonic()
        try:
            pub.publish(i.to_bytes(8, "little") + bytes(1016))
            i += 1
        except ferry.PublishError as e:
            errors += 1
            if "within" not in str(e) and "full" not in str(e):
                print(f"unexpected error: {e}", flush=True)
        longest = max(longest, time.monotonic() - t)
    print(f"done {i} errors {errors} longest {longest:.3f}", flush=True)
    time.sleep(2.0)   # the last samples leave before the node goes
    node.destroy_node()


if __name__ == "__main__":
    role, *args = sys.argv[1:]
    {"pub-arrays": pub_arrays, "spin": spin, "ping": ping, "echo-tcp": echo_tcp,
     "flood": flood}[role](*args)
