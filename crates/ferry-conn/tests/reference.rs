//! Thousands of random join/leave/change sequences, each step checked
//! against a brute-force reference matcher.

mod common;

use std::collections::BTreeMap;
use std::time::Duration;

use common::*;
use ferry_conn::PairState;
use ferry_discovery::LeaveReason;
use ferry_testkit::Rng;
use ferry_wire::{EndpointId, EndpointKind, ParticipantId, TransportKind};

/// One random sequence: 5 remote runtimes (two on this host, three on
/// another that come and go in its leader election), 4 topics, every kind
/// of port, some QoS and type conflicts, connects that fail, links that
/// break, peers that leave and expire; forwarding at a threshold of 0–3.
fn run(seed: u64, steps: usize) -> usize {
    let mut rng = Rng::new(seed);
    let me = peer(ME, 100, true);
    let mut d = Driver::forwarding(me);
    let threshold = (seed % 4) as usize;
    let mut forwarded = 0;
    d.table.set_forward_threshold(threshold);
    let mut eps: BTreeMap<EndpointId, ferry_wire::beacon::EndpointRecord> = BTreeMap::new();
    let mut up: BTreeMap<u64, bool> = BTreeMap::new();
    let mut next_entity = 1u32;
    for step in 0..steps {
        let roll = rng.next_u64() % 100;
        let remote = 2 + rng.next_u64() % 5;
        let what;
        if roll < 20 {
            let rec = random_record(&mut rng, next_entity, 4);
            next_entity += 1;
            eps.insert(eid(ME, rec.entity), rec.clone());
            d.table.add_local(
                rec,
                ferry_conn::LocalOptions {
                    pin: None,
                    broker_ok: true,
                    zenoh: false,
                },
                d.now,
            );
            what = "add local";
        } else if roll < 30 {
            let local: Vec<EndpointId> = eps
                .keys()
                .filter(|e| e.participant.0 == ME)
                .copied()
                .collect();
            if local.is_empty() {
                continue;
            }
            let id = local[rng.next_u64() as usize % local.len()];
            eps.remove(&id);
            d.table.remove_local(id.entity, d.now);
            // A dropped writer's links close with it.
            d.links.retain(|(w, _)| *w != id);
            what = "remove local";
        } else if roll < 40 {
            let host = if remote <= 3 { 100 } else { 200 };
            up.insert(remote, true);
            let p = if host == 200 && rng.chance(0.7) {
                follower(remote, host, 4)
            } else {
                peer(remote, host, true)
            };
            d.table.peer_up(p, d.now);
            what = "peer up";
        } else if roll < 47 {
            if up.remove(&remote).is_none() {
                continue;
            }
            let reason = if rng.chance(0.5) {
                LeaveReason::Bye
            } else {
                LeaveReason::LeaseExpired
            };
            eps.retain(|id, _| id.participant.0 != remote);
            d.table.peer_left(ParticipantId(remote), reason, d.now);
            what = "peer left";
        } else if roll < 75 {
            if !up.contains_key(&remote) {
                continue;
            }
            // A new endpoint, or a changed record of an existing one.
            let entity = if rng.chance(0.3) {
                let theirs: Vec<u32> = eps
                    .keys()
                    .filter(|e| e.participant.0 == remote)
                    .map(|e| e.entity)
                    .collect();
                if theirs.is_empty() {
                    continue;
                }
                theirs[rng.next_u64() as usize % theirs.len()]
            } else {
                next_entity += 1;
                next_entity
            };
            let rec = random_record(&mut rng, entity, 4);
            eps.insert(eid(remote, entity), rec.clone());
            d.table.endpoint_up(ParticipantId(remote), rec, d.now);
            what = "endpoint up";
        } else if roll < 85 {
            let theirs: Vec<EndpointId> = eps
                .keys()
                .filter(|e| e.participant.0 != ME)
                .copied()
                .collect();
            if theirs.is_empty() {
                continue;
            }
            let id = theirs[rng.next_u64() as usize % theirs.len()];
            eps.remove(&id);
            d.table.endpoint_left(id.participant, id.entity, d.now);
            what = "endpoint left";
        } else if roll < 92 {
            let live: Vec<(EndpointId, EndpointId)> = d
                .table
                .pairs()
                .filter(|(_, _, s)| matches!(s, PairState::Connected(_)))
                .map(|(w, r, _)| (w, r))
                .collect();
            if live.is_empty() {
                continue;
            }
            let (w, r) = live[rng.next_u64() as usize % live.len()];
            d.table.link_lost(w, r, d.now);
            what = "link lost";
        } else {
            d.advance(Duration::from_millis(rng.next_u64() % 1500));
            what = "time";
        }
        // Connects answer now and then, some fail.
        d.finish(&mut rng, 0.7);
        if step % 7 == 0 || step + 1 == steps {
            d.settle(&mut rng);
            let what = format!("seed {seed} step {step} ({what})");
            check(&d, &eps, &what);
            forwarded += check_forwarding(&d, threshold, &what);
        }
    }
    forwarded
}

/// Each local publisher's pairs to host 200's runtimes in the election
/// (unpinned) are all forwarded or none, and all exactly when there are
/// at least `threshold` of them; no other pair is forwarded. Returns how
/// many are.
fn check_forwarding(d: &Driver, threshold: usize, what: &str) -> usize {
    let mut total = 0;
    let mut groups: BTreeMap<EndpointId, (usize, usize)> = BTreeMap::new();
    for (w, r, s) in d.table.pairs() {
        let (Some(we), Some(re)) = (d.table.endpoint(w), d.table.endpoint(r)) else {
            continue;
        };
        if w.participant.0 != ME || !s.is_matched() {
            continue;
        }
        let counted = we.kind == EndpointKind::Publisher
            && we.qos.transport.is_none()
            && re.qos.transport.is_none()
            && d.table.peer(r.participant).is_some_and(|p| {
                p.host_id == 200 && p.locators.iter().any(|l| l.host_leader().is_some())
            });
        let forwarded = s == PairState::Connected(TransportKind::Forwarded);
        if !counted {
            assert!(!forwarded, "{what}: {w} -> {r} forwarded, not counted");
            continue;
        }
        let g = groups.entry(w).or_default();
        g.0 += 1;
        g.1 += forwarded as usize;
    }
    for (w, (n, fwd)) in groups {
        let want = if threshold > 0 && n >= threshold {
            n
        } else {
            0
        };
        assert_eq!(
            fwd, want,
            "{what}: {w}'s {n} pairs to host 200, threshold {threshold}"
        );
        total += fwd;
    }
    total
}

#[test]
fn random_sequences_match_the_brute_force_reference() {
    let forwarded: usize = (0..2000).map(|seed| run(seed, 60)).sum();
    eprintln!("forwarded pairs seen at checks: {forwarded}");
    assert!(forwarded > 20, "forwarding exercised: {forwarded}");
}

#[test]
fn long_random_sequences_match_the_brute_force_reference() {
    let forwarded: usize = (10_000..10_020).map(|seed| run(seed, 2000)).sum();
    eprintln!("forwarded pairs seen at checks: {forwarded}");
    assert!(forwarded > 20, "forwarding exercised: {forwarded}");
}
