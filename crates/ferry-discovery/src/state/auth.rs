//! Signed discovery (security `permissive` or `enforce`): what this
//! runtime needs to sign its beacons and to check others'.
//!
//! - Every beacon sent is sealed with a trailer ([`ferry_wire::beacon::seal`]):
//!   key id, a strictly increasing stamp, a nonce, an Ed25519 signature.
//! - A peer's key becomes known from its certificate, sent in `Credential`
//!   beacons before its announcements and checked against our CA once
//!   ([`Keys::take_chunk`]); a bad one is remembered for [`BAD_KEY_HOLD`].
//! - A participant's id is pinned to the key that signed its first beacon;
//!   stamps older than the newest by more than [`REPLAY_WINDOW_US`], or seen
//!   before, are replays ([`Replay`]).
//! - Stamps prove order, not age: a recorded beacon of a runtime that is
//!   gone would pass them. So a participant becomes visible only after it
//!   echoed a challenge we sent it ([`Keys::challenge`], [`Keys::proves`]).

use std::collections::HashMap;
use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_security::{Identity, KeyId, PeerError, PeerIdentity};
use ferry_wire::beacon::{seal, Beacon, FLAG_PLAIN_OK, MAX_CREDENTIAL};
use ferry_wire::ParticipantId;

use super::guard::Bucket;

/// Security settings of discovery.
#[derive(Clone)]
pub struct Auth {
    /// This runtime's identity: signs its beacons, and its CA checks others'.
    pub identity: Arc<Identity>,
    /// Refuse unsigned beacons (`enforce`); else take them as plain peers
    /// too (`permissive`), and let plain runtimes take ours.
    pub enforce: bool,
}

impl fmt::Debug for Auth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Auth")
            .field("enclave", &self.identity.enclave())
            .field("enforce", &self.enforce)
            .finish()
    }
}

/// How long a certificate that failed its check is not looked at again.
pub const BAD_KEY_HOLD: Duration = Duration::from_secs(60);
/// How far below the newest stamp of a participant a stamp not seen before
/// is still taken (beacons reordered on the way).
pub const REPLAY_WINDOW_US: u64 = 2_000_000;
/// How long a challenge stays valid.
pub const CHALLENGE_LIFE: Duration = Duration::from_secs(10);
/// How long the newest stamp of a participant that left is kept.
pub const FORGOTTEN_HOLD: Duration = Duration::from_secs(600);
/// Least time between two challenges to a participant whose key we lack.
pub const UNKNOWN_KEY_ASK: Duration = Duration::from_secs(1);
/// Through the broker, challenges cannot travel: a stamp within this of
/// our clock proves freshness instead.
pub const BROKER_SKEW_US: u64 = 60_000_000;
/// Signature checks a second in all, whatever the sources (a flood from
/// many spoofed addresses would pass each source's own budget): ~17 % of
/// a core at 34 µs each.
pub const VERIFY_RATE: f64 = 5000.0;
/// Most certificates being assembled at once.
const MAX_ASSEMBLIES: usize = 64;
/// Most keys remembered (good and bad).
const MAX_KEYS: usize = 4096;
/// Stamps remembered per participant.
const RECENT: usize = 64;

/// Why a peer's certificate was refused (the counter it goes to).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadKey {
    /// Not signed by our CA, not a certificate, or not its key id.
    ForeignCa,
    /// Outside its validity.
    Expired,
    /// Its grants do not cover this domain (or do not decode).
    Denied,
}

impl From<&PeerError> for BadKey {
    fn from(e: &PeerError) -> Self {
        match e {
            PeerError::Validity(_) => BadKey::Expired,
            PeerError::Domain { .. } | PeerError::Grants { .. } => BadKey::Denied,
            _ => BadKey::ForeignCa,
        }
    }
}

/// What is known about a key id.
pub(crate) enum Lookup {
    /// Its certificate was checked and is good.
    Good(Arc<PeerIdentity>),
    /// Its certificate was refused lately.
    Bad(BadKey),
    /// Never seen (or forgotten).
    Unknown,
}

enum KeyState {
    Good(Arc<PeerIdentity>),
    Bad(BadKey, Instant),
}

