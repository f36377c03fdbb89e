//! Standard ROS 2 message types, CDR-compatible with ROS 2.

/// `builtin_interfaces`.
pub mod builtin_interfaces {
    use serde::{Deserialize, Serialize};
    /// `builtin_interfaces/msg/Time`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Time {
        /// Seconds.
        pub sec: i32,
        /// Nanoseconds.
        pub nanosec: u32,
    }
    crate::message!(
        Time,
        "builtin_interfaces/msg/Time",
        "int32 sec\nuint32 nanosec"
    );
}

/// `std_msgs`.
pub mod std_msgs {
    use serde::{Deserialize, Serialize};

    /// `std_msgs/msg/String`.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct String {
        /// The text.
        pub data: std::string::String,
    }
    crate::message!(String, "std_msgs/msg/String", "string data");

    /// `std_msgs/msg/Bool`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Bool {
        /// The value.
        pub data: bool,
    }
    crate::message!(Bool, "std_msgs/msg/Bool", "bool data");

    /// `std_msgs/msg/Int32`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Int32 {
        /// The value.
        pub data: i32,
    }
    crate::message!(Int32, "std_msgs/msg/Int32", "int32 data");

    /// `std_msgs/msg/Int64`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Int64 {
        /// The value.
        pub data: i64,
    }
    crate::message!(Int64, "std_msgs/msg/Int64", "int64 data");

    /// `std_msgs/msg/Float64`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
    pub struct Float64 {
        /// The value.
        pub data: f64,
    }
    crate::message!(Float64, "std_msgs/msg/Float64", "float64 data");

    /// `std_msgs/msg/Empty` (CDR carries one padding byte, like ROS 2).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Empty {
        /// ROS 2's `structure_needs_at_least_one_member`.
        pub structure_needs_at_least_one_member: u8,
    }
    crate::message!(Empty, "std_msgs/msg/Empty", "");

    /// `std_msgs/msg/Header`.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Header {
        /// Acquisition time.
        pub stamp: super::builtin_interfaces::Time,
        /// Coordinate frame.
        pub frame_id: std::string::String,
    }
    crate::message!(
        Header,
        "std_msgs/msg/Header",
        "builtin_interfaces/Time stamp\nstring frame_id"
    );
}

/// `geometry_msgs`.
pub mod geometry_msgs {
    use serde::{Deserialize, Serialize};

    /// `geometry_msgs/msg/Vector3`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
    pub struct Vector3 {
        /// x.
        pub x: f64,
        /// y.
        pub y: f64,
        /// z.
        pub z: f64,
    }
    crate::message!(
        Vector3,
        "geometry_msgs/msg/Vector3",
        "float64 x\nfloat64 y\nfloat64 z"
    );

    /// `geometry_msgs/msg/Point`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
    pub struct Point {
        /// x.
        pub x: f64,
        /// y.
        pub y: f64,
        /// z.
        pub z: f64,
    }
    crate::message!(
        Point,
        "geometry_msgs/msg/Point",
        "float64 x\nfloat64 y\nfloat64 z"
    );

    /// `geometry_msgs/msg/Quaternion`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
    pub struct Quaternion {
        /// x.
        pub x: f64,
        /// y.
        pub y: f64,
        /// z.
        pub z: f64,
        /// w.
        pub w: f64,
    }
    crate::message!(
        Quaternion,
        "geometry_msgs/msg/Quaternion",
        "float64 x\nfloat64 y\nfloat64 z\nfloat64 w"
    );

    /// `geometry_msgs/msg/Pose`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
    pub struct Pose {
        /// Position.
        pub position: Point,
        /// Orientation.
        pub orientation: Quaternion,
    }
    crate::message!(
        Pose,
        "geometry_msgs/msg/Pose",
        "Point position\nQuaternion orientation"
    );

    /// `geometry_msgs/msg/Twist`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
    pub struct Twist {
        /// Linear velocity.
        pub linear: Vector3,
        /// Angular velocity.
        pub angular: Vector3,
    }
    crate::message!(
        Twist,
        "geometry_msgs/msg/Twist",
        "Vector3 linear\nVector3 angular"
    );
}

