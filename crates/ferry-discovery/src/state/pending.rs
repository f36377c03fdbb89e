//! Answers (to requests for our records, greetings to newcomers) waiting
//! for their coalescing moment.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use super::types::Destination;

/// Answers waiting for their (coalescing) moment: to each asker by unicast,
/// or once to the group when many asked — at most every [`GROUP_GAP`], so a
/// crowd asking over a second is answered by a few datagrams to the group,
/// not one per crowd member.
#[derive(Debug, Default)]
pub(super) struct Pending {
    /// Askers, each with the challenge its request carried (0: none).
    to: Vec<(SocketAddr, u64)>,
    pub(super) at: Option<Instant>,
    last_group: Option<Instant>,
}

/// Least time between two answers of one kind to the group.
const GROUP_GAP: Duration = Duration::from_secs(2);

impl Pending {
    pub(super) fn add(&mut self, to: SocketAddr, nonce: u64, at: Instant) {
        if let Some(e) = self.to.iter_mut().find(|(a, _)| *a == to) {
            e.1 = nonce;
        } else if self.to.len() < 4096 {
            self.to.push((to, nonce));
        }
        self.at = Some(self.at.map_or(at, |t| t.min(at)));
    }

    /// The destinations due now, if any. More than `crowd` askers at once
    /// (an eighth of the domain, at least [`GROUP_ANSWER`]) get one
    /// datagram to the group — at most every [`GROUP_GAP`], a crowd asking
    /// in between waits for it; a few askers (those that lost it) are
    /// answered by unicast, at most [`UNICAST_BATCH`] per turn (the rest a
    /// millisecond later), so a crowd neither floods the group nor our
    /// send buffer.
    pub(super) fn due(&mut self, now: Instant, group_ok: bool, crowd: usize) -> Option<Due> {
        if self.at.is_none_or(|t| t > now) {
            return None;
        }
        if group_ok && self.to.len() > crowd {
            let free_at = self.last_group.map_or(now, |t| t + GROUP_GAP);
            if now < free_at {
                // A crowd still asks: one datagram to the group when the
                // gap ends serves it, unicast to each would cost the
                // crowd's square.
                self.at = Some(free_at);
                return None;
            }
            self.at = None;
            self.last_group = Some(now);
            return Some(Due {
                group: true,
                askers: std::mem::take(&mut self.to),
            });
        }
        let n = self.to.len().min(UNICAST_BATCH);
        let askers: Vec<(SocketAddr, u64)> = self.to.drain(..n).collect();
        self.at = (!self.to.is_empty()).then(|| now + Duration::from_millis(1));
        Some(Due {
            group: false,
            askers,
        })
    }
}

/// Answers due now.
#[derive(Debug)]
pub(super) struct Due {
    /// One datagram to the group serves them all.
    pub(super) group: bool,
    /// The askers and their challenges: answered each by unicast, or (with
    /// `group`) sent only the echo of their challenge.
    pub(super) askers: Vec<(SocketAddr, u64)>,
}

impl Due {
    /// Where the answer goes, with the challenge it echoes.
    pub(super) fn destinations(&self) -> Vec<(Destination, u64)> {
        if self.group {
            vec![(Destination::Group, 0)]
        } else {
            self.askers
                .iter()
                .map(|(a, n)| (Destination::Peer(*a), *n))
                .collect()
        }
    }
}

/// Most unicast answers of one kind sent in one turn.
const UNICAST_BATCH: usize = 64;

/// More answers than this at once (in a small domain) go to the group
/// once instead.
pub(super) const GROUP_ANSWER: usize = 4;