struct CredAsm {
    total: usize,
    bytes: Vec<u8>,
    got: Vec<bool>,
    started: Instant,
}

struct Challenge {
    nonce: u64,
    made: Instant,
    asked: Instant,
}

/// Replay state of one participant: its newest stamp and the last few.
#[derive(Debug, Clone)]
pub(crate) struct Replay {
    newest: u64,
    recent: [u64; RECENT],
    next: usize,
}

/// How a stamp relates to what a participant sent before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Freshness {
    /// Not seen before, within the window.
    Fresh,
    /// Seen already (a copy on another interface, or a replay of a recent
    /// beacon): harmless, ignored.
    Duplicate,
    /// Older than the window: a replay.
    Stale,
}

impl Default for Replay {
    fn default() -> Self {
        Replay {
            newest: 0,
            recent: [0; RECENT],
            next: 0,
        }
    }
}

impl Replay {
    pub(crate) fn check(&self, stamp: u64) -> Freshness {
        if self.newest == 0 || stamp > self.newest {
            Freshness::Fresh
        } else if self.newest - stamp > REPLAY_WINDOW_US {
            Freshness::Stale
        } else if self.recent.contains(&stamp) {
            Freshness::Duplicate
        } else {
            Freshness::Fresh
        }
    }

    /// The newest stamp taken (0: none).
    pub(crate) fn newest(&self) -> u64 {
        self.newest
    }

    pub(crate) fn note(&mut self, stamp: u64) {
        self.newest = self.newest.max(stamp);
        self.recent[self.next] = stamp;
        self.next = (self.next + 1) % RECENT;
    }
}

/// This runtime's signing state and what it knows of others' keys.
pub(crate) struct Keys {
    pub(crate) auth: Auth,
    own: KeyId,
    /// Our certificate as unsigned `Credential` beacons.
    pub(crate) credential: Vec<Vec<u8>>,
    peers: HashMap<KeyId, KeyState>,
    /// Certificates being assembled, by the key id their chunks claim and
    /// their source (one source cannot disturb another's assembly).
    creds: HashMap<(KeyId, SocketAddr), CredAsm>,
    challenges: HashMap<ParticipantId, Challenge>,
    /// The newest stamp of participants that left, for [`FORGOTTEN_HOLD`]:
    /// their recorded beacons are replays, not a new participant.
    forgotten: HashMap<ParticipantId, (u64, Instant)>,
    last_stamp: u64,
    unix_at_start_us: u64,
    start: Instant,
    pub(crate) now: Instant,
    domain: u16,
    /// The global budget of [`VERIFY_RATE`] checks a second.
    verify: Bucket,
}

impl fmt::Debug for Keys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keys")
            .field("auth", &self.auth)
            .field("peers", &self.peers.len())
            .finish_non_exhaustive()
    }
}

impl Keys {
    pub(crate) fn new(
        auth: Auth,
        domain: u16,
        participant: ParticipantId,
        unix_at_start_us: u64,
        now: Instant,
    ) -> Self {
        let own = auth.identity.key_id();
        let credential =
            Beacon::credential(domain, participant, auth.identity.cert_der()).unwrap_or_default();
        Keys {
            auth,
            own,
            credential,
            peers: HashMap::new(),
            creds: HashMap::new(),
            challenges: HashMap::new(),
            forgotten: HashMap::new(),
            last_stamp: 0,
            unix_at_start_us,
            start: now,
            now,
            domain,
            verify: Bucket::full(VERIFY_RATE, now),
        }
    }

    /// One signature check out of the global budget; false when spent.
    pub(crate) fn spend_verify(&mut self, now: Instant) -> bool {
        self.verify.take(now, VERIFY_RATE, VERIFY_RATE)
    }

    /// Our clock, µs since the Unix epoch.
    pub(crate) fn unix_us(&self, now: Instant) -> u64 {
        self.unix_at_start_us + now.saturating_duration_since(self.start).as_micros() as u64
    }

