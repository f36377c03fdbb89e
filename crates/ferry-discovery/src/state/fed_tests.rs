//! A runtime fed by its host leader: it says so in its beacons, nobody
//! greets it, and it holds its tongue while its host elects a leader.

use super::tests::{addr, endpoint, info};
use super::*;
use ferry_wire::beacon::{peek, PeekKind};

fn runtime(i: u64, now: Instant) -> Discovery {
    let mut d = Discovery::new(Config::new(0, ParticipantId(i), info()), now);
    d.set_records(vec![endpoint(1, &format!("/t{i}"))], now);
    d
}

fn sent(d: &mut Discovery, now: Instant) -> Vec<Transmit> {
    d.handle_timeout(now);
    std::iter::from_fn(|| d.poll_transmit()).collect()
}

#[test]
fn a_fed_runtime_is_not_greeted_and_one_that_is_not_fed_is() {
    let now = Instant::now();
    let mut fed = runtime(1, now);
    fed.set_fed(true, now);
    let mut plain = runtime(2, now);
    let mut observer = runtime(3, now);
    let first_fed = sent(&mut fed, now);
    let first_plain = sent(&mut plain, now);
    assert!(!first_fed.is_empty() && !first_plain.is_empty());
    for t in &first_fed {
        let p = peek(&t.bytes).expect("a beacon");
        assert_ne!(
            p.flags & FLAG_FED,
            0,
            "every beacon of a fed runtime says so"
        );
    }
    for t in &first_plain {
        assert_eq!(peek(&t.bytes).unwrap().flags & FLAG_FED, 0);
    }
    for t in &first_fed {
        observer
            .handle_datagram(now, addr(1), Via::Multicast, &t.bytes)
            .unwrap();
    }
    for t in &first_plain {
        observer
            .handle_datagram(now, addr(2), Via::Multicast, &t.bytes)
            .unwrap();
    }
    // Both are learned; only the runtime that is not fed is greeted.
    assert_eq!(observer.participants().count(), 2);
    let mut o2 = observer;
    let start = now + Duration::from_millis(1);
    let mut greeted_plain = 0;
    let mut greeted_fed = 0;
    for ms in (0..2000).step_by(5) {
        for t in sent(&mut o2, start + Duration::from_millis(ms)) {
            let hb = matches!(
                peek(&t.bytes).map(|p| p.kind),
                Some(PeekKind::Heartbeat { .. })
            );
            match t.to {
                Destination::Peer(a) if hb && a == addr(2) => greeted_plain += 1,
                Destination::Peer(a) if hb && a == addr(1) => greeted_fed += 1,
                _ => {}
            }
        }
    }
    assert_eq!(greeted_fed, 0, "nobody greets a fed runtime");
    assert!(greeted_plain >= 1, "a runtime that is not fed is greeted");
}

#[test]
fn a_fed_runtime_never_asks_everyone_to_greet_it() {
    let now = Instant::now();
    let mut fed = runtime(1, now);
    fed.set_fed(true, now);
    let mut plain = runtime(2, now);
    let asks = |d: &mut Discovery| {
        let mut n = 0;
        for ms in (0..3000).step_by(10) {
            for t in sent(d, now + Duration::from_millis(ms)) {
                if peek(&t.bytes).map(|p| p.kind) == Some(PeekKind::Request { target: EVERYONE }) {
                    n += 1;
                }
            }
        }
        n
    };
    assert_eq!(asks(&mut fed), 0);
    assert!(
        asks(&mut plain) >= 1,
        "alone, a plain runtime asks to be greeted"
    );
}

#[test]
fn a_held_runtime_says_nothing_until_the_hold_ends_or_it_speaks() {
    let now = Instant::now();
    let mut d = runtime(1, now);
    d.hold_until(now + Duration::from_millis(250));
    assert_eq!(d.poll_timeout(), Some(now));
    assert!(sent(&mut d, now).is_empty());
    assert!(sent(&mut d, now + Duration::from_millis(100)).is_empty());
    assert!(d.poll_timeout().unwrap() <= now + Duration::from_millis(250));
    // The hold ends by itself...
    assert!(!sent(&mut d, now + Duration::from_millis(250)).is_empty());
    // ...or when the runtime learns its role (here: fed).
    let mut e = runtime(2, now);
    e.hold_until(now + Duration::from_secs(10));
    assert!(sent(&mut e, now + Duration::from_millis(5)).is_empty());
    e.set_fed(true, now + Duration::from_millis(6));
    let out = sent(&mut e, now + Duration::from_millis(6));
    assert!(!out.is_empty());
    assert!(out
        .iter()
        .all(|t| peek(&t.bytes).unwrap().flags & FLAG_FED != 0));
}
