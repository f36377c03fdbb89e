//! Signed beacons on the receiving side: checking a datagram's trailer
//! before it touches any state, and what a verified one proves.

use std::net::SocketAddr;
use std::time::Instant;

use ferry_security::KeyId;
use ferry_wire::beacon::{signing_message, BeaconBody, Parsed, FLAG_PLAIN_OK};
use ferry_wire::ParticipantId;

use super::auth::{BadKey, Freshness, Lookup};
use super::{DatagramError, Destination, Discovery, Via};

impl Discovery {
    /// Checks a datagram's signature (security on), or that a plain one
    /// may be taken. `Consumed`: handled here (a certificate chunk, a
    /// harmless duplicate).
    pub(super) fn authenticate(
        &mut self,
        now: Instant,
        from: SocketAddr,
        via: Via,
        p: &Parsed<'_>,
    ) -> Result<Checked, DatagramError> {
        let id = p.beacon.participant;
        let credential = matches!(p.beacon.body, BeaconBody::Credential { .. });
        let Some(keys) = self.keys.as_mut() else {
            return match p.trailer {
                None => Ok(Checked::Plain),
                Some(_) if p.flags & FLAG_PLAIN_OK != 0 => Ok(if credential {
                    Checked::Consumed
                } else {
                    Checked::Plain
                }),
                Some(_) => {
                    self.stats.security.needs_security += 1;
                    Err(DatagramError::NeedsSecurity(from))
                }
            };
        };
        let Some(t) = p.trailer else {
            if keys.auth.enforce {
                self.stats.security.unsigned += 1;
                return Err(DatagramError::Unsigned(from));
            }
            return Ok(Checked::Plain);
        };
        match &p.beacon.body {
            // Requests change no state: not verified (answers are bounded
            // by the source's budget). Their nonce is echoed.
            BeaconBody::Request { .. } => {
                return Ok(Checked::Signed(Signed {
                    key: None,
                    stamp: t.stamp,
                    nonce: t.nonce,
                    proves: false,
                }))
            }
            BeaconBody::Credential {
                offset,
                total,
                bytes,
            } => {
                self.spend(from, via, now)?;
                let keys = self.keys.as_mut().expect("checked above");
                return match keys.take_chunk(t.key_id, from, *offset, *total, bytes, now) {
                    Some(Err((why, _))) => {
                        self.count_bad(why);
                        Err(DatagramError::BadCredential { from, why })
                    }
                    _ => Ok(Checked::Consumed),
                };
            }
            _ => {}
        }
        if let (BeaconBody::Heartbeat { revision, .. }, Some(e)) =
            (&p.beacon.body, self.table.get(&id))
        {
            // Lazy: a heartbeat that would change nothing (same key and
            // revision, a proven participant verified less than a third of
            // its lease ago) is not verified, and not taken either.
            if e.key == Some(t.key_id)
                && e.proven
                && e.known.is_some()
                && *revision == e.revision
                && e.verified_at.is_some_and(|v| now < v + e.lease / 3)
            {
                self.stats.security.skipped += 1;
                return Ok(Checked::Consumed);
            }
        }
        let peer = match keys.lookup(&t.key_id, now) {
            Lookup::Good(p) => p,
            Lookup::Bad(why) => {
                self.count_bad(why);
                return Err(DatagramError::BadCredential { from, why });
            }
            Lookup::Unknown => {
                self.stats.security.unknown_key += 1;
                // Ask for its records (they come with its certificate),
                // with a challenge its answer must echo.
                if via != Via::Broker
                    && !self.left
                    && !self.table.contains_key(&id)
                    && keys.may_ask(id, now)
                    && self.spend(from, via, now).is_ok()
                {
                    let keys = self.keys.as_mut().expect("checked above");
                    let nonce = keys.challenge(id, now);
                    let rq = self.beacon(BeaconBody::Request { target: id });
                    self.queue(Destination::Peer(from), rq, nonce);
                }
                return Err(DatagramError::UnknownKey(from));
            }
        };
        self.spend(from, via, now)?;
        // A participant proven by this key is bounded by its source's
        // budget alone: a flood of forgeries naming it cannot starve the
        // checks of everyone else. Others draw on the global budget too.
        let proven = self
            .table
            .get(&id)
            .is_some_and(|e| e.proven && e.key == Some(t.key_id));
        if !proven && !self.keys.as_mut().is_some_and(|k| k.spend_verify(now)) {
            self.stats.refused += 1;
            return Err(DatagramError::Throttled(from.ip()));
        }
        if !peer.verify(&signing_message(p.covered), &t.sig) {
            self.stats.security.bad_signature += 1;
            return Err(DatagramError::BadSignature(from));
        }
        if !self.table.contains_key(&id)
            && self
                .keys
                .as_ref()
                .is_some_and(|k| k.sent_before_it_left(id, t.stamp))
        {
            // A recording of a participant that left.
            self.stats.security.replayed += 1;
            return Err(DatagramError::Replayed(id));
        }
        // The stamps of the key that owns the id (another key's beacon is
        // judged by the owner check that follows).
        if let Some(e) = self.table.get(&id).filter(|e| e.key == Some(t.key_id)) {
            match e.replay.check(t.stamp) {
                Freshness::Fresh => {}
                Freshness::Duplicate => {
                    self.stats.security.duplicate += 1;
                    return Ok(Checked::Consumed);
                }
                Freshness::Stale => {
                    self.stats.security.replayed += 1;
                    return Err(DatagramError::Replayed(id));
                }
            }
        }
        let keys = self.keys.as_ref().expect("checked above");
        let proves = if via == Via::Broker {
            keys.near_now(t.stamp, now)
        } else {
            keys.proves(id, t.nonce, now)
        };
        Ok(Checked::Signed(Signed {
            key: Some(t.key_id),
            stamp: t.stamp,
            nonce: t.nonce,
            proves,
        }))
    }

    pub(super) fn count_bad(&mut self, why: BadKey) {
        let s = &mut self.stats.security;
        match why {
            BadKey::ForeignCa => s.foreign_ca += 1,
            BadKey::Expired => s.expired += 1,
            BadKey::Denied => s.denied += 1,
        }
    }

    /// A signed beacon of `id` was taken: pins its key (at first contact),
    /// notes its stamp, and takes a proof of freshness (its records
    /// waiting for it become visible).
    pub(super) fn after_signed(
        &mut self,
        now: Instant,
        id: ParticipantId,
        signed: Option<&Signed>,
    ) {
        let Some(s) = signed else { return };
        let Some(e) = self.table.get_mut(&id) else {
            return;
        };
        if e.key.is_none() {
            e.key = s.key;
            e.proven = false;
        }
        e.replay.note(s.stamp);
        e.verified_at = Some(now);
        if s.proves && !e.proven {
            e.proven = true;
            if let Some(k) = &mut self.keys {
                k.used(id);
            }
            if let Some(asm) = e.ready.take() {
                self.complete(now, id, asm);
            }
        }
    }
}

/// What [`Discovery::authenticate`] made of a datagram.
pub(super) enum Checked {
    /// Unsigned, and plain beacons are taken.
    Plain,
    /// Signed and verified (a request: signed, not verified).
    Signed(Signed),
    /// Handled already (a certificate chunk, a duplicate).
    Consumed,
}

/// A verified trailer.
pub(super) struct Signed {
    /// The signer (`None` for requests, which are not verified).
    pub(super) key: Option<KeyId>,
    pub(super) stamp: u64,
    pub(super) nonce: u64,
    /// It echoes our challenge (or, through the broker, its stamp is
    /// near our clock): the sender is alive now.
    pub(super) proves: bool,
}