    /// Signs an encoded beacon (with `nonce`: a challenge or its echo).
    pub(crate) fn seal(&mut self, bytes: Vec<u8>, nonce: u64) -> Vec<u8> {
        let stamp = (self.last_stamp + 1).max(self.unix_us(self.now));
        self.last_stamp = stamp;
        let flags = if self.auth.enforce { 0 } else { FLAG_PLAIN_OK };
        let id = &self.auth.identity;
        seal(bytes, flags, self.own, stamp, nonce, |m| id.sign(m))
    }

    pub(crate) fn lookup(&mut self, key: &KeyId, now: Instant) -> Lookup {
        let unix_s = (self.unix_us(now) / 1_000_000) as i64;
        match self.peers.get(key) {
            Some(KeyState::Good(p)) if unix_s > p.not_after() => {
                // Expired since it was checked: its beacons are refused,
                // and its participants leave when their leases end.
                self.peers
                    .insert(*key, KeyState::Bad(BadKey::Expired, now + BAD_KEY_HOLD));
                Lookup::Bad(BadKey::Expired)
            }
            Some(KeyState::Good(p)) => Lookup::Good(p.clone()),
            Some(KeyState::Bad(why, until)) if now < *until => Lookup::Bad(*why),
            Some(KeyState::Bad(..)) => {
                self.peers.remove(key);
                Lookup::Unknown
            }
            None => Lookup::Unknown,
        }
    }

    /// The identity of a key known good.
    pub(crate) fn peer(&self, key: &KeyId) -> Option<&Arc<PeerIdentity>> {
        match self.peers.get(key) {
            Some(KeyState::Good(p)) => Some(p),
            _ => None,
        }
    }

    /// One chunk of a certificate signed for `key`. When it completes the
    /// certificate, it is checked once: `Some(Ok)` a new good key,
    /// `Some(Err)` refused; `None` incomplete or already known.
    pub(crate) fn take_chunk(
        &mut self,
        key: KeyId,
        from: SocketAddr,
        offset: u16,
        total: u16,
        chunk: &[u8],
        now: Instant,
    ) -> Option<Result<Arc<PeerIdentity>, (BadKey, String)>> {
        if !matches!(self.lookup(&key, now), Lookup::Unknown) {
            return None;
        }
        let (offset, total) = (offset as usize, total as usize);
        if total > MAX_CREDENTIAL {
            return None;
        }
        let slot = (key, from);
        if !self.creds.contains_key(&slot) && self.creds.len() >= MAX_ASSEMBLIES {
            // Forget the oldest half-assembled certificate.
            remove_oldest(&mut self.creds, |a| a.started);
        }
        let chunks = total.div_ceil(ferry_wire::beacon::CREDENTIAL_CHUNK);
        let asm = self.creds.entry(slot).or_insert_with(|| CredAsm {
            total,
            bytes: vec![0; total],
            got: vec![false; chunks],
            started: now,
        });
        if asm.total != total {
            *asm = CredAsm {
                total,
                bytes: vec![0; total],
                got: vec![false; chunks],
                started: now,
            };
        }
        let i = offset / ferry_wire::beacon::CREDENTIAL_CHUNK;
        asm.bytes[offset..offset + chunk.len()].copy_from_slice(chunk);
        asm.got[i] = true;
        if !asm.got.iter().all(|g| *g) {
            return None;
        }
        let asm = self.creds.remove(&slot).expect("just assembled");
        if ferry_security::key_id(&asm.bytes) != key {
            // Not that key's certificate: anyone can claim a key id, so
            // nothing is remembered against the key (its owner's own
            // certificate must still be taken).
            return Some(Err((
                BadKey::ForeignCa,
                "certificate does not hash to the key id it claims".to_string(),
            )));
        }
        if !self.spend_verify(now) {
            return None; // over budget: its owner sends it again
        }
        if self.peers.len() >= MAX_KEYS {
            // Good keys each took a certificate of our CA: few. Refused
            // ones are what a flood leaves behind.
            self.peers.retain(|_, s| matches!(s, KeyState::Good(_)));
        }
        let checked = self
            .auth
            .identity
            .verify_peer(&asm.bytes, self.domain)
            .map(Arc::new)
            .map_err(|e| (BadKey::from(&e), e.to_string()));
        match &checked {
            Ok(p) => self.peers.insert(key, KeyState::Good(p.clone())),
            Err((why, _)) => self
                .peers
                .insert(key, KeyState::Bad(*why, now + BAD_KEY_HOLD)),
        };
        Some(checked)
    }

