"""The `[ros2]` DDS path from Python: a ferry node made with FERRY_ROS2=1
and a real ROS 2 node (rclpy of ROS 2 Jazzy on rmw_fastrtps_cpp, installed
by scripts/setup.sh into /opt/ferry-ros2) exchange messages and see each
other's names over DDS on this host, kept to loopback by ROS 2's own
ROS_AUTOMATIC_DISCOVERY_RANGE=LOCALHOST on both sides."""

from __future__ import annotations

import os
import pathlib
import selectors
import subprocess
import time

import ferry
from ferry.msgs.std_msgs import String

from conftest import wait_line

ROOT = pathlib.Path(__file__).resolve().parents[3]
PEER = ROOT / "crates/ferry-dds/tests/ros2_peer.py"
ROS2_PYTHON = os.environ.get("FERRY_ROS2_PYTHON", "/opt/ferry-ros2/bin/python")


def ros2_env(domain: int) -> dict:
    assert subprocess.run([ROS2_PYTHON, "-c", "import rclpy, std_msgs"]).returncode == 0, (
        f"no ROS 2 rclpy at {ROS2_PYTHON}: run scripts/setup.sh or set FERRY_ROS2_PYTHON")
    return {
        "ROS_DOMAIN_ID": str(domain),
        "RMW_IMPLEMENTATION": "rmw_fastrtps_cpp",
        # UDP only: Fast DDS's shared memory leaves segments behind a kill.
        "FASTDDS_BUILTIN_TRANSPORTS": "UDPv4",
        "ROS_AUTOMATIC_DISCOVERY_RANGE": "LOCALHOST",
    }


def lines_now(p: subprocess.Popen) -> list[str]:
    """The lines `p` has written so far (without waiting)."""
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    out = []
    while sel.select(timeout=0):
        line = p.stdout.readline()
        if not line:
            break
        out.append(line.strip())
    return out


def test_a_python_node_and_a_ros2_node_talk_over_dds(monkeypatch, procs, private_domain, topic):
    env = ros2_env(private_domain)
    monkeypatch.setenv("FERRY_ROS2", "1")
    monkeypatch.setenv("ROS_AUTOMATIC_DISCOVERY_RANGE", "LOCALHOST")
    with ferry.Node("py_talker") as node:
        pub = node.create_publisher(String, topic, 10)
        got = []
        node.create_subscription(String, topic + "_back", got.append, 100)
        # ferry → ROS 2
        listener = procs.start([ROS2_PYTHON, PEER, "listen", topic, "10", "40"], env=env)
        wait_line(listener, "ready", timeout=30)
        assert pub.wait_for_subscribers(1, timeout_sec=30), "the ROS 2 subscription never matched"
        heard = []
        end = time.monotonic() + 40
        i = 0
        while len(heard) < 10 and time.monotonic() < end:
            pub.publish(String(data=f"py {i}"))
            i += 1
            time.sleep(0.05)
            heard += [line[4:] for line in lines_now(listener) if line.startswith("got ")]
        assert len(heard) == 10, heard
        first = int(heard[0].split()[1])
        assert heard == [f"py {first + k}" for k in range(10)], heard

        # ROS 2 → ferry, and ROS 2 names ferry's node.
        talker = procs.start([ROS2_PYTHON, PEER, "talk", topic + "_back", "20", "20", "volatile"],
                             env=env)
        wait_line(talker, "acked", timeout=60)
        end = time.monotonic() + 10
        while len(got) < 20 and time.monotonic() < end:
            node.spin_once(timeout_sec=0.1)
        # The talker starts once it sees ferry's reader; ferry's reader may
        # see the talker a moment later (the first samples may go by).
        texts = [m.data for m in got]
        assert len(texts) >= 15 and texts[-1] == "hello 19", texts
        first = int(texts[0].split()[1])
        assert texts == [f"hello {k}" for k in range(first, 20)], texts
        asker = procs.start([ROS2_PYTHON, PEER, "node", "py_talker", "30"], env=env)
        wait_line(asker, "node / py_talker", timeout=40)
