"""Nodes and their ports, shaped like rclpy's.

Payload types a port can carry:

* a message class declared with :func:`ferry.idl.message` (the standard ones
  live in :mod:`ferry.msgs`): CDR byte-identical to Rust's, type-checked in
  discovery against Rust and Python peers;
* ``bytes``, ``str`` (UTF-8) or ``numpy.ndarray`` (raw bytes; received as a
  read-only uint8 view of the sample, without a copy) — raw ports match any
  type;
* :class:`ferry.Buffer` to receive the sample object itself.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any, AsyncIterator, Callable, Dict, Optional, Union

import numpy as np

from . import _ferry
from .qos import QoSProfile, qos_from

_ANY = bytes(32)
QoSLike = Union[int, str, QoSProfile]


def _port_type(msg_type: Any) -> tuple[str, bytes, Any]:
    """(announced type name, type hash, receive kind) of a payload type."""
    if msg_type is bytes or msg_type is bytearray:
        return "*", _ANY, "bytes"
    if msg_type is str:
        return "*", _ANY, "str"
    if msg_type is np.ndarray:
        return "*", _ANY, "array"
    if msg_type is _ferry.Buffer:
        return "*", _ANY, "buffer"
    info = getattr(msg_type, "__ferry_type__", None)
    if info is None:
        raise TypeError(
            f"{msg_type!r} is not a payload type: use bytes, str, numpy.ndarray, "
            "ferry.Buffer or a class declared with @ferry.idl.message"
        )
    name, definition = info
    return name, _ferry.type_hash(name, definition), msg_type.decode


def _srv_types(srv_type: Any) -> tuple[tuple[str, bytes], tuple[str, bytes]]:
    """(request, response) type ids of a service class (or ``bytes``)."""
    if srv_type is bytes:
        return ("*", _ANY), ("*", _ANY)
    if not getattr(srv_type, "__ferry_service__", False):
        raise TypeError(f"{srv_type!r} is not a service type: declare it with @ferry.idl.service")
    ids = []
    for part in (srv_type.Request, srv_type.Response):
        name, definition = part.__ferry_type__
        ids.append((name, _ferry.type_hash(name, definition)))
    return ids[0], ids[1]


class Publisher:
    """Publishes messages of one type on one topic (``node.create_publisher``)."""

    def __init__(self, native: Any, msg_type: Any) -> None:
        self._native = native
        self.msg_type = msg_type
        self._encode = getattr(msg_type, "encode", None) if hasattr(msg_type, "__ferry_type__") else None

    @property
    def topic_name(self) -> str:
        """The fully qualified topic."""
        return self._native.topic_name

    def publish(self, msg: Any) -> None:
        """Publishes a message of the publisher's type (raw publishers take
        ``bytes``, ``bytearray``, ``str``, ``memoryview``, a numpy array or a
        received :class:`ferry.Buffer`, sent without an intermediate copy;
        from 4 KiB on, ``bytes``, a ``Buffer`` and a received sample's
        read-only array view are sent without any copy on the network
        paths)."""
        if self._encode is not None:
            if not isinstance(msg, self.msg_type):
                raise TypeError(
                    f"publisher of {self.msg_type.__ferry_type__[0]} on {self.topic_name} "
                    f"got a {type(msg).__name__}"
                )
            self._native.publish(self._encode(msg))
            return
        if isinstance(msg, (bytes, bytearray, str, _ferry.Buffer)):
            self._native.publish(msg)
            return
        if isinstance(msg, memoryview):
            msg = np.frombuffer(msg, dtype=np.uint8)
        if isinstance(msg, np.ndarray):
            arr = msg if msg.flags.c_contiguous else np.ascontiguousarray(msg)
            address = arr.__array_interface__["data"][0]
            owner = arr.base
            while isinstance(owner, np.ndarray):
                owner = owner.base
            if isinstance(owner, _ferry.Buffer) and not arr.flags.writeable:
                # A received sample's read-only view (or a slice of it),
                # echoed: its bytes are shared, not copied (network paths).
                self._native.publish_view(owner, address, arr.nbytes)
            else:
                self._native.publish_address(address, arr.nbytes)
            return
        raise TypeError(f"raw publisher on {self.topic_name} cannot send a {type(msg).__name__}")

    def get_subscription_count(self) -> int:
        """Matched subscriptions."""
        return self._native.get_subscription_count()

    def wait_for_subscribers(self, n: int = 1, timeout_sec: Optional[float] = None) -> bool:
        """Waits until ``n`` subscriptions match; False on timeout."""
        return self._native.wait_for_subscribers(n, timeout_sec)

    def connections(self) -> list[dict]:
        """One dict per connection: the path it took, counters, rate."""
        return self._native.connections()

    def destroy(self) -> None:
        """Leaves the graph."""
        self._native.destroy()


class Subscription:
    """Receives messages (``node.create_subscription``): with a callback, it
    runs in ``spin``; without, use :meth:`take`, :meth:`recv` or
    ``async for msg in sub``."""

    def __init__(self, native: Any, msg_type: Any, callback: Optional[Callable]) -> None:
        self._native = native
        self.msg_type = msg_type
        self.callback = callback

    @property
    def topic_name(self) -> str:
        """The fully qualified topic."""
        return self._native.topic_name

    @property
    def last_info(self) -> Optional[dict]:
        """Metadata of the last message received: seq, source_time_ns,
        publisher, transport (the path it came over)."""
        return self._native.last_info

    @property
    def dropped(self) -> int:
        """Messages dropped because the queue (QoS depth) was full."""
        return self._native.dropped

    def get_publisher_count(self) -> int:
        """Matched publishers."""
        return self._native.get_publisher_count()

    def wait_for_publishers(self, n: int = 1, timeout_sec: Optional[float] = None) -> bool:
        """Waits until ``n`` publishers match; False on timeout."""
        return self._native.wait_for_publishers(n, timeout_sec)

    def take(self) -> Any:
        """The oldest waiting message, or None."""
        return self._native.take()

    def recv(self, timeout_sec: Optional[float] = None) -> Any:
        """Waits for a message (GIL released); None on timeout."""
        return self._native.recv(timeout_sec)

    async def receive(self) -> Any:
        """Awaits the next message (asyncio; subscriptions without callback)."""
        msg = self._native.take()
        if msg is not None:
            return msg
        loop = asyncio.get_running_loop()
        fd = self._native.fileno()
        while True:
            ready = loop.create_future()
            loop.add_reader(fd, lambda: ready.done() or ready.set_result(None))
            try:
                await ready
            finally:
                loop.remove_reader(fd)
            msg = self._native.take()
            if msg is not None:
                return msg

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._messages()

    async def _messages(self) -> AsyncIterator[Any]:
        while True:
            yield await self.receive()

    def connections(self) -> list[dict]:
        """One dict per connection: the path it took, counters, rate."""
        return self._native.connections()

    def destroy(self) -> None:
        """Leaves the graph."""
        self._native.destroy()


class Service:
    """Answers requests (``node.create_service``); the handler runs in spin."""

    def __init__(self, native: Any, srv_type: Any) -> None:
        self._native = native
        self.srv_type = srv_type

    @property
    def service_name(self) -> str:
        """The fully qualified service name."""
        return self._native.service_name

    def destroy(self) -> None:
        """Leaves the graph."""
        self._native.destroy()


class Future:
    """The answer of ``client.call_async``: ``done()``, ``result()``,
    ``add_done_callback``, ``await future`` in asyncio, or
    ``ferry.spin_until_future_complete(node, future)``."""

    def __init__(self, pending: Any, decode: Optional[Callable]) -> None:
        self._pending = pending
        self._decode = decode
        self._callbacks: list[Callable[["Future"], None]] = []

    def done(self) -> bool:
        """True once the answer or the failure is in."""
        d = self._pending.done()
        if d and self._callbacks:
            callbacks, self._callbacks = self._callbacks, []
            for cb in callbacks:
                cb(self)
        return d

    def cancel(self) -> None:
        """Stops waiting; a late answer is dropped."""
        self._pending.cancel()

    def cancelled(self) -> bool:
        """True after :meth:`cancel` (before an answer)."""
        return self._pending.cancelled()

    def result(self, timeout_sec: Optional[float] = None) -> Any:
        """The response, waiting up to ``timeout_sec`` (None: forever).
        Raises CallTimeout, ServiceUnavailable or RemoteError."""
        data = self._pending.result(timeout_sec)
        return self._decode(data) if self._decode else data

    def exception(self, timeout_sec: Optional[float] = None) -> Optional[BaseException]:
        """The call's error, or None when it succeeded."""
        try:
            self.result(timeout_sec)
        except _ferry.CallError as e:
            return e
        return None

    def add_done_callback(self, fn: Callable[["Future"], None]) -> None:
        """Calls ``fn(future)`` once done (from spin, or now if done)."""
        self._callbacks.append(fn)
        self.done()

    def __await__(self):
        loop = asyncio.get_running_loop()
        return loop.run_in_executor(None, self.result).__await__()


