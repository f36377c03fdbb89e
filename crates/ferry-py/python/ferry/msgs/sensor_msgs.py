"""``sensor_msgs``: images, joint states and point clouds.

Their byte arrays (``data``) decode to numpy ``uint8`` arrays that are views of
the received buffer, and accept numpy arrays, bytes or lists on encode.
"""

from ferry.idl import bool_, float64, message, sequence, string, uint8, uint32

from .std_msgs import Header

__all__ = ["Image", "JointState", "PointField", "PointCloud2"]


@message("sensor_msgs/msg/Image")
class Image:
    """An uncompressed image: ``height`` rows of ``step`` bytes in ``data``."""

    header: Header
    height: uint32 = 0
    width: uint32 = 0
    encoding: string = ""
    is_bigendian: uint8 = 0
    step: uint32 = 0
    data: sequence(uint8)


@message("sensor_msgs/msg/JointState")
class JointState:
    """Joint names with their positions, velocities and efforts."""

    header: Header
    name: sequence(string)
    position: sequence(float64)
    velocity: sequence(float64)
    effort: sequence(float64)


@message("sensor_msgs/msg/PointField")
class PointField:
    """One field of a :class:`PointCloud2` point (``datatype`` is one of the
    constants below)."""

    INT8 = 1
    UINT8 = 2
    INT16 = 3
    UINT16 = 4
    INT32 = 5
    UINT32 = 6
    FLOAT32 = 7
    FLOAT64 = 8

    name: string = ""
    offset: uint32 = 0
    datatype: uint8 = 0
    count: uint32 = 0


@message("sensor_msgs/msg/PointCloud2")
class PointCloud2:
    """Points of ``point_step`` bytes laid out as ``fields`` describe."""

    header: Header
    height: uint32 = 0
    width: uint32 = 0
    fields: sequence(PointField)
    is_bigendian: bool_ = False
    point_step: uint32 = 0
    row_step: uint32 = 0
    data: sequence(uint8)
    is_dense: bool_ = False
