"""Standard ROS 2 message types, field for field the same as ferry's Rust
``ferry::msgs`` (names, field order, types and definitions), so Python and
Rust nodes talk to each other and to ROS 2.

    from ferry.msgs.geometry_msgs import Twist
    from ferry.msgs import std_msgs
"""

from . import builtin_interfaces, example_interfaces, geometry_msgs, sensor_msgs, std_msgs

__all__ = ["builtin_interfaces", "std_msgs", "geometry_msgs", "sensor_msgs", "example_interfaces"]
