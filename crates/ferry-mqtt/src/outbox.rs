//! The outgoing side of a broker connection (sans-IO): ferry's own queue,
//! bounded in bytes, that holds every message from `publish` until the
//! broker has it, and the packet ids of what is in flight.
//!
//! A message is *queued* until the connection and the broker's Receive
//! Maximum let it go; then it is *in flight* under a packet id until the
//! broker acknowledges it (QoS 1: PUBACK; QoS 2: PUBREC, then PUBCOMP), or
//! gone once written (QoS 0). After the connection breaks and comes back,
//! everything in flight is written again first, in the order it was sent,
//! under the same packet ids, as MQTT asks — a PUBLISH marked DUP, or the
//! PUBREL of a QoS 2 message the broker had already received — whatever the
//! broker kept of the session; readers drop the duplicates a resend can
//! cause by sequence number.

use std::collections::VecDeque;

use bytes::Bytes;
use rumqttc::v5::mqttbytes::QoS;

use super::meta::Meta;

/// One message on its way to the broker.
#[derive(Debug, Clone)]
pub(crate) struct OutMsg {
    pub topic: Bytes,
    pub qos: QoS,
    pub retain: bool,
    pub payload: Bytes,
    /// Its MQTT 5 properties, made when it is written.
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

/// Most QoS 1/2 messages in flight, whatever the broker allows.
const MAX_WINDOW: u16 = 65_000;

/// A message the broker has not acknowledged yet.
#[derive(Debug)]
struct Inflight {
    pkid: u16,
    msg: OutMsg,
    /// QoS 2: the broker received it (PUBREC) and PUBREL was sent.
    released: bool,
}

/// What to write again for a message in flight after a reconnect.
#[derive(Debug, Clone)]
pub(crate) enum Resend {
    /// The PUBLISH, marked DUP, under its packet id.
    Publish(u16, OutMsg),
    /// The PUBREL of a QoS 2 message the broker received.
    Release(u16),
}

/// Queued messages, those in flight, and the packet ids in use.
#[derive(Debug)]
pub(crate) struct Outbox {
    queued: VecDeque<OutMsg>,
    /// In the order sent (acks usually come in that order).
    inflight: VecDeque<Inflight>,
    /// Packet ids of SUBSCRIBE / UNSUBSCRIBE awaiting their ack.
    control: Vec<u16>,
    /// One bit per packet id in use (in flight or control).
    in_use: Box<[u64; 1024]>,
    next_pkid: u16,
    /// The broker's Receive Maximum: QoS 1/2 messages in flight at most.
    window: usize,
    bytes: usize,
    limit: usize,
    /// Messages dropped to make room.
    pub dropped: u64,
}

impl Outbox {
    pub fn new(limit: usize) -> Self {
        Outbox {
            queued: VecDeque::new(),
            inflight: VecDeque::new(),
            control: Vec::new(),
            in_use: Box::new([0; 1024]),
            next_pkid: 0,
            window: usize::from(MAX_WINDOW),
            bytes: 0,
            limit,
            dropped: 0,
        }
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Messages held (queued or unacknowledged).
    pub fn len(&self) -> usize {
        self.queued.len() + self.inflight.len()
    }

    /// The broker's Receive Maximum (from its CONNACK; 65535 if it gave
    /// none), kept below 65535 so packet ids stay free for SUBSCRIBEs.
    pub fn set_window(&mut self, receive_max: u16) {
        self.window = usize::from(receive_max.clamp(1, MAX_WINDOW));
    }

    /// Queues `m` at the back, dropping the oldest droppable queued messages
    /// if needed. Refused (and given back) when the queue is full of
    /// messages that may not be dropped. A message larger than the whole
    /// bound goes into an empty queue only (so the queue holds at most the
    /// bound plus one packet).
    pub fn push(&mut self, m: OutMsg) -> Result<(), Box<OutMsg>> {
        let cost = m.cost();
        while self.bytes + cost > self.limit && !(self.queued.is_empty() && self.bytes == 0) {
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
                None => return Err(Box::new(m)),
            }
        }
        self.bytes += cost;
        self.queued.push_back(m);
        Ok(())
    }

