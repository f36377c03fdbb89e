"""``geometry_msgs``: vectors, points, orientations, poses and velocities."""

from ferry.idl import float64, message

__all__ = ["Vector3", "Point", "Quaternion", "Pose", "Twist"]


@message("geometry_msgs/msg/Vector3")
class Vector3:
    """A 3D vector."""

    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0


@message("geometry_msgs/msg/Point")
class Point:
    """A 3D position."""

    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0


@message("geometry_msgs/msg/Quaternion")
class Quaternion:
    """An orientation. ``w`` defaults to 0.0 like the Rust ``Default``
    (ROS 2 uses 1.0): set ``w=1.0`` for the identity."""

    x: float64 = 0.0
    y: float64 = 0.0
    z: float64 = 0.0
    w: float64 = 0.0


@message("geometry_msgs/msg/Pose")
class Pose:
    """A position and an orientation."""

    position: Point
    orientation: Quaternion


@message("geometry_msgs/msg/Twist")
class Twist:
    """Linear and angular velocity."""

    linear: Vector3
    angular: Vector3
