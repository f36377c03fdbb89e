"""``std_msgs``: single values and the standard Header."""

from ferry.idl import bool_, float64, int32, int64, message, string

from .builtin_interfaces import Time

__all__ = ["String", "Bool", "Int32", "Int64", "Float64", "Empty", "Header"]


@message("std_msgs/msg/String")
class String:
    """A text."""

    data: string = ""


@message("std_msgs/msg/Bool")
class Bool:
    """A boolean."""

    data: bool_ = False


@message("std_msgs/msg/Int32")
class Int32:
    """A 32-bit integer."""

    data: int32 = 0


@message("std_msgs/msg/Int64")
class Int64:
    """A 64-bit integer."""

    data: int64 = 0


@message("std_msgs/msg/Float64")
class Float64:
    """A 64-bit float."""

    data: float64 = 0.0


@message("std_msgs/msg/Empty")
class Empty:
    """No fields (CDR carries one padding byte, like ROS 2)."""


@message("std_msgs/msg/Header")
class Header:
    """Acquisition time and coordinate frame of a stamped message."""

    stamp: Time
    frame_id: string = ""
