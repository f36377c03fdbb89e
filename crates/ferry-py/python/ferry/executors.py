"""Executors (rclpy's names): one thread runs the callbacks of several
nodes, one at a time, round robin over nodes and their ports.

    executor = ferry.executors.SingleThreadedExecutor()
    executor.add_node(camera)
    executor.add_node(planner)
    executor.spin()          # until Ctrl-C (returns cleanly) or ferry.shutdown()
"""

from __future__ import annotations

import time
from typing import Any, Optional

from . import _ferry


def spin_until_done(spin_once: Any, future: Any, timeout_sec: Optional[float]) -> bool:
    """Calls ``spin_once(slice)`` until ``future`` is done or ``timeout_sec``
    passes; True when done."""
    end = None if timeout_sec is None else time.monotonic() + timeout_sec
    while not future.done():
        left = None if end is None else end - time.monotonic()
        if left is not None and left <= 0:
            return False
        spin_once(0.1 if left is None else min(left, 0.1))
    return True


class SingleThreadedExecutor:
    """Spins the callbacks of its nodes on the calling thread."""

    def __init__(self) -> None:
        self._native = _ferry.Executor()
        self._nodes: list[Any] = []

    def add_node(self, node: Any) -> bool:
        """Adds a node; False when it was destroyed."""
        if not self._native.add_node(node._native):
            return False
        if node not in self._nodes:
            self._nodes.append(node)
        return True

    def remove_node(self, node: Any) -> None:
        """Removes a node (its callbacks no longer run here)."""
        self._native.remove_node(node._native)
        if node in self._nodes:
            self._nodes.remove(node)

    def get_nodes(self) -> list[Any]:
        """The nodes still alive in this executor."""
        self._nodes = [n for n in self._nodes if n.alive]
        return list(self._nodes)

    def spin_once(self, timeout_sec: Optional[float] = None) -> bool:
        """Runs at most one ready callback, waiting up to ``timeout_sec``
        (None: until one is ready). True when one ran."""
        return self._native.spin_once(timeout_sec)

    def spin(self) -> None:
        """Runs callbacks until every node is destroyed, :func:`ferry.shutdown`,
        or Ctrl-C — which returns cleanly and makes :func:`ferry.ok` False."""
        from . import _interrupt, ok

        try:
            while ok() and self.get_nodes():
                self._native.spin_once(0.5)
        except KeyboardInterrupt:
            _interrupt()

    def spin_until_future_complete(self, future: Any, timeout_sec: Optional[float] = None) -> bool:
        """Spins until ``future`` is done or ``timeout_sec`` passes; True when done."""
        return spin_until_done(self._native.spin_once, future, timeout_sec)

    def shutdown(self, timeout_sec: Optional[float] = None) -> bool:
        """Removes every node (they stay alive)."""
        for n in list(self._nodes):
            self.remove_node(n)
        return True


#: rclpy's generic name.
Executor = SingleThreadedExecutor
