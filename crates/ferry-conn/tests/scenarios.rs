//! The table's behaviours one by one: paths, outages, the broker hand-over,
//! retries, and the cost of churn.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use ferry_conn::{Action, LocalOptions, PairState, PortEvent, UnmatchReason, OUTAGE_GRACE};
use ferry_discovery::LeaveReason;
use ferry_testkit::Rng;
use ferry_wire::{EndpointKind, ParticipantId, Qos, TransportKind};

const OPTS: LocalOptions = LocalOptions {
    pin: None,
    broker_ok: true,
    zenoh: false,
};

fn sub(entity: u32) -> ferry_wire::beacon::EndpointRecord {
    record(entity, EndpointKind::Subscriber, "/chatter", Qos::default())
}

fn publ(entity: u32) -> ferry_wire::beacon::EndpointRecord {
    record(entity, EndpointKind::Publisher, "/chatter", Qos::default())
}

#[test]
fn each_relationship_gets_its_path() {
    let mut rng = Rng::new(1);
    let mut d = Driver::new(peer(ME, 100, true));
    d.table.add_local(publ(1), OPTS, d.now);
    d.table.add_local(sub(2), OPTS, d.now);
    d.table.peer_up(peer(2, 100, true), d.now); // same host
    d.table.peer_up(peer(3, 200, true), d.now); // another host
    d.table.peer_up(peer(4, 300, false), d.now); // heard only through the broker
    for p in 2..=4 {
        d.table.endpoint_up(ParticipantId(p), sub(1), d.now);
    }
    d.finish(&mut rng, 1.0);
    let path = |d: &Driver, p, e| d.table.pair(eid(ME, 1), eid(p, e));
    assert_eq!(
        path(&d, ME, 2),
        Some(PairState::Connected(TransportKind::InProcess))
    );
    assert_eq!(
        path(&d, 2, 1),
        Some(PairState::Connected(TransportKind::SharedMemory))
    );
    assert_eq!(
        path(&d, 3, 1),
        Some(PairState::Connected(TransportKind::Udp))
    );
    assert_eq!(
        path(&d, 4, 1),
        Some(PairState::Connected(TransportKind::Mqtt))
    );
    // The local reader was told of its local writer; remote writers are
    // matched without a connection of this side's.
    assert!(d.told[&eid(ME, 2)].contains(&eid(ME, 1)));
    d.table.peer_up(peer(3, 200, true), d.now);
    d.table.endpoint_up(ParticipantId(3), publ(7), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(
        d.table.pair(eid(3, 7), eid(ME, 2)),
        Some(PairState::Matched)
    );
    assert!(d.told[&eid(ME, 2)].contains(&eid(3, 7)));
}

#[test]
fn a_client_never_gets_udp_and_pins_are_kept() {
    let mut rng = Rng::new(2);
    let mut d = Driver::new(peer(ME, 100, true));
    let cli = record(1, EndpointKind::Client, "/add", Qos::default());
    let srv = record(5, EndpointKind::Service, "/add", Qos::default());
    d.table.add_local(cli, OPTS, d.now);
    let pinned = Qos::default().transport(TransportKind::Tcp);
    d.table.add_local(
        record(2, EndpointKind::Publisher, "/chatter", pinned),
        OPTS,
        d.now,
    );
    d.table.peer_up(peer(3, 200, true), d.now);
    d.table.endpoint_up(ParticipantId(3), srv, d.now);
    d.table.endpoint_up(ParticipantId(3), sub(6), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(
        d.table.pair(eid(ME, 1), eid(3, 5)),
        Some(PairState::Connected(TransportKind::Tcp))
    );
    assert_eq!(
        d.table.pair(eid(ME, 2), eid(3, 6)),
        Some(PairState::Connected(TransportKind::Tcp))
    );
}

#[test]
fn a_udp_reader_that_expires_is_suspended_and_resumes_on_the_same_stream() {
    let mut rng = Rng::new(3);
    let mut d = Driver::new(peer(ME, 100, true));
    d.table.add_local(publ(1), OPTS, d.now);
    d.table.peer_up(peer(3, 200, true), d.now);
    d.table.endpoint_up(ParticipantId(3), sub(4), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(d.connects.len(), 1);
    // The reader's lease runs out (an outage): the stream is kept.
    d.table
        .peer_left(ParticipantId(3), LeaveReason::LeaseExpired, d.now);
    d.drain();
    assert_eq!(d.suspended, 1);
    assert!(d.links.contains(&(eid(ME, 1), eid(3, 4))), "the link stays");
    assert!(d.log.contains(&Action::Notify {
        port: eid(ME, 1),
        event: PortEvent::Unmatched {
            remote: eid(3, 4),
            reason: UnmatchReason::LeaseExpired
        }
    }));
    // It comes back within the grace: same stream, no new connect.
    d.advance(Duration::from_secs(20));
    d.table.peer_up(peer(3, 200, true), d.now);
    d.table.endpoint_up(ParticipantId(3), sub(4), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(d.connects.len(), 1, "resumed, not reconnected");
    assert_eq!(
        d.table.pair(eid(ME, 1), eid(3, 4)),
        Some(PairState::Connected(TransportKind::Udp))
    );
    // Expires again and never returns: unlinked when the grace is over.
    d.table
        .peer_left(ParticipantId(3), LeaveReason::LeaseExpired, d.now);
    d.advance(OUTAGE_GRACE - Duration::from_secs(1));
    assert!(d.links.contains(&(eid(ME, 1), eid(3, 4))));
    d.advance(Duration::from_secs(2));
    assert!(
        !d.links.contains(&(eid(ME, 1), eid(3, 4))),
        "given up after the grace"
    );
    assert_eq!(d.table.poll_timeout(), None);
}

#[test]
fn a_reader_that_says_bye_is_unlinked_at_once() {
    let mut rng = Rng::new(4);
    let mut d = Driver::new(peer(ME, 100, true));
    d.table.add_local(publ(1), OPTS, d.now);
    d.table.peer_up(peer(3, 200, true), d.now);
    d.table.endpoint_up(ParticipantId(3), sub(4), d.now);
    d.finish(&mut rng, 1.0);
    d.table.peer_left(ParticipantId(3), LeaveReason::Bye, d.now);
    d.drain();
    assert!(d.links.is_empty());
    assert_eq!(d.suspended, 0);
}

#[test]
fn a_peer_heard_directly_moves_off_the_broker() {
    let mut rng = Rng::new(5);
    let mut d = Driver::new(peer(ME, 100, true));
    d.table.add_local(publ(1), OPTS, d.now);
    d.table.peer_up(peer(3, 200, false), d.now);
    d.table.endpoint_up(ParticipantId(3), sub(4), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(
        d.table.pair(eid(ME, 1), eid(3, 4)),
        Some(PairState::Connected(TransportKind::Mqtt))
    );
    d.table.peer_up(peer(3, 200, true), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(
        d.table.pair(eid(ME, 1), eid(3, 4)),
        Some(PairState::Connected(TransportKind::Udp))
    );
    let upgrade = d.log.iter().any(|a| {
        matches!(
            a,
            Action::Connect {
                transport: TransportKind::Udp,
                replaces: Some(TransportKind::Mqtt),
                ..
            }
        )
    });
    assert!(upgrade);
}

#[test]
fn a_topic_outside_cloud_scope_never_takes_the_broker() {
    let mut rng = Rng::new(6);
    let mut d = Driver::new(peer(ME, 100, true));
    let local_only = LocalOptions {
        pin: None,
        broker_ok: false,
        zenoh: false,
    };
    d.table.add_local(publ(1), local_only, d.now);
    d.table.peer_up(peer(3, 200, false), d.now);
    d.table.endpoint_up(ParticipantId(3), sub(4), d.now);
    d.finish(&mut rng, 1.0);
    assert!(matches!(
        d.table.pair(eid(ME, 1), eid(3, 4)),
        Some(PairState::Failed(_))
    ));
    assert_eq!(d.no_path, 1);
    // Retried every second, said once.
    for _ in 0..5 {
        d.advance(Duration::from_secs(1));
        d.finish(&mut rng, 1.0);
    }
    assert_eq!(d.no_path, 1);
    assert!(d.links.is_empty());
}

#[test]
fn a_pair_pinned_to_zenoh_is_the_zenoh_links_and_without_one_has_no_path() {
    let mut rng = Rng::new(8);
    let mut d = Driver::new(peer(ME, 100, true));
    let zenoh = LocalOptions {
        pin: Some(TransportKind::Zenoh),
        broker_ok: false,
        zenoh: true,
    };
    d.table.add_local(publ(1), zenoh, d.now);
    // A reader in this runtime keeps the runtime's own path.
    d.table.add_local(sub(2), OPTS, d.now);
    d.table.peer_up(peer(3, 200, true), d.now);
    d.table.endpoint_up(ParticipantId(3), sub(4), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(
        d.table.pair(eid(ME, 1), eid(3, 4)),
        Some(PairState::Matched),
        "nothing to connect: the Zenoh link carries it"
    );
    assert!(!d.links.contains(&(eid(ME, 1), eid(3, 4))));
    assert!(d.links.contains(&(eid(ME, 1), eid(ME, 2))), "{:?}", d.links);
    assert_eq!(d.no_path, 0);
    // Without a Zenoh link, the pin leaves no path (and says so once).
    let none = LocalOptions {
        zenoh: false,
        ..zenoh
    };
    d.table.add_local(publ(5), none, d.now);
    d.finish(&mut rng, 1.0);
    assert!(matches!(
        d.table.pair(eid(ME, 5), eid(3, 4)),
        Some(PairState::Failed(_))
    ));
    assert_eq!(d.no_path, 1);
}

#[test]
fn failed_connects_and_lost_links_connect_again() {
    let mut rng = Rng::new(7);
    let mut d = Driver::new(peer(ME, 100, true));
    d.table.add_local(publ(1), OPTS, d.now);
    d.table.peer_up(peer(3, 200, true), d.now);
    d.table.endpoint_up(ParticipantId(3), sub(4), d.now);
    d.finish(&mut rng, 0.0);
    assert!(matches!(
        d.table.pair(eid(ME, 1), eid(3, 4)),
        Some(PairState::Failed(_))
    ));
    d.advance(Duration::from_millis(999));
    assert!(d.pending.is_empty(), "not before the retry time");
    d.advance(Duration::from_millis(2));
    d.finish(&mut rng, 1.0);
    assert!(d.links.contains(&(eid(ME, 1), eid(3, 4))));
    d.table.link_lost(eid(ME, 1), eid(3, 4), d.now);
    d.drain();
    assert!(d.links.is_empty());
    assert!(
        !d.told[&eid(ME, 1)].contains(&eid(3, 4)),
        "told ConnectionLost"
    );
    d.advance(Duration::from_secs(1));
    d.finish(&mut rng, 1.0);
    assert!(d.links.contains(&(eid(ME, 1), eid(3, 4))));
    // A connect answered after the pair ended is refused (the caller closes it).
    d.table.endpoint_left(ParticipantId(3), 4, d.now);
    assert!(!d.table.connected(eid(ME, 1), eid(3, 4), TransportKind::Udp));
}

#[test]
fn a_qos_change_that_breaks_the_match_unlinks_and_says_why() {
    let mut rng = Rng::new(8);
    let mut d = Driver::new(peer(ME, 100, true));
    d.table.add_local(publ(1), OPTS, d.now);
    d.table.peer_up(peer(3, 200, true), d.now);
    d.table.endpoint_up(ParticipantId(3), sub(4), d.now);
    d.finish(&mut rng, 1.0);
    let mut strict = sub(4);
    strict.qos.durability = ferry_wire::Durability::TransientLocal;
    d.table.endpoint_up(ParticipantId(3), strict, d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(
        d.table.pair(eid(ME, 1), eid(3, 4)),
        Some(PairState::Incompatible)
    );
    assert!(d.links.is_empty());
    assert!(d.incompatible[&eid(ME, 1)].contains(&eid(3, 4)));
    // And back.
    d.table.endpoint_up(ParticipantId(3), sub(4), d.now);
    d.finish(&mut rng, 1.0);
    assert!(d.links.contains(&(eid(ME, 1), eid(3, 4))));
}

/// 1,000 endpoints in 50 runtimes over 100 topics churn: every event costs
/// the pairs of its own topic (or peer), never a rebuild of all pairs, and
/// the result still matches the reference.
#[test]
fn a_thousand_endpoints_churning_cost_what_they_touch() {
    let mut rng = Rng::new(9);
    let mut d = Driver::new(peer(ME, 100, true));
    let topics = 100;
    let mut eps = BTreeMap::new();
    for p in 2..52u64 {
        d.table.peer_up(peer(p, p, true), d.now);
    }
    for i in 0..1000u64 {
        let rec = random_record(&mut rng, i as u32 + 1, topics);
        if i % 10 == 0 {
            eps.insert(eid(ME, rec.entity), rec.clone());
            d.table.add_local(rec, OPTS, d.now);
        } else {
            let p = 2 + i % 50;
            eps.insert(eid(p, rec.entity), rec.clone());
            d.table.endpoint_up(ParticipantId(p), rec, d.now);
        }
    }
    d.settle(&mut rng);
    check(&d, &eps, "after the build-up");
    let mut worst = 0u64;
    let mut total = 0u64;
    let events = 5000;
    for _ in 0..events {
        let ids: Vec<_> = eps.keys().copied().collect();
        let id = ids[rng.next_u64() as usize % ids.len()];
        let topic = eps[&id].topic.clone();
        let topic_size = eps.values().filter(|r| r.topic == topic).count() as u64;
        let before = d.table.stats().evaluations;
        let rec = eps.remove(&id).expect("listed");
        if id.participant.0 == ME {
            d.table.remove_local(id.entity, d.now);
            // The port is gone, and with it its links and what it was told.
            d.links.retain(|(w, _)| *w != id);
            d.told.remove(&id);
        } else {
            d.table.endpoint_left(id.participant, id.entity, d.now);
        }
        // It comes back with a new record (another topic, maybe).
        let mut again = random_record(&mut rng, rec.entity, topics);
        again.entity = rec.entity;
        let new_size = eps.values().filter(|r| r.topic == again.topic).count() as u64;
        eps.insert(id, again.clone());
        if id.participant.0 == ME {
            d.table.add_local(again, OPTS, d.now);
        } else {
            d.table.endpoint_up(id.participant, again, d.now);
        }
        d.finish(&mut rng, 1.0);
        let cost = d.table.stats().evaluations - before;
        assert!(
            cost <= topic_size + new_size,
            "{cost} evaluations for one leave + join in topics of {topic_size} and {new_size}"
        );
        worst = worst.max(cost);
        total += cost;
    }
    d.settle(&mut rng);
    check(&d, &eps, "after the churn");
    // A rebuild would evaluate ~1000 x 1000 / 2 pairs per event.
    assert!(worst < 100, "worst event cost {worst} evaluations");
    eprintln!(
        "churn: {events} leave+join events, {:.1} evaluations each on average, worst {worst}",
        total as f64 / events as f64
    );
}

#[test]
fn a_transport_refused_for_good_gives_way_to_the_next_path_at_once() {
    let mut rng = Rng::new(9);
    let mut d = Driver::new(peer(ME, 100, true));
    d.table.add_local(publ(1), OPTS, d.now);
    d.table.add_local(publ(5), OPTS, d.now);
    d.table.peer_up(peer(2, 100, true), d.now); // same host: shared memory
    d.table.endpoint_up(ParticipantId(2), sub(1), d.now);
    d.drain();
    assert_eq!(
        d.pending,
        vec![
            (eid(ME, 1), eid(2, 1), TransportKind::SharedMemory),
            (eid(ME, 5), eid(2, 1), TransportKind::SharedMemory)
        ]
    );
    // Shared memory refuses (another user): the next path is asked for
    // now, not after the retry delay; said once for the peer.
    d.pending.clear();
    let why = "permission denied";
    assert!(d.table.connect_refused(
        eid(ME, 1),
        eid(2, 1),
        TransportKind::SharedMemory,
        why,
        d.now
    ));
    assert!(!d.table.connect_refused(
        eid(ME, 5),
        eid(2, 1),
        TransportKind::SharedMemory,
        why,
        d.now
    ));
    d.drain();
    assert_eq!(d.pending.len(), 2, "{:?}", d.pending);
    assert!(d.pending.iter().all(|p| p.2 != TransportKind::SharedMemory));
    d.finish(&mut rng, 1.0);
    assert_eq!(d.table.refused(ParticipantId(2)).len(), 1);
    // The peer leaves and comes back (perhaps as another user): shared
    // memory is tried again.
    d.table.peer_left(ParticipantId(2), LeaveReason::Bye, d.now);
    assert!(d.table.refused(ParticipantId(2)).is_empty());
    d.table.peer_up(peer(2, 100, true), d.now);
    d.table.endpoint_up(ParticipantId(2), sub(1), d.now);
    d.drain();
    assert!(d.pending.iter().all(|p| p.2 == TransportKind::SharedMemory));
}