    /// The next message to write, if the window has room: a QoS 0 message
    /// leaves the outbox (packet id 0), a QoS 1/2 one stays in flight under
    /// a fresh packet id until acknowledged.
    pub fn take(&mut self) -> Option<(u16, OutMsg)> {
        let front = self.queued.front()?;
        if front.qos == QoS::AtMostOnce {
            let m = self.queued.pop_front()?;
            self.bytes -= m.cost();
            return Some((0, m));
        }
        if self.inflight.len() >= self.window {
            return None;
        }
        let pkid = self.fresh_pkid()?;
        let msg = self.queued.pop_front()?;
        self.inflight.push_back(Inflight {
            pkid,
            msg: msg.clone(),
            released: false,
        });
        Some((pkid, msg))
    }

    /// A message written as `take` gave it turned out unsendable (larger
    /// than the broker accepts): it is dropped.
    pub fn refused(&mut self, pkid: u16) {
        if pkid != 0 && self.remove(pkid) {
            self.dropped += 1;
        }
    }

    /// The broker received QoS 2 message `pkid` (PUBREC): PUBREL goes out.
    pub fn received(&mut self, pkid: u16) {
        if let Some(f) = self.inflight.iter_mut().find(|f| f.pkid == pkid) {
            f.released = true;
        }
    }

    /// The broker acknowledged `pkid` (PUBACK for QoS 1, PUBCOMP for QoS 2).
    /// False when no message is in flight under it.
    pub fn acked(&mut self, pkid: u16) -> bool {
        self.remove(pkid)
    }

    fn remove(&mut self, pkid: u16) -> bool {
        let i = match self.inflight.front() {
            Some(f) if f.pkid == pkid => 0,
            _ => match self.inflight.iter().position(|f| f.pkid == pkid) {
                Some(i) => i,
                None => return false,
            },
        };
        if let Some(f) = self.inflight.remove(i) {
            self.bytes -= f.msg.cost();
            self.release(f.pkid);
        }
        true
    }

    /// A packet id for a SUBSCRIBE or UNSUBSCRIBE (None: all in use).
    pub fn control_pkid(&mut self) -> Option<u16> {
        let id = self.fresh_pkid()?;
        self.control.push(id);
        Some(id)
    }

    /// Its SUBACK / UNSUBACK came.
    pub fn control_done(&mut self, pkid: u16) {
        if let Some(i) = self.control.iter().position(|&c| c == pkid) {
            self.control.swap_remove(i);
            self.release(pkid);
        }
    }

    /// A new connection: what was in flight, to write again first, in the
    /// order it was first sent. SUBSCRIBEs awaiting their ack are forgotten
    /// (every connection subscribes anew).
    pub fn resend(&mut self) -> Vec<Resend> {
        for id in std::mem::take(&mut self.control) {
            self.release(id);
        }
        self.inflight
            .iter()
            .map(|f| match f.released {
                true => Resend::Release(f.pkid),
                false => Resend::Publish(f.pkid, f.msg.clone()),
            })
            .collect()
    }

    /// The next packet id not in use (1..=65535), if any.
    fn fresh_pkid(&mut self) -> Option<u16> {
        for _ in 0..u16::MAX {
            self.next_pkid = self.next_pkid.wrapping_add(1).max(1);
            let id = self.next_pkid;
            let (word, bit) = (usize::from(id / 64), id % 64);
            if self.in_use[word] & (1 << bit) == 0 {
                self.in_use[word] |= 1 << bit;
                return Some(id);
            }
        }
        None
    }

