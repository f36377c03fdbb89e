"""The rclpy-shaped API inside one process: pub/sub, services, timers,
asyncio, QoS, errors, exceptions in callbacks."""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time

import numpy as np
import pytest

import ferry
from ferry.msgs.example_interfaces import AddTwoInts
from ferry.msgs.geometry_msgs import Twist, Vector3
from ferry.msgs.std_msgs import String


def spin_until(node, cond, timeout=5.0):
    end = time.monotonic() + timeout
    while not cond() and time.monotonic() < end:
        ferry.spin_once(node, timeout_sec=0.05)
    return cond()


def test_pubsub_in_process_typed_and_raw(topic):
    with ferry.Node("api_pubsub") as node:
        got, raw = [], []
        pub = node.create_publisher(Twist, topic, 10)
        sub = node.create_subscription(Twist, topic, got.append, 10)
        node.create_subscription(bytes, topic, raw.append, 10)
        msg = Twist(linear=Vector3(x=1.0, y=-2.0, z=0.5), angular=Vector3(z=0.25))
        for _ in range(3):
            pub.publish(msg)
        assert spin_until(node, lambda: len(got) == 3 and len(raw) == 3)
        assert got == [msg] * 3
        # The raw subscriber sees exactly the CDR bytes the message encodes to.
        assert raw[0] == Twist.encode(msg)
        assert sub.last_info["transport"] == "intra"
        assert pub.get_subscription_count() == 2


def test_publish_wrong_type_is_a_type_error(topic):
    with ferry.Node("api_types") as node:
        pub = node.create_publisher(String, topic, 10)
        with pytest.raises(TypeError, match="std_msgs/msg/String"):
            pub.publish(Twist())
        raw = node.create_publisher(bytes, topic + "/raw", 10)
        with pytest.raises(TypeError, match="cannot send"):
            raw.publish(12)


def test_raw_payloads_shared_not_copied_arrive_intact(topic):
    """`bytes` from 4 KiB on, a received ferry.Buffer and a read-only view
    of one are published by sharing their bytes (in-process here); each
    arrives intact, and a view range outside its buffer is refused."""
    from ferry import _ferry
    with ferry.Node("api_shared") as node:
        got = []
        pub = node.create_publisher(bytes, topic, 10)
        node.create_subscription(bytes, topic, got.append, 10)
        big = bytes(range(256)) * 64          # 16 KiB
        buf = _ferry.buffer_from(big[::-1])
        view = np.asarray(buf)[100:5000]
        assert not view.flags.writeable and view.base.base is buf


        class Spy:
            """Records which native method each publish takes."""
            def __init__(self, native):
                self.native, self.calls = native, []

            def __getattr__(self, name):
                self.calls.append(name)
                return getattr(self.native, name)

        native = pub._native
        pub._native = Spy(native)
        for payload in (big, buf, view):
            pub.publish(payload)
        assert pub._native.calls == ["publish", "publish", "publish_view"]
        pub._native = native
        assert spin_until(node, lambda: len(got) == 3)
        assert got == [big, big[::-1], big[::-1][100:5000]]
        start = view.__array_interface__["data"][0]
        with pytest.raises(ValueError, match="not inside the buffer"):
            pub._native.publish_view(buf, start, len(big))
        with pytest.raises(ValueError, match="not inside the buffer"):
            pub._native.publish_view(buf, buf.address - 1, 10)


def test_build_errors_name_the_cause(topic):
    with pytest.raises(ferry.BuildError, match="name"):
        ferry.Node("bad name!")
    with ferry.Node("api_errors") as node:
        with pytest.raises(ferry.BuildError):
            node.create_publisher(String, "/bad topic//x", 10)
        with pytest.raises(ValueError, match="unknown QoS profile"):
            node.create_publisher(String, topic, "fastest")
        with pytest.raises(TypeError, match="not a payload type"):
            node.create_publisher(dict, topic, 10)
    with pytest.raises(ferry.DestroyedError):
        node.create_publisher(String, topic, 10)
    with pytest.raises(ferry.DestroyedError):
        ferry.spin_once(node, timeout_sec=0.01)


