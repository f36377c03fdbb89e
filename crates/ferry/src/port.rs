//! Pieces every reader port shares: its set of inbound connections and
//! deadline tracking (a writer's links are `transport::Links`).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_wire::{EndpointId, TransportKind};
use parking_lot::Mutex;

use crate::event::{EventQueue, PortEvent};
use crate::stats::{ConnectionInfo, Side};
use crate::transport::InboundConn;

/// Whether samples on a connection of this kind come through an
/// intermediary that numbers them with the writer's own sequence (the MQTT
/// broker, Zenoh, a host leader): a direct path from the same writer makes
/// them duplicates.
fn relayed(t: TransportKind) -> bool {
    matches!(
        t,
        TransportKind::Mqtt | TransportKind::Zenoh | TransportKind::Forwarded
    )
}

/// A reader's connections, one per writer that connected to it, and the
/// newest sample of each writer a host leader relayed (a new leader sends
/// again what the one before may not have delivered: those it did are
/// duplicates).
#[derive(Default)]
pub(crate) struct Inbound(
    Mutex<Vec<Arc<InboundConn>>>,
    Mutex<HashMap<EndpointId, u64>>,
);

/// Writers whose newest forwarded sample a reader remembers.
const FORWARDED_WRITERS: usize = 4096;

impl Inbound {
    pub fn attach(&self, conn: Arc<InboundConn>) {
        let mut conns = self.0.lock();
        if conn.transport == TransportKind::Forwarded {
            // A direct path from the writer may be moving to this one:
            // its samples are checked against the relay's again.
            for c in conns.iter().filter(|c| c.remote == conn.remote) {
                c.seqs.settled.store(false, Ordering::SeqCst);
            }
        }
        conns.push(conn);
    }
    /// Whether sample `seq` stamped `stamp_ns` on `conn` goes through as
    /// far as the paths of its writer go (a relayed path checks
    /// `broker_sample` or `forwarded_sample` first).
    pub fn admit(&self, conn: &InboundConn, seq: u64, stamp_ns: u64) -> bool {
        if !relayed(conn.transport) {
            // Before reading `settled`: a forwarded path attached meanwhile
            // sees it (`forwarded_sample`), or this sample checks the relay's.
            conn.seqs.received(stamp_ns);
        }
        conn.seqs.settled.load(Ordering::SeqCst) || self.direct_sample(conn, seq, stamp_ns)
    }
    pub fn detach(&self, conn: &Arc<InboundConn>) {
        self.0.lock().retain(|c| !Arc::ptr_eq(c, conn));
    }
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }
    /// Sample `seq` stamped `stamp_ns` came from a host leader on `conn`:
    /// false when a leader relayed it already (a new leader sends again what
    /// the one before may not have delivered), or a direct path from the
    /// same writer received it. A pair moves between the two make before
    /// break, and the direct path it left ends without a word (UDP), so
    /// only what a direct path *received* is its: compared by source
    /// stamp, since a UDP stream numbers its samples itself. Checked and
    /// marked under this reader's lock, like `direct_sample`.
    pub fn forwarded_sample(&self, conn: &InboundConn, seq: u64, stamp_ns: u64) -> bool {
        let conns = self.0.lock();
        let mut tops = self.1.lock();
        if tops.len() >= FORWARDED_WRITERS && !tops.contains_key(&conn.remote) {
            tops.clear();
        }
        let top = tops.entry(conn.remote).or_insert(0);
        if seq <= *top {
            return false;
        }
        *top = seq;
        let direct = conns
            .iter()
            .filter(|c| c.remote == conn.remote && !relayed(c.transport))
            .any(|c| c.seqs.covers(stamp_ns));
        if direct {
            return false;
        }
        conn.seqs.received(stamp_ns);
        true
    }

    /// Sample `seq` came through the broker on `conn`: false when a direct
    /// path from the same writer covers it (delivered its first sample at
    /// or before `seq`, and is reliable and ordered from there). Checked and
    /// marked under this reader's lock, like `direct_sample`, so at the
    /// hand-over between the two paths each sample goes through once.
    pub fn broker_sample(&self, conn: &InboundConn, seq: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let conns = self.0.lock();
        let direct = conns
            .iter()
            .filter(|c| c.remote == conn.remote && !relayed(c.transport))
            .map(|c| c.seqs.first.load(Relaxed))
            .filter(|s| *s != 0)
            .min();
        if direct.is_some_and(|f| seq >= f) {
            return false;
        }
        conn.seqs.mark_relayed(seq);
        true
    }

    /// Sample `seq` on `conn` while it is not settled (its first samples):
    /// false when `conn` is a direct path and a relayed path (the broker,
    /// Zenoh) already delivered that very sample from the same writer. Once
    /// past everything relayed — or a whole window past its own first
    /// sample, when a relayed number ran far ahead (a forged one may) —
    /// `conn` is settled and is not checked again. A host leader's path is
    /// compared by source stamp (`forwarded_sample`), and keeps `conn`
    /// unsettled while it is attached.
    pub fn direct_sample(&self, conn: &InboundConn, seq: u64, stamp_ns: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let conns = self.0.lock();
        let m = &conn.seqs;
        if m.first.load(Relaxed) == 0 {
            m.first.store(seq, Relaxed);
        }
        if !relayed(conn.transport) {
            let (mut top, mut forwarded) = (0, false);
            for c in conns
                .iter()
                .filter(|c| c.remote == conn.remote && relayed(c.transport))
            {
                if c.transport == TransportKind::Forwarded {
                    if c.seqs.covers(stamp_ns) {
                        return false;
                    }
                    forwarded = true;
                    continue;
                }
                if c.seqs.was_relayed(seq) {
                    return false;
                }
                top = top.max(c.seqs.last.load(Relaxed));
            }
            let first = m.first.load(Relaxed);
            if forwarded
                || (seq <= top && seq.saturating_sub(first) < ferry_transport::seqs::WINDOW)
            {
                // Not settled while a host leader relays the same writer:
                // the pair may be moving between the two paths.
                return true;
            }
        }
        m.settled.store(true, Relaxed);
        true
    }
    pub fn connections(&self, topic: &str, id: EndpointId) -> Vec<ConnectionInfo> {
        self.0
            .lock()
            .iter()
            .map(|c| ConnectionInfo {
                protection: c.protection(),
                ..ConnectionInfo::new(
                    topic,
                    id,
                    c.remote,
                    Side::Reader,
                    c.transport,
                    &c.locator,
                    &c.stats,
                )
            })
            .collect()
    }
}

