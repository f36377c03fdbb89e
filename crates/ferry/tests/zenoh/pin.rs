//! A `[[topics]]` pin to Zenoh: two runtimes that ferry's own discovery
//! joins exchange a pinned topic only over Zenoh (through a router) and
//! an unpinned one on their own path; a runtime's own subscriber of the
//! pinned topic keeps the in-process path.

use std::time::Duration;

use ferry::config::zenoh::Mode;
use ferry::msgs::std_msgs;
use ferry::{DiscoveryRange, Qos, TopicRule, TransportKind};

use super::{free_port, node, until, zenoh_only};

#[test]
fn a_topic_pinned_to_zenoh_goes_over_zenoh_between_runtimes_discovery_joins() {
    let port = free_port();
    let router = format!("tcp/127.0.0.1:{port}");
    let _router = node(
        "router",
        zenoh_only(73, Mode::Router, &[], std::slice::from_ref(&router)),
    );
    let cfg = || {
        let mut c = zenoh_only(73, Mode::Peer, std::slice::from_ref(&router), &[]);
        c.discovery = DiscoveryRange::Localhost;
        c.topics = vec![TopicRule {
            pattern: "/pinned/*".into(),
            transport: Some(TransportKind::Zenoh),
            ..Default::default()
        }];
        c
    };
    let a = node("a", cfg());
    // (A config of its own: a runtime of its own, its own Zenoh session.)
    let b = node(
        "b",
        ferry::Config {
            lease_ms: 9_000,
            ..cfg()
        },
    );
    let qos = Qos::default().keep_last(100);
    let pinned_pub = a
        .publisher::<std_msgs::String>("/pinned/status")
        .qos(qos)
        .build()
        .unwrap();
    let free_pub = a
        .publisher::<std_msgs::String>("/free")
        .qos(qos)
        .build()
        .unwrap();
    let own = a
        .subscriber::<std_msgs::String>("/pinned/status")
        .qos(qos)
        .build()
        .unwrap();
    let pinned_sub = b
        .subscriber::<std_msgs::String>("/pinned/status")
        .qos(qos)
        .build()
        .unwrap();
    let free_sub = b
        .subscriber::<std_msgs::String>("/free")
        .qos(qos)
        .build()
        .unwrap();
    // The unpinned topic's direct connection (Zenoh may carry it until
    // then), and the pinned one's route through the router.
    until(Duration::from_secs(20), "the direct connection", || {
        free_pub
            .connections()
            .iter()
            .any(|c| c.transport != TransportKind::Zenoh)
    });
    until(Duration::from_secs(20), "both pinned subscriptions", || {
        pinned_pub.subscriber_count() == 2
    });
    for i in 0..50 {
        let m = |t: &str| std_msgs::String {
            data: format!("{t} {i}"),
        };
        pinned_pub.publish(m("pinned")).unwrap();
        free_pub.publish(m("free")).unwrap();
        std::thread::sleep(Duration::from_millis(2));
    }
    for (sub, what) in [
        (&pinned_sub, "pinned"),
        (&own, "pinned"),
        (&free_sub, "free"),
    ] {
        for i in 0..50 {
            let s = sub
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|e| panic!("{what} {i}: {e}"));
            assert_eq!(s.data, format!("{what} {i}"));
        }
        assert!(
            sub.recv_timeout(Duration::from_millis(200)).is_err(),
            "{what}: a duplicate"
        );
    }
    let carried = |conns: Vec<ferry::ConnectionInfo>| -> Vec<(TransportKind, u64)> {
        conns
            .into_iter()
            .filter(|c| c.stats.messages > 0)
            .map(|c| (c.transport, c.stats.messages))
            .collect()
    };
    assert_eq!(
        carried(pinned_sub.connections()),
        vec![(TransportKind::Zenoh, 50)],
        "the pinned topic only over Zenoh"
    );
    assert_eq!(
        carried(own.connections()),
        vec![(TransportKind::InProcess, 50)]
    );
    let free = carried(free_sub.connections());
    assert!(
        free.iter().all(|(t, _)| *t != TransportKind::Zenoh)
            && free.iter().map(|c| c.1).sum::<u64>() == 50,
        "the unpinned topic on its own path: {free:?}"
    );
}
