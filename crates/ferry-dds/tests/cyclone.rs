//! ferry-dds against Cyclone DDS as rmw_cyclonedds uses it: a node of the
//! PyPI `cyclonedds` package (a newer Cyclone with its own libddsc, XTypes
//! type information on) with ROS 2's topic and type names, XCDR1 — on two
//! hosts (namespaces), both directions.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::{spawn, string_cdr, string_from_cdr, wait_for, Lab};
use ferry_dds::{DdsQos, Participant};

const PEER: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/cyclone_peer.py");

fn python() -> String {
    let py = std::env::var("PYTHON").unwrap_or_else(|_| "python3".to_string());
    assert!(
        std::process::Command::new(&py)
            .args(["-c", "import cyclonedds"])
            .status()
            .is_ok_and(|s| s.success()),
        "no `cyclonedds` Python package for {py}: run scripts/setup.sh"
    );
    py
}

#[test]
fn ferry_and_a_cyclone_dds_node_with_ros2_names_talk_both_ways() {
    let Some(lab) = Lab::new(8) else { return };
    let domain = 88u32;
    let d = domain.to_string();
    let py = python();
    let lab_ref = &lab;
    std::thread::scope(|s| {
        s.spawn(|| {
            lab_ref.enter(&lab_ref.a);
            let pp = Participant::new(domain, b"enclave=/;").unwrap();
            let topic = pp
                .topic("rt/chatter", "std_msgs::msg::dds_::String_")
                .unwrap();
            let qos = DdsQos {
                keep_last: Some(100),
                ..DdsQos::default()
            };
            // Cyclone → ferry.
            let (tx, rx) = mpsc::channel();
            let r = pp
                .reader(&topic, &qos, move |s| {
                    let _ = tx.send(string_from_cdr(&s.cdr));
                })
                .unwrap();
            let (mut talker, said) = spawn(
                &lab_ref.b,
                &[&py, PEER, "talk", "/chatter", "30", "50", &d],
                &[],
            );
            wait_for(&said, "done", Duration::from_secs(40));
            let _ = talker.wait();
            let got: Vec<_> = rx.try_iter().collect();
            assert_eq!(got, common::numbered("cyclone", 0..30));
            drop(r);

            // ferry → Cyclone.
            let w = pp.writer(&topic, &qos).unwrap();
            let (mut listener, heard) = spawn(
                &lab_ref.b,
                &[&py, PEER, "listen", "/chatter", "30", "30", &d],
                &[],
            );
            wait_for(&heard, "ready", Duration::from_secs(20));
            let end = std::time::Instant::now() + Duration::from_secs(20);
            while w.matched().unwrap() == 0 && std::time::Instant::now() < end {
                std::thread::sleep(Duration::from_millis(20));
            }
            std::thread::sleep(Duration::from_millis(500));
            for i in 0..30 {
                w.write(&string_cdr(&format!("ferry {i}"))).unwrap();
                std::thread::sleep(Duration::from_millis(10));
            }
            let got = common::heard(&mut listener, &heard, Duration::from_secs(40));
            assert_eq!(got, common::numbered("ferry", 0..30));
        });
    });
}
