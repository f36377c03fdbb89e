"""``builtin_interfaces``: time stamps."""

from ferry.idl import int32, message, uint32

__all__ = ["Time"]


@message("builtin_interfaces/msg/Time")
class Time:
    """A point in time: seconds and nanoseconds (since the Unix epoch for stamps)."""

    sec: int32 = 0
    nanosec: uint32 = 0