class Client:
    """Calls a service (``node.create_client``)."""

    def __init__(self, native: Any, srv_type: Any) -> None:
        self._native = native
        self.srv_type = srv_type
        self._raw = srv_type is bytes

    @property
    def service_name(self) -> str:
        """The fully qualified service name."""
        return self._native.service_name

    def _encode(self, request: Any) -> bytes:
        if self._raw:
            return request
        if not isinstance(request, self.srv_type.Request):
            raise TypeError(f"client of {self.service_name} needs a {self.srv_type.__name__}.Request")
        return self.srv_type.Request.encode(request)

    def _decoder(self) -> Optional[Callable]:
        return None if self._raw else self.srv_type.Response.decode

    def service_is_ready(self) -> bool:
        """True when a service is connected."""
        return self._native.service_is_ready()

    def wait_for_service(self, timeout_sec: Optional[float] = None) -> bool:
        """Waits for a service (GIL released); False on timeout."""
        return self._native.wait_for_service(timeout_sec)

    def call(self, request: Any, timeout_sec: Optional[float] = None) -> Any:
        """Calls and waits (GIL released) for the response, within
        ``timeout_sec`` in all. Raises CallTimeout, ServiceUnavailable or
        RemoteError (the handler's exception text)."""
        data = self._native.call(self._encode(request), timeout_sec)
        return data if self._raw else self.srv_type.Response.decode(data)

    def call_async(self, request: Any) -> Future:
        """Sends the request now; returns a :class:`Future`."""
        return Future(self._native.call_async(self._encode(request)), self._decoder())

    def destroy(self) -> None:
        """Leaves the graph."""
        self._native.destroy()


