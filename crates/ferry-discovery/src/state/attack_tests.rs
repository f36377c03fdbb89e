//! An attacker on the same LAN (issue 19): forged announcements, goodbyes
//! and locators, table floods, giant announcements, rate floods.

use super::tests::{addr, endpoint, info, Net};
use super::*;
use std::net::{IpAddr, Ipv4Addr};

const ATTACKER: usize = 200;

/// Two established participants that know each other (0 observes, 1 is
/// the victim); see the first-contact test for a younger one.
fn pair() -> Net {
    let mut net = Net::new(2, 0, 21);
    net.run(FIRST_CONTACT + Duration::from_secs(1));
    assert!(net.all_know_all());
    net
}

const VICTIM: ParticipantId = ParticipantId(101);

fn forged_announce(
    revision: u32,
    records: &[Record],
    locators: Vec<ferry_wire::Locator>,
) -> Vec<u8> {
    let mut i = info();
    i.locators = locators;
    i.lease_ms = u32::MAX;
    Beacon::pack_announce(0, VICTIM, &i, revision, records, 1472).remove(0)
}

fn victim_endpoints(net: &Net) -> usize {
    net.nodes[0]
        .participant_info(VICTIM)
        .map_or(0, |p| p.endpoints.len())
}

#[test]
fn a_forged_announcement_cannot_empty_or_redirect_a_participant() {
    let mut net = pair();
    let now = net.now;
    let evil: ferry_wire::Locator = "tcp/10.0.0.201:9".parse().unwrap();
    // Revision 0xFFFFFFFF, no endpoints, the attacker's locators.
    let forged = forged_announce(u32::MAX, &[], vec![evil.clone()]);
    let r = net.nodes[0].handle_datagram(now, addr(ATTACKER), Via::Multicast, &forged);
    assert!(matches!(r, Err(DatagramError::NotOwner { .. })), "{r:?}");
    // Also sent as if from the victim's own address (a spoofed source):
    // 0xFFFFFFFF is "behind" the victim's revision (serial arithmetic) and
    // ignored; a jump far ahead is refused.
    net.nodes[0]
        .handle_datagram(now, addr(1), Via::Multicast, &forged)
        .unwrap();
    let jump = forged_announce(1 << 20, &[], vec![evil.clone()]);
    let r = net.nodes[0].handle_datagram(now, addr(1), Via::Multicast, &jump);
    assert!(
        matches!(r, Err(DatagramError::RevisionJump { .. })),
        "{r:?}"
    );
    net.run(Duration::from_secs(5));
    assert_eq!(victim_endpoints(&net), 1, "the victim lost its endpoint");
    let p = net.nodes[0].participant_info(VICTIM).unwrap();
    assert!(!p.info.locators.contains(&evil), "locators redirected");
    assert_eq!(net.nodes[0].stats().not_owner, 1);
}

#[test]
fn forged_goodbyes_and_heartbeats_do_not_touch_a_participant() {
    let mut net = pair();
    while net.nodes[0].poll_event().is_some() {}
    for k in 0..100 {
        let now = net.now;
        let bye = Beacon {
            domain: 0,
            participant: VICTIM,
            body: BeaconBody::Bye,
        }
        .encode();
        let hb = Beacon {
            domain: 0,
            participant: VICTIM,
            body: BeaconBody::Heartbeat {
                revision: k * 7,
                lease_ms: u32::MAX,
                greeting: false,
            },
        }
        .encode();
        for b in [&bye, &hb] {
            assert!(net.nodes[0]
                .handle_datagram(now, addr(ATTACKER), Via::Multicast, b)
                .is_err());
        }
        net.run(Duration::from_millis(50)); // 20 forged goodbyes a second
    }
    assert_eq!(victim_endpoints(&net), 1);
    let left = std::iter::from_fn(|| net.nodes[0].poll_event()).any(|e| {
        matches!(
            e,
            Event::ParticipantLeft { .. } | Event::EndpointLeft { .. }
        )
    });
    assert!(!left, "a forged datagram withdrew something");
}

