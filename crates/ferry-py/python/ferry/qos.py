"""QoS profiles named like rclpy's (``ferry.qos.sensor_data``,
``qos_profile_sensor_data``, ``QoSProfile(depth=10, ...)``).

A plain ``int`` wherever a profile is expected means ``QoSProfile(depth=n)``
(reliable, keep_last n, volatile), as in rclpy.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, replace
from typing import Any, Optional, Union


class ReliabilityPolicy(str, enum.Enum):
    """Repair losses (``RELIABLE``) or not (``BEST_EFFORT``)."""

    RELIABLE = "reliable"
    BEST_EFFORT = "best_effort"


class HistoryPolicy(str, enum.Enum):
    """Keep the last ``depth`` samples or all of them (bounded by ferry)."""

    KEEP_LAST = "keep_last"
    KEEP_ALL = "keep_all"


class DurabilityPolicy(str, enum.Enum):
    """``TRANSIENT_LOCAL`` replays history to late joiners."""

    VOLATILE = "volatile"
    TRANSIENT_LOCAL = "transient_local"


def _seconds(value: Any, name: str) -> Optional[float]:
    """Seconds from a float, an int or an object with ``nanoseconds``."""
    if value is None:
        return None
    if hasattr(value, "nanoseconds"):
        return value.nanoseconds / 1e9
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise TypeError(f"QoS {name} must be seconds (float) or a Duration, got {type(value).__name__}")


@dataclass(frozen=True)
class QoSProfile:
    """A QoS profile: ROS 2's policies plus ferry's optional transport pin
    (``"shm"``, ``"udp"``, ``"tcp"``, ``"mqtt"``, ``"intra"``; None = best path)."""

    depth: int = 10
    history: HistoryPolicy = HistoryPolicy.KEEP_LAST
    reliability: ReliabilityPolicy = ReliabilityPolicy.RELIABLE
    durability: DurabilityPolicy = DurabilityPolicy.VOLATILE
    deadline: Any = None
    lifespan: Any = None
    liveliness_lease_duration: Any = None
    transport: Optional[str] = None

    def __post_init__(self) -> None:
        if not isinstance(self.depth, int) or self.depth < 0:
            raise ValueError(f"QoS depth must be an int >= 0, got {self.depth!r}")
        object.__setattr__(self, "history", HistoryPolicy(self.history))
        object.__setattr__(self, "reliability", ReliabilityPolicy(self.reliability))
        object.__setattr__(self, "durability", DurabilityPolicy(self.durability))

    def to_dict(self) -> dict:
        """The form the native layer reads (validated again there)."""
        return {
            "depth": self.depth,
            "history": self.history.value,
            "reliability": self.reliability.value,
            "durability": self.durability.value,
            "deadline": _seconds(self.deadline, "deadline"),
            "lifespan": _seconds(self.lifespan, "lifespan"),
            "liveliness_lease_duration": _seconds(self.liveliness_lease_duration, "liveliness"),
            "transport": self.transport,
        }

    def replace(self, **changes: Any) -> "QoSProfile":
        """A copy with some policies changed."""
        return replace(self, **changes)


#: ROS 2 default: reliable, keep_last 10, volatile.
qos_profile_system_default = QoSProfile()
system_default = qos_profile_system_default
default = qos_profile_system_default
#: Sensors: best effort, keep_last 5.
qos_profile_sensor_data = QoSProfile(depth=5, reliability=ReliabilityPolicy.BEST_EFFORT)
sensor_data = qos_profile_sensor_data
#: Services: reliable, keep_last 10.
qos_profile_services_default = QoSProfile()
services_default = qos_profile_services_default
#: Parameters (as rclpy): reliable, keep_last 1000.
qos_profile_parameters = QoSProfile(depth=1000)
parameters = qos_profile_parameters
#: Latched: reliable, keep_last 1, transient_local (late joiners get the last sample).
latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)

_BY_NAME = {
    "default": default,
    "system_default": system_default,
    "sensor_data": sensor_data,
    "services_default": services_default,
    "parameters": parameters,
    "latched": latched,
}


def qos_from(qos: Union[int, str, QoSProfile]) -> QoSProfile:
    """A profile from an int depth, a profile name or a profile."""
    if isinstance(qos, QoSProfile):
        return qos
    if isinstance(qos, bool):
        raise TypeError("QoS must be an int depth, a profile name or a QoSProfile, not bool")
    if isinstance(qos, int):
        return QoSProfile(depth=qos)
    if isinstance(qos, str):
        try:
            return _BY_NAME[qos]
        except KeyError:
            raise ValueError(f"unknown QoS profile `{qos}` (known: {', '.join(_BY_NAME)})") from None
    raise TypeError(f"QoS must be an int depth, a profile name or a QoSProfile, got {type(qos).__name__}")