def test_qos_profiles_match_rclpy_names():
    assert ferry.qos.qos_profile_sensor_data.reliability == ferry.qos.ReliabilityPolicy.BEST_EFFORT
    assert ferry.qos.sensor_data.depth == 5
    assert ferry.qos.qos_from(7).depth == 7
    d = ferry.qos.QoSProfile(depth=3, durability="transient_local", deadline=0.5).to_dict()
    assert d["durability"] == "transient_local" and d["deadline"] == 0.5


def test_latched_late_joiner_gets_last_sample(topic):
    with ferry.Node("api_latched") as node:
        pub = node.create_publisher(String, topic, ferry.qos.latched)
        pub.publish(String(data="first"))
        pub.publish(String(data="last"))
        sub = node.create_subscription(String, topic, None, ferry.qos.latched)
        got = sub.recv(3.0)
        assert got == String(data="last")


def test_keep_last_queue_bounded_and_counts_drops(topic):
    with ferry.Node("api_depth") as node:
        pub = node.create_publisher(bytes, topic, 100)
        sub = node.create_subscription(bytes, topic, None, 3)
        for i in range(10):
            pub.publish(bytes([i]))
        assert spin_until(node, lambda: sub.dropped == 7, 2.0)
        assert [sub.take(), sub.take(), sub.take(), sub.take()] == [b"\x07", b"\x08", b"\x09", None]


def test_service_call_async_and_errors(topic):
    with ferry.Node("api_srv") as node:
        def add(req, resp):
            if req.a < 0:
                raise ValueError("negative a")
            resp.sum = req.a + req.b
            return resp

        node.create_service(AddTwoInts, topic, add)
        client = node.create_client(AddTwoInts, topic)
        assert client.wait_for_service(timeout_sec=3.0)
        fut = client.call_async(AddTwoInts.Request(a=2, b=40))
        assert ferry.spin_until_future_complete(node, fut, timeout_sec=3.0)
        assert fut.result().sum == 42
        bad = client.call_async(AddTwoInts.Request(a=-1, b=1))
        assert ferry.spin_until_future_complete(node, bad, timeout_sec=3.0)
        with pytest.raises(ferry.RemoteError, match="negative a"):
            bad.result()
        assert node.callback_errors == 1


def test_call_from_a_thread_while_spinning_and_timeouts(topic):
    with ferry.Node("api_srv_thread") as node:
        def slow(req, resp):
            if req.a == 99:
                time.sleep(1.0)
            resp.sum = req.a + req.b
            return resp

        node.create_service(AddTwoInts, topic, slow)
        client = node.create_client(AddTwoInts, topic)
        results = []

        def caller():
            results.append(client.call(AddTwoInts.Request(a=1, b=2), timeout_sec=5.0).sum)
            t0 = time.monotonic()
            try:
                client.call(AddTwoInts.Request(a=99, b=0), timeout_sec=0.3)
            except ferry.CallTimeout as e:
                results.append(("timeout", time.monotonic() - t0, str(e)))

        t = threading.Thread(target=caller)
        t.start()
        end = time.monotonic() + 10
        while t.is_alive() and time.monotonic() < end:
            ferry.spin_once(node, timeout_sec=0.05)
        t.join(5)
        assert results[0] == 3
        kind, waited, text = results[1]
        assert kind == "timeout" and 0.25 < waited < 1.0 and topic in text
    nobody = ferry.Node("api_nosrv")
    c = nobody.create_client(AddTwoInts, topic + "/none")
    t0 = time.monotonic()
    with pytest.raises(ferry.ServiceUnavailable, match="no service"):
        c.call(AddTwoInts.Request(), timeout_sec=0.3)
    assert time.monotonic() - t0 < 1.0
    nobody.destroy_node()


def test_timer_period_and_cancel():
    with ferry.Node("api_timer") as node:
        ticks = []
        timer = node.create_timer(0.02, lambda: ticks.append(time.monotonic()))
        assert spin_until(node, lambda: len(ticks) >= 10, 3.0)
        gaps = np.diff(ticks)
        assert 0.015 < float(np.median(gaps)) < 0.06
        timer.cancel()
        n = len(ticks)
        ferry.spin_once(node, timeout_sec=0.1)
        assert len(ticks) == n and timer.is_canceled()