#[test]
fn a_flood_of_fake_participants_cannot_keep_a_new_one_out() {
    let mut net = pair();
    // 1,100 fake participants with a 49-day lease, from one address: at most
    // MAX_PARTICIPANTS_PER_SOURCE are held, and only while being learned.
    let mut refused = 0;
    for i in 0..1100u64 {
        let hb = Beacon {
            domain: 0,
            participant: ParticipantId(10_000 + i),
            body: BeaconBody::Heartbeat {
                revision: 1,
                lease_ms: 49 * 24 * 3600 * 1000,
                greeting: false,
            },
        }
        .encode();
        let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 9, 9, 9)), 7000 + i as u16);
        let now = net.now;
        if net.nodes[0]
            .handle_datagram(now, from, Via::Multicast, &hb)
            .is_err()
        {
            refused += 1;
        }
    }
    // Each newcomer beyond the cap pushes out the oldest fake still being
    // learned from the same address (or is refused).
    let evicted = net.nodes[0].stats().evicted as usize;
    assert_eq!(refused + evicted, 1100 - MAX_PARTICIPANTS_PER_SOURCE);
    assert!(net.nodes[0].table.len() <= 2 + MAX_PARTICIPANTS_PER_SOURCE);
    // A legitimate newcomer still gets in at once.
    let now = net.now;
    let mut d = Discovery::new(Config::new(0, ParticipantId(102), info()), now);
    d.set_records(vec![endpoint(1, "/new")], now);
    net.nodes.push(d);
    net.alive.push(true);
    net.run(Duration::from_millis(300));
    assert!(net.all_know_all(), "the newcomer was kept out");
    // The fakes never answered a request: gone after FIRST_CONTACT.
    net.run(FIRST_CONTACT + Duration::from_millis(100));
    assert_eq!(net.nodes[0].table.len(), 2);
}

#[test]
fn fakes_from_many_addresses_evict_each_other_never_a_live_peer() {
    let mut net = pair();
    for s in 0..12u8 {
        for i in 0..256u16 {
            let hb = Beacon {
                domain: 0,
                participant: ParticipantId(u64::from(s) << 32 | u64::from(i)),
                body: BeaconBody::Heartbeat {
                    revision: 1,
                    lease_ms: 600_000,
                    greeting: false,
                },
            }
            .encode();
            let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 8, s, 1)), 1000 + i);
            let now = net.now;
            let _ = net.nodes[0].handle_datagram(now, from, Via::Multicast, &hb);
        }
    }
    assert!(net.nodes[0].table.len() <= MAX_PARTICIPANTS);
    assert!(net.nodes[0].stats().evicted > 0);
    assert!(
        net.nodes[0].participant_info(VICTIM).is_some(),
        "a known peer was evicted"
    );
}

#[test]
fn a_lease_is_capped_at_ten_minutes() {
    let mut net = pair();
    let now = net.now;
    net.nodes[1].set_lease(u32::MAX, now);
    net.run(Duration::from_millis(500));
    net.alive[1] = false;
    net.run(Duration::from_millis(MAX_LEASE_MS as u64 + 1000));
    assert!(net.nodes[0].participant_info(VICTIM).is_none());
}

#[test]
fn a_giant_announcement_costs_nothing_when_repeated() {
    let now = Instant::now();
    let mut d = Discovery::new(Config::new(0, ParticipantId(1), info()), now);
    // Ten participants with 4,096 endpoints each, from one address.
    let records: Vec<Record> = (0..4096).map(|i| endpoint(i, &format!("/t{i}"))).collect();
    let mut all = Vec::new();
    for p in 0..10u64 {
        let parts = Beacon::pack_announce(0, ParticipantId(500 + p), &info(), 1, &records, 1472);
        let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 7, 7, 7)), 2000 + p as u16);
        all.push((from, parts));
    }
    for (from, parts) in &all {
        for b in parts {
            let _ = d.handle_datagram(now, *from, Via::Multicast, b);
        }
    }
    let held: usize = d.participants().map(|p| p.endpoints.len()).sum();
    assert!(
        held <= MAX_RECORDS_PER_SOURCE,
        "{held} records from one address"
    );
    while d.poll_event().is_some() {}
    // The same announcements again (a second later: the rate budget refilled
    // a little): no events, and far fewer accepted than sent.
    let later = now + Duration::from_secs(1);
    let mut accepted = 0;
    let mut sent = 0;
    for (from, parts) in &all {
        for b in parts {
            sent += 1;
            if d.handle_datagram(later, *from, Via::Multicast, b).is_ok() {
                accepted += 1;
            }
        }
    }
    assert_eq!(
        d.poll_event(),
        None,
        "a repeated announcement changed something"
    );
    assert!(
        accepted > 0 && sent > accepted,
        "{accepted}/{sent}: the rate budget did not apply"
    );
    // Rate: a burst from one address is cut at SOURCE_BURST.
    let flood = Beacon::pack_announce(0, ParticipantId(999), &info(), 1, &[], 1472).remove(0);
    let from = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 6, 6, 6)), 9);
    let ok = (0..10_000)
        .filter(|_| {
            d.handle_datagram(later, from, Via::Multicast, &flood)
                .is_ok()
        })
        .count();
    assert!(ok <= SOURCE_BURST as usize, "{ok} accepted at once");
    assert!(d.stats().refused > 0);
}