class Timer:
    """Calls back every period while the node spins (``node.create_timer``)."""

    def __init__(self, native: Any) -> None:
        self._native = native

    @property
    def timer_period_ns(self) -> int:
        """The period in nanoseconds."""
        return self._native.timer_period_ns

    def cancel(self) -> None:
        """Stops calling back until :meth:`reset`."""
        self._native.cancel()

    def is_canceled(self) -> bool:
        """True after :meth:`cancel`."""
        return self._native.is_canceled()

    def reset(self) -> None:
        """Restarts the period from now."""
        self._native.reset()

    def time_until_next_call(self) -> float:
        """Seconds until the next call."""
        return self._native.time_until_next_call()

    def destroy(self) -> None:
        """Removes the timer."""
        self._native.destroy()


class Logger:
    """rclpy-style logger over :mod:`logging` (logger ``ferry.<node>``)."""

    def __init__(self, name: str) -> None:
        self._log = logging.getLogger(name)
        self.name = name

    def debug(self, msg: str) -> None:
        """Logs at DEBUG."""
        self._log.debug(msg)

    def info(self, msg: str) -> None:
        """Logs at INFO."""
        self._log.info(msg)

    def warning(self, msg: str) -> None:
        """Logs at WARNING."""
        self._log.warning(msg)

    warn = warning

    def error(self, msg: str) -> None:
        """Logs at ERROR."""
        self._log.error(msg)

    def fatal(self, msg: str) -> None:
        """Logs at CRITICAL."""
        self._log.critical(msg)

    def set_level(self, level: int) -> None:
        """Sets the threshold (a :mod:`logging` level)."""
        self._log.setLevel(level)