def test_callback_exception_is_reported_and_node_goes_on(topic, caplog):
    with ferry.Node("api_exc") as node:
        got = []

        def cb(msg):
            if msg.data == "boom":
                raise RuntimeError("callback exploded")
            got.append(msg.data)

        pub = node.create_publisher(String, topic, 10)
        node.create_subscription(String, topic, cb, 10)
        with caplog.at_level(logging.ERROR, logger="ferry"):
            pub.publish(String(data="boom"))
            pub.publish(String(data="after"))
            assert spin_until(node, lambda: got == ["after"])
        assert node.callback_errors == 1
        assert any("callback exploded" in r.exc_text or "" for r in caplog.records if r.exc_text) or any(
            r.exc_info and "callback exploded" in str(r.exc_info[1]) for r in caplog.records
        )


def test_garbage_payload_is_reported_not_fatal(topic, caplog):
    with ferry.Node("api_garbage") as node:
        got = []
        raw = node.create_publisher(bytes, topic, 10)
        node.create_subscription(String, topic, got.append, 10)
        with caplog.at_level(logging.ERROR, logger="ferry"):
            raw.publish(b"\x07\x07garbage")
            raw.publish(String.encode(String(data="fine")))
            assert spin_until(node, lambda: got == [String(data="fine")])
        assert node.callback_errors == 1


def test_asyncio_receive(topic):
    with ferry.Node("api_async") as node:
        pub = node.create_publisher(String, topic, 10)
        sub = node.create_subscription(String, topic, None, 10)

        async def main():
            async def producer():
                for i in range(5):
                    await asyncio.sleep(0.01)
                    pub.publish(String(data=str(i)))

            task = asyncio.ensure_future(producer())
            out = []
            async for msg in sub:
                out.append(msg.data)
                if len(out) == 5:
                    break
            await task
            return out

        assert asyncio.run(asyncio.wait_for(main(), 5.0)) == ["0", "1", "2", "3", "4"]


def test_asyncio_await_call(topic):
    with ferry.Node("api_async_srv") as node:
        node.create_service(AddTwoInts, topic, lambda q, r: AddTwoInts.Response(sum=q.a * q.b))
        client = node.create_client(AddTwoInts, topic)
        assert client.wait_for_service(3.0)

        async def main():
            fut = client.call_async(AddTwoInts.Request(a=6, b=7))
            spinner = asyncio.get_running_loop().run_in_executor(
                None, lambda: ferry.spin_until_future_complete(node, fut, timeout_sec=3.0)
            )
            resp = await fut
            await spinner
            return resp.sum

        assert asyncio.run(asyncio.wait_for(main(), 5.0)) == 42


def test_gil_released_while_waiting(topic):
    """A Python thread keeps running while the main thread blocks in recv."""
    with ferry.Node("api_gil") as node:
        sub = node.create_subscription(bytes, topic, None, 10)
        counter = [0]
        stop = threading.Event()

        def busy():
            while not stop.is_set():
                counter[0] += 1

        t = threading.Thread(target=busy)
        t.start()
        assert sub.recv(0.5) is None
        stop.set()
        t.join()
        assert counter[0] > 10000


def test_graph_queries(topic):
    with ferry.Node("api_graph", namespace="/robot9") as node:
        node.create_publisher(String, topic, 10)
        assert node.get_fully_qualified_name() == "/robot9/api_graph"
        end = time.monotonic() + 3
        while time.monotonic() < end:
            topics = dict(node.get_topic_names_and_types())
            if topic in topics:
                break
            time.sleep(0.05)
        assert topics[topic] == ["std_msgs/msg/String"]
        assert "/robot9/api_graph" in node.get_node_names()


