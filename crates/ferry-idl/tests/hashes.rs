//! RIHS01 hashes of the shipped interfaces against the values ROS 2 itself
//! produced. Sources (the values appear verbatim there):
//!
//! - A: ros2/rmw_zenoh @99a6a2bd `docs/design.md` (key expressions and
//!   liveliness tokens); ros2/rosbag2 @92b5beb7 and @3286736d
//!   `rosbag2_tests/resources/mcap/bag_with_topics_and_service_events*/metadata.yaml`
//!   (recorded by rosbag2: `type_description_hash`).
//! - B: `ros2 topic|service|action info --verbose` output in the ROS 2
//!   documentation tutorials ("Understanding topics / services / actions").
//! - C: youtalk/swift-ros2 @1d3e1cda and @06a8eaed
//!   `Tests/SwiftROS2GenTests/{HashGoldenTests,ActionHashGoldenTests}.swift`
//!   ("from `ros2 interface show --type-description-hashes` against ROS 2
//!   Jazzy"), and other projects' tables copied from a Jazzy install.

use ferry_idl::{Interfaces, TypeName};

const REFERENCE: &[(&str, &str, &str)] = &[
    // A
    (
        "std_msgs/msg/String",
        "df668c740482bbd48fb39d76a70dfd4bd59db1288021743503259e948f6b1a18",
        "A rmw_zenoh design.md, rosbag2",
    ),
    (
        "example_interfaces/srv/AddTwoInts",
        "e118de6bf5eeb66a2491b5bda11202e7b68f198d6f67922cf30364858239c81a",
        "A rmw_zenoh design.md",
    ),
    (
        "example_interfaces/srv/AddTwoInts_Event",
        "32c1d140259c71e5c355115942bcb31df98b4330e4d906b1b75ccb1c9b3ce6c8",
        "A rosbag2",
    ),
    (
        "example_interfaces/action/Fibonacci_FeedbackMessage",
        "c1de71afd52e49a89c53d8262366884185bc0a02f78ce051c4e46b0a7fe59bb2",
        "A rosbag2",
    ),
    (
        "example_interfaces/action/Fibonacci_SendGoal_Event",
        "d5e5b312dbf847307b0e876c2ecc9d80258e95b0d17f8f7bfc581c4a29c83484",
        "A rosbag2",
    ),
    (
        "example_interfaces/action/Fibonacci_GetResult_Event",
        "ac4e9cdb954c2e192c9f0753d46f59ab6f0101d5fb5b9542fd8ab2906e40c4d9",
        "A rosbag2",
    ),
    (
        "action_msgs/msg/GoalStatusArray",
        "6c1684b00f177d37438febe6e709fc4e2b0d4248dca4854946f9ed8b30cda83e",
        "A rosbag2",
    ),
    (
        "action_msgs/srv/CancelGoal_Event",
        "178f81615ce6be41ad328211d7a56b08b00e73f41f0b8aec256b2f3ff97a5e7e",
        "A rosbag2",
    ),
    (
        "rcl_interfaces/msg/Log",
        "e28ce254ca8abc06abf92773b74602cdbf116ed34fbaf294fb9f81da9f318eac",
        "A rosbag2",
    ),
    (
        "rcl_interfaces/msg/ParameterEvent",
        "043e627780fcad87a22d225bc2a037361dba713fca6a6b9f4b869a5aa0393204",
        "A rosbag2",
    ),
    // B
    (
        "action_msgs/srv/CancelGoal",
        "573d8b0a534451d7bc2ac8c5ffde8ac14b8593b7001175d0cd6516dcbeb8689a",
        "B actions tutorial",
    ),
    (
        "geometry_msgs/msg/Twist",
        "9c45bf16fe0983d80e3cfe750d6835843d265a9a6c46bd2e609fcddde6fb8d2a",
        "B topics tutorial",
    ),
    (
        "std_srvs/srv/Empty",
        "5888399dedec5ccc85ea6451949fd2c9f97bfdf963f9a588821639fcd31b5d19",
        "B services tutorial",
    ),
    // C
    (
        "builtin_interfaces/msg/Time",
        "b106235e25a4c5ed35098aa0a61a3ee9c9b18d197f398b0e4206cea9acf9c197",
        "C swift-ros2",
    ),
    (
        "builtin_interfaces/msg/Duration",
        "e8d009f659816f758b75334ee1a9ca5b5c0b859843261f14c7f937349599d93b",
        "C swift-ros2",
    ),
    (
        "std_msgs/msg/Header",
        "f49fb3ae2cf070f793645ff749683ac6b06203e41c891e17701b1cb597ce6a01",
        "C swift-ros2",
    ),
    (
        "std_msgs/msg/Bool",
        "feb91e995ff9ebd09c0cb3d2aed18b11077585839fb5db80193b62d74528f6c9",
        "C swift-ros2",
    ),
    (
        "std_msgs/msg/Empty",
        "20b625256f32d5dbc0d04fee44f43c41e51c70d3502f84b4a08e7a9c26a96312",
        "C swift-ros2",
    ),
    (
        "std_msgs/msg/Float64",
        "705ba9c3d1a09df43737eb67095534de36fd426c0587779bda2bc51fe790182a",
        "C swift-ros2",
    ),
    (
        "std_msgs/msg/Int32",
        "b6578ded3c58c626cfe8d1a6fb6e04f706f97e9f03d2727c9ff4e74b1cef0deb",
        "C swift-ros2",
    ),
    (
        "geometry_msgs/msg/Vector3",
        "cc12fe83e4c02719f1ce8070bfd14aecd40f75a96696a67a2a1f37f7dbb0765d",
        "C swift-ros2",
    ),
    (
        "geometry_msgs/msg/Point",
        "6963084842a9b04494d6b2941d11444708d892da2f4b09843b9c43f42a7f6881",
        "C swift-ros2",
    ),
    (
        "geometry_msgs/msg/Quaternion",
        "8a765f66778c8ff7c8ab94afcc590a2ed5325a1d9a076ffff38fbce36f458684",
        "C swift-ros2",
    ),
    (
        "geometry_msgs/msg/Pose",
        "d501954e9476cea2996984e812054b68026ae0bfae789d9a10b23daf35cc90fa",
        "C swift-ros2",
    ),
    (
        "geometry_msgs/msg/Transform",
        "beb83fbe698636351461f6f35d1abb20010c43d55374d81bd041f1ba2581fddc",
        "C swift-ros2",
    ),
    (
        "unique_identifier_msgs/msg/UUID",
        "1b8e8aca958cbea28fe6ef60bf6c19b683c97a9ef60bb34752067d0f2f7ab437",
        "C swift-ros2",
    ),
    (
        "action_msgs/msg/GoalInfo",
        "6398fe763154554353930716b225947f93b672f0fb2e49fdd01bb7a7e37933e9",
        "C swift-ros2",
    ),
    (
        "action_msgs/msg/GoalStatus",
        "32f4cfd717735d17657e1178f24431c1ce996c878c515230f6c5b3476819dbb9",
        "C swift-ros2",
    ),
    (
        "example_interfaces/action/Fibonacci_Goal",
        "226cb437e4355dcd3e914f930382a3b0cc1da81545bd319ed554e95a03255f51",
        "C swift-ros2",
    ),
    (
        "example_interfaces/action/Fibonacci_Result",
        "fea81394f25aa4502217953f1a021fb750e79c10bbd43f13dd94632da6569649",
        "C swift-ros2",
    ),
    (
        "example_interfaces/action/Fibonacci_Feedback",
        "2b12e37361da6f408d4c85bc24a18de64333f29082f2ca34b5ee33dc4c8b42a9",
        "C swift-ros2",
    ),
    (
        "example_interfaces/action/Fibonacci_SendGoal_Request",
        "3d088942b413247db536576f0286768c6be8fcd5d0c9a5d544f359fba090a238",
        "C swift-ros2",
    ),
    (
        "example_interfaces/action/Fibonacci_SendGoal_Response",
        "d8c07bb3d5b766fe4b43159c9a5222af5214e2fcc29229b991d826166c512be1",
        "C swift-ros2",
    ),
    (
        "example_interfaces/action/Fibonacci_GetResult_Request",
        "c8a4f5e7d13b81286ee1043e2ecd084281cecf1ff06aaa799464f5f15479f003",
        "C swift-ros2",
    ),
    (
        "example_interfaces/action/Fibonacci_GetResult_Response",
        "6021dc98ab9b4bbe395e48aa4de81ee5f68eb570f88358affcc648146668b24f",
        "C swift-ros2",
    ),
    (
        "sensor_msgs/msg/Image",
        "d31d41a9a4c4bc8eae9be757b0beed306564f7526c88ea6a4588fb9582527d47",
        "C Jazzy table",
    ),
    (
        "geometry_msgs/msg/TwistStamped",
        "5f0fcd4f81d5d06ad9b4c4c63e3ea51b82d6ae4d0558f1d475229b1121db6f64",
        "C Jazzy CLI output",
    ),
    (
        "std_srvs/srv/Trigger",
        "eeff2cd6fa5ad9d27cdf4dec64818317839b62f212a91e6b5304b634b2062c5f",
        "C Jazzy table",
    ),
    (
        "std_srvs/srv/SetBool",
        "abe9e4bb6b41b40e6789712c00ec8871923e089af3f667a79992a428cff2da0a",
        "C Jazzy table",
    ),
    (
        "nav_msgs/msg/Odometry",
        "3cc97dc7fb7502f8714462c526d369e35b603cfc34d946e3f2eda2766dfec6e0",
        "C Jazzy table",
    ),
    (
        "sensor_msgs/msg/Imu",
        "7d9a00ff131080897a5ec7e26e315954b8eae3353c3f995c55faf71574000b5b",
        "C Jazzy table",
    ),
    (
        "sensor_msgs/msg/CameraInfo",
        "b3dfd68ff46c9d56c80fd3bd4ed22c7a4ddce8c8348f2f59c299e73118e7e275",
        "C Jazzy table",
    ),
    (
        "sensor_msgs/msg/PointCloud2",
        "9198cabf7da3796ae6fe19c4cb3bdd3525492988c70522628af5daa124bae2b5",
        "C Jazzy table",
    ),
    (
        "sensor_msgs/msg/JointState",
        "a13ee3a330e346c9d87b5aa18d24e11690752bd33a0350f11c5882bc9179260e",
        "C Jazzy table",
    ),
    (
        "sensor_msgs/msg/NavSatFix",
        "62223ab3fe210a15976021da7afddc9e200dc9ec75231c1b6a557fc598a65404",
        "C Jazzy table",
    ),
    (
        "sensor_msgs/srv/SetCameraInfo",
        "a10cca5d33dc637c8d49db50ab288701a3592bb9cd854f2f16a0659613b68984",
        "C Jazzy table",
    ),
    (
        "std_msgs/msg/Float64MultiArray",
        "1025ddc6b9552d191f89ef1a8d2f60f3d373e28b283d8891ddcc974e8c55397f",
        "C Jazzy table",
    ),
    (
        "tf2_msgs/msg/TFMessage",
        "e369d0f05a23ae52508854b66f6aa0437f3449d652e8cbf22d5abe85d020f087",
        "C Jazzy table",
    ),
    (
        "tf2_msgs/msg/TF2Error",
        "db2485e7d6a0ec75bf087e058ee45df682acc3a621ca7780503d10aac141809a",
        "C Jazzy table",
    ),
];