    fn release(&mut self, id: u16) {
        self.in_use[usize::from(id / 64)] &= !(1 << (id % 64));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(n: usize, qos: QoS, droppable: bool) -> OutMsg {
        OutMsg {
            topic: Bytes::from_static(b"t"),
            qos,
            retain: false,
            payload: Bytes::from(vec![n as u8; n]),
            meta: Meta::None,
            droppable,
        }
    }

    fn drain_lens(o: &mut Outbox) -> Vec<usize> {
        std::iter::from_fn(|| o.take().map(|(_, m)| m.payload.len())).collect()
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
        // Larger than the whole bound: refused while others are queued
        // (a best-effort one is the one lost), admitted into an empty queue.
        assert!(r.push(msg(one * 3, QoS::AtLeastOnce, false)).is_err());
        let lost = r.dropped;
        r.push(msg(one * 3, QoS::AtMostOnce, true)).unwrap();
        assert_eq!((r.len(), r.dropped), (2, lost + 1));
        let mut e = Outbox::new(one * 2);
        e.push(msg(one * 3, QoS::AtLeastOnce, false)).unwrap();
        assert_eq!(e.len(), 1);
        assert!(e.push(msg(100, QoS::AtLeastOnce, false)).is_err());
    }

    #[test]
    fn unacked_messages_are_resent_in_order_under_their_ids_after_a_break() {
        let mut o = Outbox::new(1 << 20);
        for i in 1..=4 {
            o.push(msg(i, QoS::AtLeastOnce, false)).unwrap();
        }
        o.push(msg(5, QoS::ExactlyOnce, false)).unwrap();
        o.push(msg(6, QoS::ExactlyOnce, false)).unwrap();
        let ids: Vec<u16> = std::iter::from_fn(|| o.take().map(|(id, _)| id)).collect();
        assert_eq!(ids.len(), 6);
        assert!(o.acked(ids[0]));
        assert!(!o.acked(ids[0]), "acked twice");
        o.received(ids[4]);
        o.push(msg(7, QoS::AtLeastOnce, false)).unwrap();
        let sub = o.control_pkid().unwrap();
        let again: Vec<(u16, usize)> = o
            .resend()
            .into_iter()
            .map(|r| match r {
                Resend::Publish(id, m) => (id, m.payload.len()),
                Resend::Release(id) => (id, 0),
            })
            .collect();
        let want = vec![
            (ids[1], 2),
            (ids[2], 3),
            (ids[3], 4),
            (ids[4], 0),
            (ids[5], 6),
        ];
        assert_eq!(again, want);
        // The SUBSCRIBE's id is free again; the queued message goes next.
        assert_eq!(drain_lens(&mut o), vec![7]);
        assert!(o.control_pkid().is_some());
        let _ = sub;
        // QoS 0 is done once written.
        let mut z = Outbox::new(1 << 20);
        z.push(msg(5, QoS::AtMostOnce, true)).unwrap();
        assert_eq!(z.take().map(|(id, _)| id), Some(0));
        assert_eq!((z.len(), z.bytes()), (0, 0));
    }

    #[test]
    fn the_window_holds_messages_until_acks_come() {
        let mut o = Outbox::new(1 << 20);
        o.set_window(2);
        for i in 1..=5 {
            o.push(msg(i, QoS::AtLeastOnce, false)).unwrap();
        }
        let a = o.take().unwrap().0;
        let b = o.take().unwrap().0;
        assert!(o.take().is_none(), "window of 2");
        assert!(o.acked(b), "out of order ack");
        let c = o.take().unwrap().0;
        assert!(o.take().is_none());
        assert!(o.acked(a) && o.acked(c));
        assert_eq!(drain_lens(&mut o), vec![4, 5]);
        // QoS 0 is not held by the window.
        o.push(msg(9, QoS::AtMostOnce, true)).unwrap();
        assert_eq!(o.take().map(|(id, m)| (id, m.payload.len())), Some((0, 9)));
    }

    #[test]
    fn packet_ids_skip_those_in_use_across_wrap_around() {
        let mut o = Outbox::new(1 << 30);
        o.push(msg(1, QoS::AtLeastOnce, false)).unwrap();
        let held = o.take().unwrap().0;
        let sub = o.control_pkid().unwrap();
        let mut seen = std::collections::HashSet::new();
        for _ in 0..70_000 {
            o.push(msg(1, QoS::AtLeastOnce, false)).unwrap();
            let (id, _) = o.take().unwrap();
            assert!(id != 0 && id != held && id != sub, "{id}");
            seen.insert(id);
            assert!(o.acked(id));
        }
        assert_eq!(seen.len(), 65_533);
        o.control_done(sub);
        assert_eq!(o.resend().len(), 1);
        assert_eq!(o.len(), 1);
    }
}