/// Tracks the QoS deadline of a port: reports each period without a sample.
pub(crate) struct DeadlineWatch {
    period: Option<Duration>,
    last: Mutex<Option<Instant>>,
    misses: AtomicU64,
}

impl DeadlineWatch {
    pub fn new(period: Option<Duration>) -> Self {
        DeadlineWatch {
            period,
            last: Mutex::new(None),
            misses: AtomicU64::new(0),
        }
    }
    /// A sample went out / came in.
    #[inline]
    pub fn touch(&self) {
        if self.period.is_some() {
            *self.last.lock() = Some(Instant::now());
        }
    }
    /// Called periodically: pushes `DeadlineMissed` when a period passed.
    pub fn check(&self, now: Instant, events: &EventQueue) {
        let Some(d) = self.period else { return };
        let mut last = self.last.lock();
        let since = last.get_or_insert(now);
        if now.duration_since(*since) > d {
            *since = now;
            let total = self.misses.fetch_add(1, Ordering::Relaxed) + 1;
            events.push(PortEvent::DeadlineMissed { total });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::ConnStats;
    use ferry_wire::ParticipantId;

    fn conn(writer: EndpointId, transport: TransportKind) -> Arc<InboundConn> {
        Arc::new(InboundConn {
            remote: writer,
            origin: crate::transport::Origin::SameProcess,
            transport,
            locator: String::new(),
            stats: Arc::new(ConnStats::new()),
            replier: None,
            same_clock: false,
            seqs: Default::default(),
            identity: None,
        })
    }

    /// A reader with a broker connection and a shared-memory one from `w`.
    fn broker_and_shm(w: EndpointId) -> (Inbound, Arc<InboundConn>, Arc<InboundConn>) {
        let inbound = Inbound::default();
        let (mqtt, shm) = (
            conn(w, TransportKind::Mqtt),
            conn(w, TransportKind::SharedMemory),
        );
        inbound.attach(mqtt.clone());
        inbound.attach(shm.clone());
        (inbound, mqtt, shm)
    }

    /// Delivers `seq` on `c` as a subscriber does (the writer stamped it
    /// `seq` µs); true when it goes through.
    fn offer(inbound: &Inbound, c: &InboundConn, seq: u64) -> bool {
        offer_as(inbound, c, seq, seq * 1000)
    }

    /// `offer` of a sample stamped `stamp_ns` that `c` numbers `seq`.
    fn offer_as(inbound: &Inbound, c: &InboundConn, seq: u64, stamp_ns: u64) -> bool {
        let relay_ok = match c.transport {
            TransportKind::Forwarded => inbound.forwarded_sample(c, seq, stamp_ns),
            t if relayed(t) => inbound.broker_sample(c, seq),
            _ => true,
        };
        relay_ok && inbound.admit(c, seq, stamp_ns)
    }

    #[test]
    fn at_a_hand_over_each_sample_goes_through_once_whichever_path_is_faster() {
        let w = EndpointId {
            participant: ParticipantId(9),
            entity: 1,
        };
        // The broker is ahead: it delivered 1..=3 when shared memory starts at 2.
        let (inbound, mqtt, shm) = broker_and_shm(w);
        let mut got = Vec::new();
        for (c, seq) in [(&mqtt, 1), (&mqtt, 2), (&mqtt, 3), (&shm, 2), (&shm, 3)] {
            if offer(&inbound, c, seq) {
                got.push(seq);
            }
        }
        for seq in 4..=6 {
            // Both paths carry 4..=6, shared memory first or the broker first.
            let order = if seq % 2 == 0 {
                [&shm, &mqtt]
            } else {
                [&mqtt, &shm]
            };
            for c in order {
                if offer(&inbound, c, seq) {
                    got.push(seq);
                }
            }
        }
        assert_eq!(got, vec![1, 2, 3, 4, 5, 6]);
        assert!(shm.seqs.settled.load(Ordering::Relaxed));
        // Shared memory is ahead: it starts at 5; the broker's 4 still counts.
        let (inbound, mqtt, shm) = broker_and_shm(w);
        let mut got = Vec::new();
        for (c, seq) in [
            (&mqtt, 3),
            (&shm, 5),
            (&mqtt, 4),
            (&mqtt, 5),
            (&shm, 6),
            (&mqtt, 6),
        ] {
            if offer(&inbound, c, seq) {
                got.push(seq);
            }
        }
        assert_eq!(got, vec![3, 5, 4, 6]);
        // Without a broker connection a direct path settles on its first sample.
        let inbound = Inbound::default();
        let tcp = conn(w, TransportKind::Tcp);
        inbound.attach(tcp.clone());
        assert!(offer(&inbound, &tcp, 7));
        assert!(tcp.seqs.settled.load(Ordering::Relaxed));
    }

    #[test]
    fn a_new_leader_repeating_what_the_old_one_delivered_is_dropped_and_a_direct_path_still_wins() {
        let w = EndpointId {
            participant: ParticipantId(7),
            entity: 2,
        };
        let inbound = Inbound::default();
        let old = conn(w, TransportKind::Forwarded);
        inbound.attach(old.clone());
        let mut got = Vec::new();
        for seq in 1..=5 {
            if offer(&inbound, &old, seq) {
                got.push(seq);
            }
        }
        // The old leader dies; the new one sends 3..=8 again.
        inbound.detach(&old);
        let new = conn(w, TransportKind::Forwarded);
        inbound.attach(new.clone());
        for seq in 3..=8 {
            if offer(&inbound, &new, seq) {
                got.push(seq);
            }
        }
        assert_eq!(got, vec![1, 2, 3, 4, 5, 6, 7, 8]);
        // Another writer's numbers are its own.
        let other = conn(
            EndpointId {
                participant: ParticipantId(8),
                entity: 2,
            },
            TransportKind::Forwarded,
        );
        inbound.attach(other.clone());
        assert!(offer(&inbound, &other, 1));
        // A direct path from the writer from 9 on: 9 and 10 go through
        // once, by whichever path brings them first.
        let shm = conn(w, TransportKind::SharedMemory);
        inbound.attach(shm.clone());
        assert!(offer(&inbound, &shm, 9));
        assert!(!offer(&inbound, &new, 9));
        assert!(offer(&inbound, &new, 10));
        assert!(!offer(&inbound, &shm, 10));
    }

    #[test]
    fn a_pair_moving_between_a_direct_path_and_its_host_leader_loses_and_repeats_nothing() {
        let w = EndpointId {
            participant: ParticipantId(7),
            entity: 3,
        };
        let inbound = Inbound::default();
        let udp = conn(w, TransportKind::Udp);
        let back = conn(w, TransportKind::Udp);
        inbound.attach(udp.clone());
        let mut got = Vec::new();
        // A UDP stream numbers its samples from 1 when it opens; the
        // writer's numbers (and stamps) are its own: the first stream
        // opened at the writer's sample 1, the second at its sample 11.
        let mut take = |c: &Arc<InboundConn>, seqs: std::ops::RangeInclusive<u64>| {
            for seq in seqs {
                let own = match c.transport {
                    TransportKind::Udp if Arc::ptr_eq(c, &back) => seq - 10,
                    _ => seq,
                };
                if offer_as(&inbound, c, own, seq * 1000) {
                    got.push(seq);
                }
            }
        };
        take(&udp, 1..=5);
        // Onto the leader: both carry 5..=7 (the forwarded copy first for
        // 7), then UDP ends without a word and stays attached.
        let fwd = conn(w, TransportKind::Forwarded);
        inbound.attach(fwd.clone());
        take(&fwd, 5..=5);
        take(&udp, 6..=6);
        take(&fwd, 6..=7);
        take(&udp, 7..=7);
        take(&fwd, 8..=12);
        // And back: a new direct path from 11, the leader's copies of 11
        // and 12 came first; it is the only path from 14 on.
        inbound.attach(back.clone());
        take(&back, 11..=13);
        take(&fwd, 13..=13);
        inbound.detach(&fwd);
        inbound.detach(&udp);
        take(&back, 14..=15);
        assert_eq!(got, (1..=15).collect::<Vec<_>>());
        assert!(
            back.seqs.settled.load(Ordering::Relaxed),
            "settled once alone"
        );
    }
}