#[test]
fn shipped_interfaces_hash_as_ros2_does() {
    let ifaces = Interfaces::common();
    let mut wrong = Vec::new();
    for (name, hex, source) in REFERENCE {
        let t: TypeName = name.parse().unwrap();
        let got = ifaces
            .type_hash(&t)
            .unwrap_or_else(|e| panic!("{name}: {e}"))
            .to_string();
        if got != format!("RIHS01_{hex}") {
            wrong.push(format!("{name} ({source}): got {got}"));
        }
    }
    assert!(
        wrong.is_empty(),
        "{} wrong:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
}

/// The exact bytes ROS 2 hashes for `std_msgs/msg/Header` (as
/// `rosidl_generator_type_description` writes them).
#[test]
fn the_hash_input_is_byte_exact() {
    let ifaces = Interfaces::common();
    let json = ifaces
        .description_json(&"std_msgs/msg/Header".parse().unwrap(), false)
        .unwrap();
    assert_eq!(
        json,
        "{\"type_description\": {\"type_name\": \"std_msgs/msg/Header\", \"fields\": [{\"name\": \"stamp\", \"type\": {\"type_id\": 1, \"capacity\": 0, \"string_capacity\": 0, \"nested_type_name\": \"builtin_interfaces/msg/Time\"}}, {\"name\": \"frame_id\", \"type\": {\"type_id\": 17, \"capacity\": 0, \"string_capacity\": 0, \"nested_type_name\": \"\"}}]}, \"referenced_type_descriptions\": [{\"type_name\": \"builtin_interfaces/msg/Time\", \"fields\": [{\"name\": \"sec\", \"type\": {\"type_id\": 6, \"capacity\": 0, \"string_capacity\": 0, \"nested_type_name\": \"\"}}, {\"name\": \"nanosec\", \"type\": {\"type_id\": 7, \"capacity\": 0, \"string_capacity\": 0, \"nested_type_name\": \"\"}}]}]}"
    );
}

/// Every shipped file parses, every reference resolves, every type hashes.
#[test]
fn every_shipped_interface_loads_and_hashes() {
    let ifaces = Interfaces::common();
    assert!(ifaces.check().is_empty(), "{:?}", ifaces.check());
    let declared: Vec<_> = ifaces.declared().cloned().collect();
    assert_eq!(declared.len(), 193, "files shipped");
    for m in ifaces.messages() {
        ifaces.type_hash(&m.name).unwrap();
    }
    assert_eq!(ifaces.packages().len(), 15);
}

/// A user's package folder, with a type from another package, loads and
/// hashes; a missing dependency is named.
#[test]
fn a_package_folder_loads() {
    let dir = std::env::temp_dir().join(format!("ferry-idl-test-{}", std::process::id()));
    let pkg = dir.join("my_robot_msgs");
    std::fs::create_dir_all(pkg.join("msg")).unwrap();
    std::fs::create_dir_all(pkg.join("srv")).unwrap();
    std::fs::write(
        pkg.join("msg/Arm.msg"),
        "std_msgs/Header header\nJoint[<=7] joints\nstring<=32 name \"arm\"\nuint8 MODE_IDLE=0\n",
    )
    .unwrap();
    std::fs::write(
        pkg.join("msg/Joint.msg"),
        "float64 position\nfloat64 velocity 0.0\n",
    )
    .unwrap();
    std::fs::write(pkg.join("msg/Bad.msg"), "int32 x\nint32 x\n").unwrap();
    std::fs::write(pkg.join("msg/Orphan.msg"), "other_pkg/Thing t\n").unwrap();
    std::fs::write(
        pkg.join("srv/Home.srv"),
        "bool fast\n---\nbool ok\nstring message\n",
    )
    .unwrap();
    let mut ifaces = Interfaces::common();
    let problems = ifaces.add_dir(&dir);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].to_string().contains("Bad.msg:2:7"),
        "{}",
        problems[0]
    );
    let arm = ifaces.message("my_robot_msgs/Arm").unwrap();
    assert_eq!(arm.fields.len(), 3);
    assert!(ifaces.type_hash(&arm.name).is_ok());
    assert!(ifaces.service("my_robot_msgs/srv/Home").is_some());
    assert!(ifaces.message("my_robot_msgs/srv/Home_Event").is_some());
    let e = ifaces
        .type_hash(&"my_robot_msgs/msg/Orphan".parse().unwrap())
        .unwrap_err();
    assert!(e.to_string().contains("other_pkg/msg/Thing"), "{e}");
    assert_eq!(ifaces.check().len(), 1);
    std::fs::remove_dir_all(&dir).unwrap();
}