def test_executor_spins_several_nodes(topic):
    """One SingleThreadedExecutor runs the callbacks of two nodes: a timer
    in one publishes, a subscription in the other receives, and a service
    call across them completes."""
    a, b = ferry.Node("exec_a"), ferry.Node("exec_b")
    executor = ferry.executors.SingleThreadedExecutor()
    assert executor.add_node(a) and executor.add_node(b)
    got = []
    pub = a.create_publisher(String, topic, 10)
    a.create_timer(0.01, lambda: pub.publish(String(data="tick")))
    b.create_subscription(String, topic, got.append, 10)
    b.create_service(AddTwoInts, topic + "/add", lambda q, r: AddTwoInts.Response(sum=q.a + q.b))
    client = a.create_client(AddTwoInts, topic + "/add")
    assert client.wait_for_service(3.0)
    end = time.monotonic() + 5
    while len(got) < 5 and time.monotonic() < end:
        executor.spin_once(timeout_sec=0.1)
    assert len(got) >= 5
    fut = client.call_async(AddTwoInts.Request(a=20, b=22))
    assert executor.spin_until_future_complete(fut, timeout_sec=3.0)
    assert fut.result().sum == 42
    b.destroy_node()
    assert executor.get_nodes() == [a]
    executor.remove_node(a)
    n = len(got)
    assert not executor.spin_once(timeout_sec=0.05) and len(got) == n
    a.destroy_node()


def test_spin_with_executor_argument_returns_on_shutdown(topic):
    node = ferry.Node("exec_spin")
    executor = ferry.executors.SingleThreadedExecutor()
    calls = []

    def stop():
        calls.append(1)
        if len(calls) == 3:
            ferry.shutdown()

    node.create_timer(0.01, stop)
    t0 = time.monotonic()
    ferry.spin(node, executor=executor)
    assert len(calls) == 3 and time.monotonic() - t0 < 2.0
    assert not ferry.ok()
    ferry.init()
    assert ferry.ok()


def test_timeout_in_the_executor_place_is_a_clear_error():
    with ferry.Node("exec_typo") as node:
        with pytest.raises(TypeError, match="timeout_sec="):
            ferry.spin_until_future_complete(node, None, 3.0)


def test_discovery_counters_count_a_malformed_datagram():
    # Garbage sent to this runtime's unicast discovery port is counted,
    # visible from Python, and harms nothing.
    import socket

    with ferry.Node("api_disco") as node:
        before = node.discovery_stats()
        assert set(before) >= {"sent", "received", "malformed", "not_owner", "refused"}
        domain = node._native.domain_id
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        # The unicast discovery ports: the 8 after 7400 + 16 * domain that
        # are not DDS's multicast ports (7400 + 250 k and 7401 + 250 k).
        after = range(7400 + 16 * domain + 1, 7400 + 16 * domain + 20)
        for port in [p for p in after if (p - 7400) % 250 >= 2][:8]:
            s.sendto(b"not a beacon", ("127.0.0.1", port))
        s.close()
        end = time.monotonic() + 3
        while time.monotonic() < end and node.discovery_stats()["malformed"] == before["malformed"]:
            time.sleep(0.05)
        assert node.discovery_stats()["malformed"] > before["malformed"]
        assert node.discovery_stats()["sent"] > 0


def _own_tcp_listeners():
    """Ports of this process's listening TCP sockets (from /proc)."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            link = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    ports = []
    with open("/proc/self/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            if cols[3] == "0A" and cols[9] in inodes:  # LISTEN
                ports.append(int(cols[1].split(":")[1], 16))
    return ports


def test_connection_counters_count_a_stranger_without_a_hello():
    # Garbage on this runtime's TCP listener: the connection is cut off,
    # counted, and visible from Python.
    import socket

    with ferry.Node("api_conns") as node:
        before = node.connection_stats()
        assert set(before) == {
            "accepted",
            "no_hello",
            "bad_hello",
            "evicted",
            "refused",
            "fd_exhausted",
            "tls_refused",
            "denied",
            "admin_denied",
            "udp_sessions",
            "udp_shake_refused",
            "udp_aead_failed",
            "udp_replayed",
            "udp_plaintext_refused",
        }
        ports = _own_tcp_listeners()
        assert ports, "no TCP listener found"
        for port in ports:
            s = socket.create_connection(("127.0.0.1", port), timeout=3)
            s.sendall(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 64)
            s.close()
        end = time.monotonic() + 3
        while time.monotonic() < end and node.connection_stats()["bad_hello"] == before["bad_hello"]:
            time.sleep(0.05)
        after = node.connection_stats()
        assert after["bad_hello"] > before["bad_hello"], after
        assert after["accepted"] > before["accepted"], after