/// `sensor_msgs`.
pub mod sensor_msgs {
    use serde::{Deserialize, Serialize};

    /// `sensor_msgs/msg/Image`.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct Image {
        /// Header.
        pub header: super::std_msgs::Header,
        /// Rows.
        pub height: u32,
        /// Columns.
        pub width: u32,
        /// Pixel encoding (`rgb8`, `mono16`, …).
        pub encoding: String,
        /// Big-endian data.
        pub is_bigendian: u8,
        /// Bytes per row.
        pub step: u32,
        /// Pixels.
        #[serde(with = "serde_bytes")]
        pub data: Vec<u8>,
    }
    crate::message!(
        Image,
        "sensor_msgs/msg/Image",
        "std_msgs/Header header\nuint32 height\nuint32 width\nstring encoding\nuint8 is_bigendian\nuint32 step\nuint8[] data"
    );

    /// `sensor_msgs/msg/JointState`.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct JointState {
        /// Header.
        pub header: super::std_msgs::Header,
        /// Joint names.
        pub name: Vec<String>,
        /// Positions.
        pub position: Vec<f64>,
        /// Velocities.
        pub velocity: Vec<f64>,
        /// Efforts.
        pub effort: Vec<f64>,
    }
    crate::message!(
        JointState,
        "sensor_msgs/msg/JointState",
        "std_msgs/Header header\nstring[] name\nfloat64[] position\nfloat64[] velocity\nfloat64[] effort"
    );

    /// `sensor_msgs/msg/PointField`: one field of a [`PointCloud2`] point.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PointField {
        /// Field name (`x`, `rgb`, ...).
        pub name: String,
        /// Byte offset inside the point.
        pub offset: u32,
        /// Datatype (1 = INT8 ... 8 = FLOAT64).
        pub datatype: u8,
        /// Elements of that datatype.
        pub count: u32,
    }
    crate::message!(
        PointField,
        "sensor_msgs/msg/PointField",
        "string name\nuint32 offset\nuint8 datatype\nuint32 count"
    );

    /// `sensor_msgs/msg/PointCloud2`.
    #[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct PointCloud2 {
        /// Stamp and frame.
        pub header: super::std_msgs::Header,
        /// Rows (1 for an unordered cloud).
        pub height: u32,
        /// Points per row.
        pub width: u32,
        /// Layout of one point.
        pub fields: Vec<PointField>,
        /// Byte order of `data`.
        pub is_bigendian: bool,
        /// Bytes per point.
        pub point_step: u32,
        /// Bytes per row.
        pub row_step: u32,
        /// The points.
        #[serde(with = "serde_bytes")]
        pub data: Vec<u8>,
        /// No invalid points.
        pub is_dense: bool,
    }
    crate::message!(
        PointCloud2,
        "sensor_msgs/msg/PointCloud2",
        "std_msgs/Header header\nuint32 height\nuint32 width\nPointField[] fields\nbool is_bigendian\nuint32 point_step\nuint32 row_step\nuint8[] data\nbool is_dense"
    );
}

/// `example_interfaces` (services).
pub mod example_interfaces {
    use serde::{Deserialize, Serialize};

    /// Request of `example_interfaces/srv/AddTwoInts`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct AddTwoIntsRequest {
        /// a.
        pub a: i64,
        /// b.
        pub b: i64,
    }
    crate::message!(
        AddTwoIntsRequest,
        "example_interfaces/srv/AddTwoInts_Request",
        "int64 a\nint64 b"
    );

    /// Response of `example_interfaces/srv/AddTwoInts`.
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
    pub struct AddTwoIntsResponse {
        /// a + b.
        pub sum: i64,
    }
    crate::message!(
        AddTwoIntsResponse,
        "example_interfaces/srv/AddTwoInts_Response",
        "int64 sum"
    );
}
