//! The outgoing side of a broker connection: ferry's own queue, bounded in
//! bytes, that holds every message from `publish` until the broker has it.
//!
//! rumqttc keeps unacknowledged QoS 1/2 messages itself, but drops them on a
//! reconnect whose CONNACK says the session is new (a restarted broker
//! without persistence), and it drops QoS 0 messages queued while offline.
//! So ferry keeps each message here until it is acknowledged (QoS 1/2) or
//! written (QoS 0), and sends everything unacknowledged again, in order,
//! after every reconnect. Readers drop the duplicates that can cause by
//! sequence number.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use bytes::Bytes;
use rumqttc::v5::mqttbytes::QoS;

use super::meta::Meta;

/// One message on its way to the broker.
#[derive(Debug, Clone)]
pub(crate) struct OutMsg {
    pub topic: Arc<str>,
    pub qos: QoS,
    pub retain: bool,
    pub payload: Bytes,
    /// Its MQTT 5 properties, made when it is handed to the client.
    pub meta: Meta,
    /// May be dropped to make room (best-effort or keep_last writers).
    pub droppable: bool,
}

impl OutMsg {
    /// What it costs in the bound (payload + topic + a fixed overhead).
    pub fn cost(&self) -> usize {
        self.payload.len() + self.topic.len() + 64
    }
}

/// Queued → handed to the client (awaiting its packet id) → in flight
/// (awaiting the broker's ack).
#[derive(Debug, Default)]
pub(crate) struct Outbox {
    queued: VecDeque<OutMsg>,
    handed: VecDeque<OutMsg>,
    inflight: BTreeMap<u16, OutMsg>,
    bytes: usize,
    limit: usize,
    /// Messages dropped to make room.
    pub dropped: u64,
}

impl Outbox {
    pub fn new(limit: usize) -> Self {
        Outbox {
            limit,
            ..Default::default()
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Messages held (queued, handed to the client, or unacknowledged).
    pub fn len(&self) -> usize {
        self.queued.len() + self.handed.len() + self.inflight.len()
    }

    /// Queues `m` at the back, dropping the oldest droppable queued messages
    /// if needed. Refused (and given back) when the queue is full of
    /// messages that may not be dropped, or larger than the whole bound.
    pub fn push(&mut self, m: OutMsg) -> Result<(), OutMsg> {
        let cost = m.cost();
        if cost > self.limit {
            return Err(m);
        }
        while self.bytes + cost > self.limit {
            let victim = self.queued.iter().position(|q| q.droppable);
            match victim.and_then(|i| self.queued.remove(i)) {
                Some(v) => {
                    self.bytes -= v.cost();
                    self.dropped += 1;
                }
                None if m.droppable => {
                    self.dropped += 1;
                    return Ok(()); // no room: the new best-effort sample is the one lost
                }
                None => return Err(m),
            }
        }
        self.bytes += cost;
        self.queued.push_back(m);
        Ok(())
    }

    /// The next queued message, to hand to the client.
    pub fn front(&self) -> Option<&OutMsg> {
        self.queued.front()
    }

    /// The front message was accepted by the client.
    pub fn handed_front(&mut self) {
        if let Some(m) = self.queued.pop_front() {
            self.handed.push_back(m);
        }
    }

    /// The client wrote the oldest handed message with packet id `pkid`
    /// (0 for QoS 0: done).
    pub fn written(&mut self, pkid: u16) {
        let Some(m) = self.handed.pop_front() else {
            return;
        };
        if m.qos == QoS::AtMostOnce || pkid == 0 {
            self.bytes -= m.cost();
        } else if let Some(old) = self.inflight.insert(pkid, m) {
            self.bytes -= old.cost();
        }
    }

    /// The broker acknowledged `pkid` (PUBACK for QoS 1, PUBCOMP for QoS 2).
    pub fn acked(&mut self, pkid: u16) {
        if let Some(m) = self.inflight.remove(&pkid) {
            self.bytes -= m.cost();
        }
    }

    /// The connection broke: everything handed or in flight goes back to
    /// the front of the queue, oldest first (packet ids are assigned in
    /// order, modulo wrap-around, which the sort by id undoes only within
    /// one window; the readers' sequence check orders the rest).
    pub fn requeue(&mut self) {
        let mut back: Vec<OutMsg> = std::mem::take(&mut self.inflight).into_values().collect();
        back.extend(self.handed.drain(..));
        for m in back.into_iter().rev() {
            self.queued.push_front(m);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: usize, qos: QoS, droppable: bool) -> OutMsg {
        OutMsg {
            topic: "t".into(),
            qos,
            retain: false,
            payload: Bytes::from(vec![n as u8; n]),
            meta: Meta::None,
            droppable,
        }
    }

    #[test]
    fn bounded_in_bytes_dropping_oldest_droppable() {
        let one = msg(100, QoS::AtMostOnce, true).cost();
        let mut o = Outbox::new(one * 3);
        for _ in 0..5 {
            o.push(msg(100, QoS::AtMostOnce, true)).unwrap();
        }
        assert_eq!(o.len(), 3);
        assert_eq!(o.dropped, 2);
        assert!(o.bytes() <= one * 3);
        // Reliable messages are never dropped: the bound refuses.
        let mut r = Outbox::new(one * 2);
        r.push(msg(100, QoS::AtLeastOnce, false)).unwrap();
        r.push(msg(100, QoS::AtLeastOnce, false)).unwrap();
        assert!(r.push(msg(100, QoS::AtLeastOnce, false)).is_err());
        // Too big for the whole bound.
        assert!(r.push(msg(one * 3, QoS::AtMostOnce, true)).is_err());
    }

    #[test]
    fn unacked_messages_are_resent_in_order_after_a_break() {
        let mut o = Outbox::new(1 << 20);
        for i in 1..=4 {
            o.push(msg(i, QoS::AtLeastOnce, false)).unwrap();
        }
        for pkid in 1..=3 {
            o.handed_front();
            o.written(pkid);
        }
        o.acked(1);
        o.handed_front(); // 4th handed, not yet written
        o.requeue();
        let lens: Vec<usize> = std::iter::from_fn(|| {
            let l = o.front().map(|m| m.payload.len());
            o.handed_front();
            l
        })
        .collect();
        assert_eq!(lens, vec![2, 3, 4]);
        // QoS 0 is done once written.
        let mut z = Outbox::new(1 << 20);
        z.push(msg(5, QoS::AtMostOnce, true)).unwrap();
        z.handed_front();
        z.written(0);
        assert_eq!((z.len(), z.bytes()), (0, 0));
    }
}
