//! Automatic forwarding through a host's leader: a publisher with enough
//! matched subscribers on one remote host sends to that host once; below
//! the threshold each pair takes its own path again. Moves are make before
//! break (no `Unlink` of the old path before the new one is connected).

mod common;

use common::*;
use ferry_conn::{Action, LocalOptions, PairState};
use ferry_testkit::Rng;
use ferry_wire::{EndpointKind, ParticipantId, Qos, TransportKind};

const OPTS: LocalOptions = LocalOptions {
    pin: None,
    broker_ok: true,
    zenoh: false,
};

/// This runtime (host 100) with a publisher on `/camera` (entity 1),
/// forwarding at `threshold`.
fn camera_publisher(threshold: usize) -> Driver {
    let mut d = Driver::forwarding(peer(ME, 100, true));
    d.table.set_forward_threshold(threshold);
    d.table.add_local(
        record(1, EndpointKind::Publisher, "/camera", Qos::default()),
        OPTS,
        d.now,
    );
    d
}

fn sub(entity: u32, qos: Qos) -> ferry_wire::beacon::EndpointRecord {
    record(entity, EndpointKind::Subscriber, "/camera", qos)
}

fn path(d: &Driver, p: u64) -> Option<PairState> {
    d.table.pair(eid(ME, 1), eid(p, 9))
}

const FWD: Option<PairState> = Some(PairState::Connected(TransportKind::Forwarded));
const UDP: Option<PairState> = Some(PairState::Connected(TransportKind::Udp));

/// The moves of pair `ME:1 → p:9` in the log, in order.
fn moves(d: &Driver, p: u64) -> Vec<(TransportKind, Option<TransportKind>)> {
    d.log
        .iter()
        .filter_map(|a| match a {
            Action::Connect {
                reader,
                transport,
                replaces,
                ..
            } if *reader == eid(p, 9) => Some((*transport, *replaces)),
            _ => None,
        })
        .collect()
}

#[test]
fn the_second_subscriber_on_a_host_moves_both_to_its_leader_and_back_below() {
    let mut rng = Rng::new(25);
    let mut d = camera_publisher(ferry_conn::FORWARD_THRESHOLD);
    for p in 2..=4 {
        d.table.peer_up(follower(p, 200, 2), d.now);
    }
    d.table.peer_up(peer(5, 300, true), d.now); // not in an election
    d.table
        .endpoint_up(ParticipantId(2), sub(9, Qos::default()), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(path(&d, 2), UDP, "one subscriber: its own stream");
    d.table
        .endpoint_up(ParticipantId(3), sub(9, Qos::default()), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!((path(&d, 2), path(&d, 3)), (FWD, FWD), "two: the leader");
    assert_eq!(
        moves(&d, 2),
        vec![
            (TransportKind::Udp, None),
            (TransportKind::Forwarded, Some(TransportKind::Udp))
        ]
    );
    assert!(
        !d.log.iter().any(|a| matches!(a, Action::Unlink { .. })),
        "make before break: nothing unlinked on a move"
    );
    d.table
        .endpoint_up(ParticipantId(5), sub(9, Qos::default()), d.now);
    d.table
        .endpoint_up(ParticipantId(4), sub(9, Qos::default()), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(path(&d, 4), FWD);
    assert_eq!(path(&d, 5), UDP, "a host outside any election");
    assert_eq!(moves(&d, 4), vec![(TransportKind::Forwarded, None)]);
    // Two leave: the last one goes back to its own stream.
    d.table.endpoint_left(ParticipantId(3), 9, d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!((path(&d, 2), path(&d, 4)), (FWD, FWD));
    d.table.endpoint_left(ParticipantId(4), 9, d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!(path(&d, 2), UDP);
    assert_eq!(
        moves(&d, 2).last(),
        Some(&(TransportKind::Udp, Some(TransportKind::Forwarded)))
    );
    assert_eq!(d.table.pair(eid(ME, 1), eid(5, 9)), UDP);
}

#[test]
fn pinned_pairs_do_not_count_and_a_threshold_of_zero_never_forwards() {
    let mut rng = Rng::new(26);
    for threshold in [0, 2, 3] {
        let mut d = camera_publisher(threshold);
        for p in 2..=4 {
            d.table.peer_up(follower(p, 200, 2), d.now);
        }
        d.table
            .endpoint_up(ParticipantId(2), sub(9, Qos::default()), d.now);
        d.table
            .endpoint_up(ParticipantId(3), sub(9, Qos::default()), d.now);
        let tcp = Qos::default().transport(TransportKind::Tcp);
        d.table.endpoint_up(ParticipantId(4), sub(9, tcp), d.now);
        d.finish(&mut rng, 1.0);
        let want = if threshold == 2 { FWD } else { UDP };
        assert_eq!(
            (path(&d, 2), path(&d, 3)),
            (want, want),
            "threshold {threshold}"
        );
        assert_eq!(
            path(&d, 4),
            Some(PairState::Connected(TransportKind::Tcp)),
            "its pin holds"
        );
    }
}

#[test]
fn pairs_move_when_their_runtimes_join_the_election_and_a_failed_move_retries() {
    let mut rng = Rng::new(27);
    let mut d = camera_publisher(ferry_conn::FORWARD_THRESHOLD);
    d.table.peer_up(peer(2, 200, true), d.now);
    d.table.peer_up(peer(3, 200, true), d.now);
    d.table
        .endpoint_up(ParticipantId(2), sub(9, Qos::default()), d.now);
    d.table
        .endpoint_up(ParticipantId(3), sub(9, Qos::default()), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!((path(&d, 2), path(&d, 3)), (UDP, UDP), "no election yet");
    d.table.peer_up(follower(2, 200, 2), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!((path(&d, 2), path(&d, 3)), (UDP, UDP), "one in it");
    d.table.peer_up(follower(3, 200, 2), d.now);
    // The move fails once: the pair retries and gets there.
    d.drain();
    for (w, r, t) in std::mem::take(&mut d.pending) {
        d.table.connect_failed(w, r, d.now);
        assert_eq!(t, TransportKind::Forwarded);
    }
    d.settle(&mut rng);
    assert_eq!((path(&d, 2), path(&d, 3)), (FWD, FWD));
    // A runtime leaves the election: both go back.
    d.table.peer_up(peer(3, 200, true), d.now);
    d.finish(&mut rng, 1.0);
    assert_eq!((path(&d, 2), path(&d, 3)), (UDP, UDP));
}
