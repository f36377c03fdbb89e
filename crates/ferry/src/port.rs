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
        self.0.lock().push(conn);
    }
    pub fn detach(&self, conn: &Arc<InboundConn>) {
        self.0.lock().retain(|c| !Arc::ptr_eq(c, conn));
    }
    pub fn len(&self) -> usize {
        self.0.lock().len()
    }
    /// Sample `seq` came through the broker on `conn`: false when a direct
    /// path from the same writer covers it (delivered its first sample at
    /// or before `seq`, and is reliable and ordered from there). Checked and
    /// marked under this reader's lock, like `direct_sample`, so at the
    /// hand-over between the two paths each sample goes through once.
    pub fn broker_sample(&self, conn: &InboundConn, seq: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let conns = self.0.lock();
        if conn.transport == TransportKind::Forwarded {
            let mut tops = self.1.lock();
            if tops.len() >= FORWARDED_WRITERS && !tops.contains_key(&conn.remote) {
                tops.clear();
            }
            let top = tops.entry(conn.remote).or_insert(0);
            if seq <= *top {
                return false;
            }
            *top = seq;
        }
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
    /// `conn` is settled and is not checked again.
    pub fn direct_sample(&self, conn: &InboundConn, seq: u64) -> bool {
        use std::sync::atomic::Ordering::Relaxed;
        let conns = self.0.lock();
        let m = &conn.seqs;
        if m.first.load(Relaxed) == 0 {
            m.first.store(seq, Relaxed);
        }
        if !relayed(conn.transport) {
            let mut top = 0;
            for c in conns
                .iter()
                .filter(|c| c.remote == conn.remote && relayed(c.transport))
            {
                if c.seqs.was_relayed(seq) {
                    return false;
                }
                top = top.max(c.seqs.last.load(Relaxed));
            }
            let first = m.first.load(Relaxed);
            if seq <= top && seq.saturating_sub(first) < ferry_transport::seqs::WINDOW {
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

    /// Delivers `seq` on `c` as a subscriber does; true when it goes through.
    fn offer(inbound: &Inbound, c: &InboundConn, seq: u64) -> bool {
        let settled = c.seqs.settled.load(Ordering::Relaxed);
        if relayed(c.transport) {
            (settled || inbound.direct_sample(c, seq)) && inbound.broker_sample(c, seq)
        } else {
            settled || inbound.direct_sample(c, seq)
        }
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
        // A direct path from the writer from 9 on: the relay's 9 and 10
        // are duplicates, whichever comes first.
        let shm = conn(w, TransportKind::SharedMemory);
        inbound.attach(shm.clone());
        assert!(offer(&inbound, &shm, 9));
        assert!(!offer(&inbound, &new, 9));
        assert!(!offer(&inbound, &new, 10));
        assert!(offer(&inbound, &shm, 10));
    }
}
