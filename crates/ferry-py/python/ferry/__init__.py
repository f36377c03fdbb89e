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

import atexit
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
from . import executors, idl, msgs, qos
from .idl import DecodeError, EncodeError, message, service
from .node import Client, Future, Logger, Node, Publisher, Service, Subscription, Timer

__all__ = [
    "Buffer", "BuildError", "CallError", "CallTimeout", "Client", "DecodeError", "DestroyedError",
    "EncodeError", "FerryError", "Future", "executors", "Logger", "Node", "PublishError", "Publisher",
    "RemoteError", "Service", "ServiceUnavailable", "Subscription", "Timer", "create_node",
    "idl", "init", "message", "msgs", "ok", "qos", "service", "shutdown", "spin", "spin_once",
    "spin_until_future_complete",
]

_log = logging.getLogger("ferry")
_nodes: "weakref.WeakSet[Node]" = weakref.WeakSet()
_interrupted = False


def _register(node: Node) -> None:
    _nodes.add(node)


@atexit.register
def _destroy_all_at_exit() -> None:
    """Nodes still alive when the interpreter exits leave the graph cleanly
    (and remove their shared-memory segments): Python does not promise to
    finalize module-level objects."""
    for node in list(_nodes):
        try:
            node.destroy_node()
        except Exception:  # exiting anyway; never mask the real exit status
            pass


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


def _interrupt() -> None:
    """A spin was interrupted by Ctrl-C: :func:`ok` turns False."""
    global _interrupted
    _interrupted = True
    _log.info("spin interrupted (Ctrl-C); shutting down")


def _spinner(node: Node, executor: Any) -> Any:
    """What spins: ``executor`` (``node`` added to it) or the node itself."""
    if executor is None:
        return node
    if not hasattr(executor, "add_node"):
        raise TypeError(
            f"executor must be a ferry executor, got {type(executor).__name__} "
            "(a timeout goes in timeout_sec=, as in rclpy)"
        )
    executor.add_node(node)
    return executor


def spin_once(node: Node, *, executor: Any = None, timeout_sec: Optional[float] = None) -> bool:
    """Runs at most one ready callback of ``node`` (or of ``executor``, with
    ``node`` added to it), waiting up to ``timeout_sec`` (None: until one is
    ready). True when one ran. Ctrl-C raises KeyboardInterrupt."""
    return _spinner(node, executor).spin_once(timeout_sec)


def spin(node: Node, executor: Any = None) -> None:
    """Runs ``node``'s callbacks (or ``executor``'s, with ``node`` added)
    until it is destroyed, :func:`shutdown` is called, or Ctrl-C — which
    returns cleanly (and makes :func:`ok` False)."""
    if executor is not None:
        _spinner(node, executor).spin()
        return
    try:
        while node.alive and not _interrupted:
            node.spin_once(0.5)
    except KeyboardInterrupt:
        _interrupt()
    except DestroyedError:
        pass


def spin_until_future_complete(
    node: Node, future: Future, executor: Any = None, timeout_sec: Optional[float] = None
) -> bool:
    """Spins ``node`` (or ``executor``) until ``future`` is done or
    ``timeout_sec`` passes; True when it is done."""
    return executors.spin_until_done(_spinner(node, executor).spin_once, future, timeout_sec)