    /// The challenge for `id` (the same while it is valid, so that a late
    /// answer to an earlier ask still proves).
    pub(crate) fn challenge(&mut self, id: ParticipantId, now: Instant) -> u64 {
        if self.challenges.len() >= MAX_KEYS {
            self.challenges.retain(|_, c| now < c.made + CHALLENGE_LIFE);
            if self.challenges.len() >= MAX_KEYS {
                // A flood of ids: the oldest goes, not everyone's.
                remove_oldest(&mut self.challenges, |c| c.asked);
            }
        }
        let c = self.challenges.entry(id).or_insert_with(|| Challenge {
            nonce: fresh_nonce(),
            made: now,
            asked: now,
        });
        if now >= c.made + CHALLENGE_LIFE {
            *c = Challenge {
                nonce: fresh_nonce(),
                made: now,
                asked: now,
            };
        }
        c.asked = now;
        c.nonce
    }

    /// Whether to challenge `id`, whose key we lack, now (at most every
    /// [`UNKNOWN_KEY_ASK`]).
    pub(crate) fn may_ask(&self, id: ParticipantId, now: Instant) -> bool {
        self.challenges
            .get(&id)
            .is_none_or(|c| now >= c.asked + UNKNOWN_KEY_ASK)
    }

    /// Whether `nonce` answers our valid challenge to `id`.
    pub(crate) fn proves(&self, id: ParticipantId, nonce: u64, now: Instant) -> bool {
        nonce != 0
            && self
                .challenges
                .get(&id)
                .is_some_and(|c| c.nonce == nonce && now < c.made + CHALLENGE_LIFE)
    }

    /// A challenge answered is used up: a recording of the answer cannot
    /// prove again.
    pub(crate) fn used(&mut self, id: ParticipantId) {
        self.challenges.remove(&id);
    }

    /// `id` left with `newest` as its newest stamp.
    pub(crate) fn forget(&mut self, id: ParticipantId, newest: u64) {
        let now = self.now;
        if self.forgotten.len() >= MAX_KEYS {
            self.forgotten.retain(|_, (_, t)| now < *t + FORGOTTEN_HOLD);
            if self.forgotten.len() >= MAX_KEYS {
                remove_oldest(&mut self.forgotten, |(_, t)| *t);
            }
        }
        self.forgotten.insert(id, (newest, now));
    }

    /// Whether `stamp` is no newer than what `id` sent before it left.
    pub(crate) fn sent_before_it_left(&self, id: ParticipantId, stamp: u64) -> bool {
        self.forgotten
            .get(&id)
            .is_some_and(|(newest, t)| stamp <= *newest && self.now < *t + FORGOTTEN_HOLD)
    }

    /// Through the broker: whether `stamp` is near our clock.
    pub(crate) fn near_now(&self, stamp: u64, now: Instant) -> bool {
        self.unix_us(now).abs_diff(stamp) <= BROKER_SKEW_US
    }
}

/// Removes the entry whose `age` is least (the oldest) from a full map.
fn remove_oldest<K: Copy + Eq + std::hash::Hash, V>(
    map: &mut HashMap<K, V>,
    age: impl Fn(&V) -> Instant,
) {
    if let Some(old) = map.iter().min_by_key(|(_, v)| age(v)).map(|(k, _)| *k) {
        map.remove(&old);
    }
}

fn fresh_nonce() -> u64 {
    loop {
        let n = ferry_security::random_u64();
        if n != 0 {
            return n;
        }
    }
}

/// The grant an endpoint of `kind` needs on its name.
pub fn action_of(kind: ferry_wire::EndpointKind) -> ferry_security::Action {
    use ferry_security::Action;
    use ferry_wire::EndpointKind;
    match kind {
        EndpointKind::Publisher => Action::Publish,
        EndpointKind::Subscriber => Action::Subscribe,
        EndpointKind::Service => Action::Serve,
        EndpointKind::Client => Action::Call,
    }
}