#[test]
fn localhost_discovery_ignores_other_hosts() {
    let now = Instant::now();
    let mut cfg = Config::new(0, ParticipantId(1), info());
    cfg.loopback_only = true;
    let mut d = Discovery::new(cfg, now);
    let mut other = Discovery::new(Config::new(0, ParticipantId(2), info()), now);
    other.handle_timeout(now);
    let t = other.poll_transmit().unwrap();
    let lan = SocketAddr::new(IpAddr::V4(Ipv4Addr::new(10, 0, 0, 2)), 7401);
    assert!(matches!(
        d.handle_datagram(now, lan, Via::Multicast, &t.bytes),
        Err(DatagramError::NotLoopback(_))
    ));
    let lo = SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 7401);
    d.handle_datagram(now, lo, Via::Multicast, &t.bytes)
        .unwrap();
    assert_eq!(d.stats().not_loopback, 1);
}

#[test]
fn an_id_claimed_from_two_addresses_at_first_contact_is_believed_from_neither() {
    // The attacker heard the victim's first multicast and forged its id at
    // an observer that had not heard the victim yet.
    let now = Instant::now();
    let mut o = Discovery::new(Config::new(0, ParticipantId(1), info()), now);
    let forged = forged_announce(7, &[], vec!["tcp/10.0.0.201:9".parse().unwrap()]);
    o.handle_datagram(now, addr(ATTACKER), Via::Multicast, &forged)
        .unwrap();
    let mut victim = Discovery::new(Config::new(0, VICTIM, info()), now);
    victim.set_records(vec![endpoint(1, "/real")], now);
    victim.handle_timeout(now + Duration::from_millis(5));
    let t = victim.poll_transmit().unwrap();
    let r = o.handle_datagram(now, addr(1), Via::Multicast, &t.bytes);
    assert!(matches!(r, Err(DatagramError::NotOwner { .. })), "{r:?}");
    assert!(o.participant_info(VICTIM).is_none(), "a claim was believed");
    // Neither is believed while contested, from either address.
    let again = now + Duration::from_secs(1);
    assert!(matches!(
        o.handle_datagram(again, addr(ATTACKER), Via::Multicast, &forged),
        Err(DatagramError::Contested(_))
    ));
    assert!(o.participant_info(VICTIM).is_none());
    // Once the attacker stops, the real one is learned from its own address.
    let later = now + CONTESTED + Duration::from_millis(1);
    let mut net_now = later;
    victim.handle_timeout(later);
    while let Some(t) = victim.poll_transmit() {
        let _ = o.handle_datagram(later, addr(1), Via::Multicast, &t.bytes);
    }
    for _ in 0..50 {
        net_now += Duration::from_millis(10);
        o.handle_timeout(net_now);
        while let Some(t) = o.poll_transmit() {
            let _ = victim.handle_datagram(net_now, addr(0), Via::Unicast, &t.bytes);
        }
        victim.handle_timeout(net_now);
        while let Some(t) = victim.poll_transmit() {
            let _ = o.handle_datagram(net_now, addr(1), Via::Unicast, &t.bytes);
        }
    }
    let p = o.participant_info(VICTIM).expect("the real one, learned");
    assert!(p.endpoints.values().any(|e| e.topic == "/real"));
}
