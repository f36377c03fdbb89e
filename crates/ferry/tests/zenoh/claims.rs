//! A Zenoh peer's `@ferry_lv` token claiming to be a ferry runtime is
//! believed only when ferry's own discovery announced that runtime with
//! the same Zenoh session: a ROS 2 node that claims to be a ferry reader
//! the publisher reaches directly still gets its samples over Zenoh, and
//! one that claims to be a ferry publisher is not mistaken for it (its
//! samples are not dropped as duplicates of the direct path's). Genuine
//! ferry runtimes, vouched for by discovery, still get no duplicates.

use std::time::{Duration, Instant};

use ferry::msgs::std_msgs;
use ferry::TransportKind;

use super::{lines_until, rmw_zenoh, DirectPair};

#[test]
fn a_forged_ferry_claim_neither_silences_a_ros2_subscriber_nor_passes_for_a_ferry_publisher() {
    let d = DirectPair::new(56, "/claimed", 1000);
    let (router, publisher, sub) = (&d.router, &d.publisher, &d.sub);
    let claim = |id: ferry::EndpointId| format!("{:016x}:{}", id.participant.0, id.entity);
    let peer = |role: &str, claim: &str| {
        rmw_zenoh(&[
            "--connect",
            router,
            "--domain",
            "56",
            "--topic",
            "/claimed",
            "--claim",
            claim,
            role,
            "5",
        ])
    };

    // A ROS 2 listener claiming to be `sub` (which the publisher reaches
    // directly): believed, the publisher would put nothing for it.
    let (_l, lrx) = peer("listener", &claim(sub.id()));
    lines_until(&lrx, "ready", Duration::from_secs(30));
    let mut sent = 0;
    let mut heard = 0;
    let end = Instant::now() + Duration::from_secs(20);
    while heard < 5 && Instant::now() < end {
        publisher
            .publish(std_msgs::String {
                data: format!("real {sent}"),
            })
            .unwrap();
        sent += 1;
        std::thread::sleep(Duration::from_millis(50));
        heard += lrx.try_iter().filter(|l| l.starts_with("heard")).count();
    }
    assert!(
        heard >= 5,
        "the listener that claimed to be a ferry reader heard {heard} of {sent} samples"
    );
    // The genuine reader got each sample once, over its direct path
    // (the publisher's puts on Zenoh reach it too, and are dropped there:
    // its claim is vouched for).
    for i in 0..sent {
        let s = sub.recv_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(s.data, format!("real {i}"));
        assert_ne!(s.info.transport, TransportKind::Zenoh);
    }

    // A ROS 2 talker claiming to be `publisher`, numbering its samples
    // 1..5 (numbers the direct path has delivered already): believed, the
    // reader would drop them as duplicates.
    let (_t, trx) = peer("talker", &claim(publisher.id()));
    lines_until(&trx, "sent 5", Duration::from_secs(30));
    for i in 1..=5 {
        let s = sub
            .recv_timeout(Duration::from_secs(10))
            .unwrap_or_else(|e| panic!("the talker's sample {i} never came: {e}"));
        assert_eq!(s.data, format!("py {i}"));
        assert_eq!(s.info.transport, TransportKind::Zenoh);
    }
    assert!(sub.try_recv().is_none(), "a duplicate");
}
