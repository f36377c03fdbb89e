//! What discovery trusts: who may change a participant's state (its
//! origin), and how much one source address may cost (per-source caps and
//! a token bucket).

use std::collections::HashMap;
use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use ferry_wire::beacon::ParticipantInfo;

use super::types::Via;

/// Where a participant's state may come from: fixed at first contact.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Origin {
    /// Its discovery socket's address (the source of its first datagram).
    Direct(SocketAddr),
    /// Only ever heard through the MQTT broker.
    Broker,
}

/// How a datagram relates to the participant it names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// From its origin (or its origin's port on one of its own addresses).
    Owner,
    /// A participant known directly, heard through the broker too: it only
    /// proves liveness.
    BrokerCopy,
    /// A first datagram on the network from a participant known only
    /// through the broker: the origin becomes this address.
    Upgrade,
    /// The same-host copy of a runtime's datagram on its other interface,
    /// before its locators say which addresses are its own: ignored.
    Copy,
    /// From anyone else: ignored and counted.
    Stranger,
}

impl Origin {
    pub(crate) fn of(from: SocketAddr, via: Via) -> Self {
        match via {
            Via::Broker => Origin::Broker,
            _ => Origin::Direct(from),
        }
    }

    /// Whether a datagram from `from` (arriving `via`) may speak for the
    /// participant. A runtime sends to the group on each of its interfaces
    /// from one socket, so its datagrams come from one port on several of
    /// its own addresses: the addresses its (owner-sent) locators name.
    pub(crate) fn verdict(
        &self,
        from: SocketAddr,
        via: Via,
        info: Option<&ParticipantInfo>,
    ) -> Verdict {
        match (self, via) {
            (Origin::Broker, Via::Broker) => Verdict::Owner,
            (Origin::Direct(_), Via::Broker) => Verdict::BrokerCopy,
            (Origin::Broker, _) => Verdict::Upgrade,
            (Origin::Direct(a), _) => {
                if *a == from {
                    return Verdict::Owner;
                }
                let own_ip = info.is_some_and(|i| {
                    i.locators
                        .iter()
                        .filter_map(|l| l.socket_addr())
                        .any(|l| l.ip() == from.ip())
                });
                if a.port() == from.port() && own_ip {
                    Verdict::Owner
                } else if a.port() == from.port()
                    && info.is_none()
                    && (a.ip().is_loopback() || from.ip().is_loopback())
                {
                    // The other copy of a same-host runtime's multicast
                    // (sent on loopback and on its network interface)
                    // before its locators are known: not a forgery, but
                    // not taken either.
                    Verdict::Copy
                } else {
                    Verdict::Stranger
                }
            }
        }
    }

    /// The source address, for per-source accounting (`None`: the broker).
    pub(crate) fn ip(&self) -> Option<IpAddr> {
        match self {
            Origin::Direct(a) => Some(a.ip()),
            Origin::Broker => None,
        }
    }
}

/// Most participants one source address may hold in the table (a robot
/// with a few hundred processes on one address still fits).
pub const MAX_PARTICIPANTS_PER_SOURCE: usize = 256;
/// Most endpoint and node records all participants of one source address
/// may hold together.
pub const MAX_RECORDS_PER_SOURCE: usize = 32_768;
/// Announcement parts, requests and new participants accepted per second
/// from one source address (sustained); `SOURCE_BURST` at once.
pub const SOURCE_RATE: f64 = 1000.0;
/// See [`SOURCE_RATE`].
pub const SOURCE_BURST: f64 = 4000.0;

/// What one source address holds and may still spend.
#[derive(Debug, Clone)]
struct Use {
    participants: usize,
    records: usize,
    bucket: Bucket,
}

/// A token bucket: `rate` tokens a second, at most `burst` held.
#[derive(Debug, Clone)]
pub(crate) struct Bucket {
    tokens: f64,
    refilled: Instant,
}

impl Bucket {
    /// A full bucket of `burst` tokens.
    pub(crate) fn full(burst: f64, now: Instant) -> Bucket {
        Bucket {
            tokens: burst,
            refilled: now,
        }
    }

    /// Refills for the time passed, then takes one token; false when none
    /// is left.
    pub(crate) fn take(&mut self, now: Instant, rate: f64, burst: f64) -> bool {
        let dt = now.saturating_duration_since(self.refilled).as_secs_f64();
        self.tokens = (self.tokens + dt * rate).min(burst);
        self.refilled = now;
        if self.tokens >= 1.0 {
            self.tokens -= 1.0;
            true
        } else {
            false
        }
    }
}

/// Per-source accounting.
#[derive(Debug, Default)]
pub(crate) struct Sources {
    by_ip: HashMap<IpAddr, Use>,
}

impl Sources {
    fn entry(&mut self, ip: IpAddr, now: Instant) -> &mut Use {
        if self.by_ip.len() > 8192 {
            // Sources that hold nothing are only rate state: forget them.
            self.by_ip.retain(|_, u| {
                u.participants > 0
                    || now.duration_since(u.bucket.refilled) < Duration::from_secs(10)
            });
        }
        self.by_ip.entry(ip).or_insert(Use {
            participants: 0,
            records: 0,
            bucket: Bucket::full(SOURCE_BURST, now),
        })
    }

    /// Spends one token of `ip`'s budget; false when it is exhausted.
    pub(crate) fn spend(&mut self, ip: Option<IpAddr>, now: Instant) -> bool {
        let Some(ip) = ip else { return true };
        self.entry(ip, now)
            .bucket
            .take(now, SOURCE_RATE, SOURCE_BURST)
    }

    pub(crate) fn participants(&self, ip: Option<IpAddr>) -> usize {
        ip.and_then(|ip| self.by_ip.get(&ip))
            .map_or(0, |u| u.participants)
    }

    pub(crate) fn records(&self, ip: Option<IpAddr>) -> usize {
        ip.and_then(|ip| self.by_ip.get(&ip))
            .map_or(0, |u| u.records)
    }

    pub(crate) fn add_participant(&mut self, ip: Option<IpAddr>, now: Instant) {
        if let Some(ip) = ip {
            self.entry(ip, now).participants += 1;
        }
    }

    /// A participant of `ip` holding `records` left the table.
    pub(crate) fn remove_participant(&mut self, ip: Option<IpAddr>, records: usize) {
        if let Some(u) = ip.and_then(|ip| self.by_ip.get_mut(&ip)) {
            u.participants = u.participants.saturating_sub(1);
            u.records = u.records.saturating_sub(records);
        }
    }

    /// A participant of `ip` now holds `new` records instead of `old`.
    pub(crate) fn set_records(&mut self, ip: Option<IpAddr>, old: usize, new: usize) {
        if let Some(u) = ip.and_then(|ip| self.by_ip.get_mut(&ip)) {
            u.records = u.records.saturating_sub(old) + new;
        }
    }
}
