//! Writes the seed corpora in `fuzz/seeds/<target>/` from ferry's own
//! encoders, so the fuzzers start from well-formed inputs instead of having to
//! discover magic numbers and nested length fields first.
//!
//! ```sh
//! cargo run --manifest-path fuzz/Cargo.toml --example gen_seeds
//! ```
//! (Examples are not fuzz targets: `cargo fuzz build` only builds the bins.)

use std::fs;
use std::path::{Path, PathBuf};
use std::time::Duration;

use ferry::msgs::sensor_msgs::{Image, JointState};
use ferry::msgs::{builtin_interfaces::Time, std_msgs::Header};
use ferry_wire::beacon::{
    Beacon, BeaconBody, EndpointRecord, NodeRecord, ParticipantInfo, Record, DEFAULT_MTU,
};
use ferry_wire::frame::{FrameHeader, FrameKind, Hello, FLAG_ERROR};
use ferry_wire::{EndpointId, EndpointKind, Locator, ParticipantId, Qos, TransportKind, TypeHash};

fn out_dir(target: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    fs::create_dir_all(&dir).expect("create seed dir");
    dir
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    let path = out_dir(target).join(name);
    fs::write(&path, bytes).expect("write seed");
    println!("{:>5} B  {}", bytes.len(), path.display());
}

fn info(lease_ms: u32) -> ParticipantInfo {
    ParticipantInfo {
        host_id: 0x1111,
        net_id: 0x2222,
        pid: 4242,
        lease_ms,
        name: "talker".into(),
        locators: vec![
            Locator {
                transport: TransportKind::Tcp,
                address: "10.0.0.2:7400".into(),
            },
            Locator {
                transport: TransportKind::SharedMemory,
                address: "ferry-4242".into(),
            },
        ],
    }
}

fn endpoint(entity: u32, kind: EndpointKind, topic: &str, qos: Qos) -> Record {
    Record::Endpoint(EndpointRecord {
        entity,
        node: 1,
        kind,
        topic: topic.into(),
        type_name: "std_msgs/msg/String".into(),
        type_hash: TypeHash([1; 32]),
        qos,
    })
}

fn records(n: u32) -> Vec<Record> {
    let mut r = vec![Record::Node(NodeRecord {
        id: 1,
        name: "talker".into(),
        namespace: "/robot1".into(),
    })];
    let qos = [
        Qos::default(),
        Qos::sensor_data().transport(TransportKind::Udp),
        Qos::latched().deadline(Duration::from_millis(100)),
        Qos::default().keep_all().lifespan(Duration::from_secs(2)),
    ];
    let kinds = [
        EndpointKind::Publisher,
        EndpointKind::Subscriber,
        EndpointKind::Service,
        EndpointKind::Client,
    ];
    for i in 0..n {
        let k = i as usize % 4;
        r.push(endpoint(
            i + 1,
            kinds[k],
            &format!("/robot1/topic_{i}"),
            qos[k],
        ));
    }
    r
}

/// One discovery-target op: ctrl, dt, len (u16 le), datagram.
fn op(out: &mut Vec<u8>, ctrl: u8, dt: u8, datagram: &[u8]) {
    out.push(ctrl);
    out.push(dt);
    out.extend_from_slice(&(datagram.len() as u16).to_le_bytes());
    out.extend_from_slice(datagram);
}

