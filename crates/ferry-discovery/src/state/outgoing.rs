//! What discovery sends: heartbeats, announcements (with our certificate
//! when signed), answers and greetings, queued for `poll_transmit`.

use ferry_wire::beacon::{Beacon, BeaconBody, ParticipantInfo, TRAILER_LEN};

use super::pending::Due;
use super::{Destination, Discovery};

impl Discovery {
    pub(super) fn beacon(&self, body: BeaconBody) -> Vec<u8> {
        Beacon {
            domain: self.cfg.domain,
            participant: self.cfg.participant,
            body,
        }
        .encode()
    }

    /// Everyone our periodic datagrams reach (the broker only with
    /// `broker_too`).
    pub(super) fn destinations(&self, broker_too: bool) -> Vec<Destination> {
        let mut d = Vec::new();
        if self.cfg.multicast {
            d.push(Destination::Group);
        }
        for p in self.cfg.static_peers.iter().chain(&self.learned_peers) {
            d.push(Destination::Peer(*p));
        }
        if self.cfg.broker && broker_too {
            d.push(Destination::Broker);
        }
        d
    }

    pub(super) fn heartbeat(&self, greeting: bool) -> Vec<u8> {
        self.beacon(BeaconBody::Heartbeat {
            revision: self.revision,
            lease_ms: self.lease_ms(),
            greeting,
        })
    }

    /// The periodic heartbeat; the broker, which cannot carry requests,
    /// gets the whole announcement instead.
    pub(super) fn heartbeat_all(&mut self) {
        let hb = self.heartbeat(false);
        for to in self.destinations(false) {
            self.queue(to, hb.clone(), 0);
        }
        if self.cfg.broker {
            self.send_announce(&[Destination::Broker], 0);
        }
    }

    /// Our announcement to `to`, echoing `nonce` (a requester's challenge).
    pub(super) fn send_announce(&mut self, to: &[Destination], nonce: u64) {
        if to.is_empty() {
            return;
        }
        let mut info = self.cfg.info.clone();
        info.lease_ms = self.lease_ms();
        let (broker, direct): (Vec<&Destination>, Vec<&Destination>) =
            to.iter().partition(|d| **d == Destination::Broker);
        if !broker.is_empty() && !self.cfg.broker_addresses {
            // The broker gets no network addresses (see `Config`): only
            // named locators (shared memory, a Zenoh session's id).
            let mut bare = info.clone();
            bare.locators.retain(|l| l.socket_addr().is_none());
            self.push_announce(&bare, &broker, nonce);
            self.push_announce(&info, &direct, nonce);
        } else {
            self.push_announce(&info, &to.iter().collect::<Vec<_>>(), nonce);
        }
    }

    pub(super) fn push_announce(
        &mut self,
        info: &ParticipantInfo,
        to: &[&Destination],
        nonce: u64,
    ) {
        if to.is_empty() {
            return;
        }
        // Signed: each part leaves room for its trailer, and our
        // certificate goes first (a peer checks it once, then knows our key).
        let (trailer, credential) = match &self.keys {
            Some(k) => (TRAILER_LEN, k.credential.clone()),
            None => (0, Vec::new()),
        };
        let parts = Beacon::pack_announce(
            self.cfg.domain,
            self.cfg.participant,
            info,
            self.revision,
            &self.records,
            self.cfg.mtu.saturating_sub(trailer),
        );
        for d in to {
            for c in &credential {
                self.queue((*d).clone(), c.clone(), 0);
            }
            for p in &parts {
                self.queue((*d).clone(), p.clone(), nonce);
            }
        }
    }

    /// Answers requests for our records: to each requester (echoing its
    /// challenge), or once to the group when many asked at once (each
    /// requester got its challenge's echo when it asked).
    pub(super) fn answer(&mut self, due: Due) {
        for (to, nonce) in due.destinations() {
            self.send_announce(&[to], nonce);
        }
    }

    /// Greets newcomers with a heartbeat (they then ask for our records).
    pub(super) fn greet(&mut self, due: Due) {
        let hb = self.heartbeat(true);
        for (to, _) in due.destinations() {
            self.queue(to, hb.clone(), 0);
        }
    }
}
