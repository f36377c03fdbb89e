"""Ferry for Python: an rclpy-shaped API over ferry's ports.

>>> import ferry
>>> from ferry.msgs.std_msgs import String
>>> node = ferry.Node("talker")
>>> pub = node.create_publisher(String, "/chatter", 10)
>>> sub = node.create_subscription(String, "/chatter", lambda m: print(m.data), 10)
>>> pub.publish(String(data="hello"))
>>> ferry.spin_once(node, timeout_sec=1.0)
hello
True

Every publisher/subscriber pair takes the best path on its own: in-process,
shared memory (zero-copy; large messages are received as views of the
shared sample), ferry's reliable UDP, TCP or MQTT. Callbacks run on the
thread that spins; ferry's own threads never hold the GIL.
"""

from __future__ import annotations

import logging
import time
import weakref
from typing import Any, Optional

from . import _ferry
from ._ferry import (
    Buffer,
    BuildError,
    CallError,
    CallTimeout,
    DestroyedError,
    FerryError,
    PublishError,
    RemoteError,
    ServiceUnavailable,
)
from . import idl, msgs, qos
from .idl import DecodeError, EncodeError, message, service
from .node import Client, Future, Logger, Node, Publisher, Service, Subscription, Timer

__all__ = [
    "Buffer", "BuildError", "CallError", "CallTimeout", "Client", "DecodeError", "DestroyedError",
    "EncodeError", "FerryError", "Future", "Logger", "Node", "PublishError", "Publisher",
    "RemoteError", "Service", "ServiceUnavailable", "Subscription", "Timer", "create_node",
    "idl", "init", "message", "msgs", "ok", "qos", "service", "shutdown", "spin", "spin_once",
    "spin_until_future_complete",
]

_log = logging.getLogger("ferry")
_nodes: "weakref.WeakSet[Node]" = weakref.WeakSet()
_interrupted = False


def _register(node: Node) -> None:
    _nodes.add(node)


def init(args: Any = None) -> None:
    """Optional (rclpy compatibility): resets :func:`ok` and sets up
    console logging when the program has none."""
    global _interrupted
    _interrupted = False
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="[%(levelname)s] [%(name)s]: %(message)s")


def ok() -> bool:
    """False once a spin was interrupted (Ctrl-C) or :func:`shutdown` ran."""
    return not _interrupted


def shutdown() -> None:
    """Destroys every node still alive; :func:`ok` becomes False."""
    global _interrupted
    _interrupted = True
    for node in list(_nodes):
        node.destroy_node()


def create_node(node_name: str, **kwargs: Any) -> Node:
    """``ferry.Node(node_name, **kwargs)`` (rclpy spelling)."""
    return Node(node_name, **kwargs)


def spin_once(node: Node, *, timeout_sec: Optional[float] = None) -> bool:
    """Runs at most one ready callback of ``node``, waiting up to
    ``timeout_sec`` (None: until one is ready). True when one ran. Ctrl-C
    raises KeyboardInterrupt."""
    return node.spin_once(timeout_sec)


def spin(node: Node) -> None:
    """Runs ``node``'s callbacks until it is destroyed, :func:`shutdown` is
    called, or Ctrl-C — which returns cleanly (and makes :func:`ok` False)."""
    global _interrupted
    try:
        while node.alive and not _interrupted:
            node.spin_once(0.5)
    except KeyboardInterrupt:
        _interrupted = True
        _log.info("spin interrupted (Ctrl-C); shutting down")
    except DestroyedError:
        pass


def spin_until_future_complete(node: Node, future: Future, timeout_sec: Optional[float] = None) -> bool:
    """Spins ``node`` until ``future`` is done or ``timeout_sec`` passes;
    True when it is done."""
    end = None if timeout_sec is None else time.monotonic() + timeout_sec
    while not future.done():
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            return False
        node.spin_once(0.1 if left is None else min(left, 0.1))
    return True