class Node:
    """A ferry node: ``ferry.Node("talker", namespace="/robot1")``.

    Every port picks the best path to each peer on its own (in-process,
    shared memory, UDP, TCP, MQTT). Callbacks run in ``ferry.spin(node)`` /
    ``ferry.spin_once(node)`` on the spinning thread.
    """

    def __init__(
        self,
        node_name: str,
        *,
        namespace: Optional[str] = None,
        domain_id: Optional[int] = None,
        config_file: Optional[str] = None,
    ) -> None:
        self._native = _ferry.Node(node_name, namespace, domain_id, config_file)
        self._ports: list[Any] = []
        self._logger = Logger("ferry" + self._native.fully_qualified_name.replace("/", "."))
        from . import _register

        _register(self)

    # -- identity -----------------------------------------------------------
    def get_name(self) -> str:
        """The node's name."""
        return self._native.name

    def get_namespace(self) -> str:
        """The node's namespace."""
        return self._native.namespace

    def get_fully_qualified_name(self) -> str:
        """``/namespace/name``."""
        return self._native.fully_qualified_name

    def get_logger(self) -> Logger:
        """The node's logger."""
        return self._logger

    @property
    def alive(self) -> bool:
        """True until :meth:`destroy_node`."""
        return self._native.alive

    @property
    def callback_errors(self) -> int:
        """Exceptions raised by this node's callbacks so far (each was logged)."""
        return self._native.callback_errors

    def discovery_stats(self) -> Dict[str, int]:
        """Counters of this node's discovery: datagrams ``sent``, ``received``,
        ``malformed``, from a ``foreign_domain``, forged (``not_owner``: a
        known participant's id from another address), ``refused`` (caps,
        rate, revision jumps), ``not_loopback`` (off-host under
        ``discovery = localhost``), ``evicted`` participants; and what signed
        discovery refused (``FERRY_SECURITY``): ``security_unsigned``,
        ``security_needs_security``, ``security_unknown_key``,
        ``security_foreign_ca``, ``security_expired``, ``security_denied``,
        ``security_bad_signature``, ``security_replayed``,
        ``security_duplicate``, ``security_unproven``, ``security_skipped``."""
        return dict(self._native.discovery_stats())

    def connection_stats(self) -> Dict[str, int]:
        """Counters of this node's incoming connections: ``accepted``,
        closed for sending no Hello in time (``no_hello``) or a bad one
        (``bad_hello``), ``evicted`` to make room for newer ones,
        ``refused`` at the caps, ``fd_exhausted`` (``accept`` out of
        file descriptors), and with security on ``tls_refused`` (a failed
        TLS handshake), ``denied`` (the writer's grants do not allow
        it), ``admin_denied`` (an admin request without the ``admin``
        or ``monitor`` grant) and protected UDP's ``udp_sessions``,
        ``udp_shake_refused``, ``udp_aead_failed``, ``udp_replayed`` and
        ``udp_plaintext_refused``."""
        return dict(self._native.connection_stats())

    # -- ports --------------------------------------------------------------
    def create_publisher(self, msg_type: Any, topic: str, qos_profile: QoSLike = 10) -> Publisher:
        """A publisher of ``msg_type`` on ``topic``."""
        name, hash_, _ = _port_type(msg_type)
        native = self._native.publisher(topic, name, hash_, qos_from(qos_profile).to_dict())
        return self._keep(Publisher(native, msg_type))

    def create_subscription(
        self,
        msg_type: Any,
        topic: str,
        callback: Optional[Callable[[Any], None]],
        qos_profile: QoSLike = 10,
    ) -> Subscription:
        """A subscription: ``callback(msg)`` runs in spin; ``callback=None``
        keeps messages for ``take``/``recv``/``async for``."""
        name, hash_, kind = _port_type(msg_type)
        native = self._native.subscription(
            topic, name, hash_, qos_from(qos_profile).to_dict(), kind, callback
        )
        return self._keep(Subscription(native, msg_type, callback))

    def create_service(self, srv_type: Any, srv_name: str, callback: Callable[[Any, Any], Any]) -> Service:
        """A service: ``callback(request, response) -> response`` runs in
        spin; an exception becomes the client's RemoteError."""
        req_id, resp_id = _srv_types(srv_type)
        if srv_type is bytes:

            def handle(data: bytes) -> bytes:
                return callback(data, b"")

        else:
            req_decode, resp_cls = srv_type.Request.decode, srv_type.Response

            def handle(data: bytes) -> bytes:
                resp = callback(req_decode(data), resp_cls())
                if not isinstance(resp, resp_cls):
                    raise TypeError(
                        f"service {srv_name} handler returned {type(resp).__name__}, "
                        f"not {srv_type.__name__}.Response"
                    )
                return resp_cls.encode(resp)

        native = self._native.service(srv_name, req_id, resp_id, handle)
        return self._keep(Service(native, srv_type))

    def create_client(self, srv_type: Any, srv_name: str) -> Client:
        """A client of ``srv_name``."""
        req_id, resp_id = _srv_types(srv_type)
        return self._keep(Client(self._native.client(srv_name, req_id, resp_id), srv_type))

    def create_timer(self, timer_period_sec: float, callback: Callable[[], None]) -> Timer:
        """A timer calling ``callback()`` every period while spinning."""
        return self._keep(Timer(self._native.timer(float(timer_period_sec), callback)))

    def _keep(self, port: Any) -> Any:
        self._ports.append(port)
        return port

    def _forget(self, port: Any) -> bool:
        if port in self._ports:
            self._ports.remove(port)
            port.destroy()
            return True
        return False

    destroy_publisher = _forget
    destroy_subscription = _forget
    destroy_service = _forget
    destroy_client = _forget
    destroy_timer = _forget

    # -- graph ----------------------------------------------------------------
    def get_topic_names_and_types(self) -> list[tuple[str, list[str]]]:
        """Topics known in the domain, with their types."""
        return self._native.topic_names_and_types()

    def get_service_names_and_types(self) -> list[tuple[str, list[str]]]:
        """Services known in the domain, with their types."""
        return self._native.service_names_and_types()

    def get_node_names(self) -> list[str]:
        """Nodes known in the domain."""
        return self._native.node_names()

    def resolve_topic_name(self, topic: str) -> str:
        """The fully qualified name ``topic`` resolves to."""
        return self._native.resolve(topic)

    # -- lifetime -------------------------------------------------------------
    def spin_once(self, timeout_sec: Optional[float] = None) -> bool:
        """Runs at most one ready callback; True when one ran."""
        return self._native.spin_once(timeout_sec)

    def destroy_node(self) -> None:
        """Closes every port and leaves the graph (idempotent)."""
        self._ports.clear()
        self._native.destroy()

    def __enter__(self) -> "Node":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.destroy_node()

    def __repr__(self) -> str:
        state = "alive" if self.alive else "destroyed"
        return f"<ferry.Node {self._native.fully_qualified_name} {state}>" if self.alive else "<ferry.Node destroyed>"