fn main() {
    // ---- frame ----
    let hello = Hello {
        from: EndpointId {
            participant: ParticipantId(7),
            entity: 3,
        },
        from_kind: EndpointKind::Client,
        to: EndpointId {
            participant: ParticipantId(9),
            entity: 1,
        },
    };
    let body = hello.encode();
    let mut f = FrameHeader {
        kind: FrameKind::Hello,
        flags: 0,
        body_len: body.len() as u32,
        seq: 0,
        stamp_ns: 0,
    }
    .encode()
    .to_vec();
    f.extend_from_slice(&body);
    write("frame", "hello", &f);
    write("frame", "hello_body", &body);
    for (name, kind, flags) in [
        ("data", FrameKind::Data, 0),
        ("request", FrameKind::Request, 0),
        ("reply_error", FrameKind::Reply, FLAG_ERROR),
        ("close", FrameKind::Close, 0),
    ] {
        let mut f = FrameHeader {
            kind,
            flags,
            body_len: 5,
            seq: 42,
            stamp_ns: 1_700_000_000_000_000_000,
        }
        .encode()
        .to_vec();
        f.extend_from_slice(b"hello");
        write("frame", name, &f);
    }

    // ---- beacon ----
    let p = ParticipantId(0xabcd);
    let one = Beacon::pack_announce(0, p, &info(3000), 1, &records(4), DEFAULT_MTU);
    write("beacon", "announce_1part", &one[0]);
    let many = Beacon::pack_announce(0, p, &info(3000), 2, &records(12), 400);
    assert!(many.len() > 1);
    write("beacon", "announce_part0", &many[0]);
    write("beacon", "announce_part1", &many[1]);
    let empty = Beacon::pack_announce(3, p, &info(3000), 1, &[], DEFAULT_MTU);
    write("beacon", "announce_empty", &empty[0]);
    let bye = Beacon {
        domain: 0,
        participant: p,
        body: BeaconBody::Bye,
    }
    .encode();
    write("beacon", "bye", &bye);

    // ---- discovery ----
    // A peer joins with a one-part announce, then leaves.
    let mut s = Vec::new();
    op(&mut s, 0x01, 0, &one[0]);
    op(&mut s, 0x01, 10, &bye);
    write("discovery", "join_bye", &s);
    // A peer announces in several parts over unicast, then goes silent until
    // its lease expires (ctrl bit 6: jump to the next timeout).
    let mut s = Vec::new();
    for part in &many {
        op(&mut s, 0x82, 1, part);
    }
    op(&mut s, 0x40, 0, &[]);
    op(&mut s, 0x40, 0, &[]);
    write("discovery", "multipart_unicast_expire", &s);
    // Revision 2 withdraws endpoints of revision 1; then a stale revision-1
    // part arrives; then a second peer and a foreign-domain beacon.
    let rev1 = Beacon::pack_announce(0, p, &info(3000), 1, &records(6), DEFAULT_MTU);
    let rev2 = Beacon::pack_announce(0, p, &info(3000), 2, &records(2), DEFAULT_MTU);
    let other = Beacon::pack_announce(0, ParticipantId(0x77), &info(1000), 5, &records(3), 300);
    let mut s = Vec::new();
    op(&mut s, 0x03, 5, &rev1[0]);
    op(&mut s, 0x03, 5, &rev2[0]);
    op(&mut s, 0x03, 5, &rev1[0]);
    for part in &other {
        op(&mut s, 0x84, 2, part);
    }
    op(&mut s, 0x05, 5, &empty[0]);
    op(&mut s, 0x40, 200, &[]);
    write("discovery", "revisions", &s);

    // ---- cdr ----
    let js = JointState {
        header: Header {
            stamp: Time {
                sec: 1_700_000_000,
                nanosec: 5,
            },
            frame_id: "base_link".into(),
        },
        name: vec!["shoulder".into(), "elbow".into(), "wrist".into()],
        position: vec![0.1, -1.5, 3.0],
        velocity: vec![0.0, 0.5, f64::NAN],
        effort: vec![],
    };
    write("cdr", "joint_state", &ferry::encode_cdr(&js, "x").unwrap());
    write(
        "cdr",
        "joint_state_default",
        &ferry::encode_cdr(&JointState::default(), "x").unwrap(),
    );
    let img = Image {
        header: Header {
            stamp: Time { sec: 1, nanosec: 2 },
            frame_id: "camera".into(),
        },
        height: 2,
        width: 3,
        encoding: "rgb8".into(),
        is_bigendian: 0,
        step: 9,
        data: (0..18).collect(),
    };
    write("cdr", "image", &ferry::encode_cdr(&img, "x").unwrap());
}
