//! Protected UDP (security on): a Noise IK handshake between two runtimes
//! (snow), then every datagram sealed with AES-256-GCM under the session's
//! keys, a 64-bit counter as nonce, a replay window, and a fresh handshake
//! every two minutes (new keys, forward secrecy, certificates checked
//! again). Sans-IO: the UDP driver hands in `now`, datagrams and addresses,
//! and sends what comes back.
//!
//! Each runtime draws an X25519 static key at start (never on disk) and
//! announces it in its UDP locator (`?key=…`), inside its *signed*
//! discovery announcement: the certificate that signs the announcement
//! binds the key to the enclave. The initiator knows the responder's key
//! from there (IK), the responder checks that the key the initiator reveals
//! is the one that participant announced. Wire format:
//! `ferry_wire::seal`.
//!
//! Sessions are per remote address (one UDP socket per runtime) and carry
//! every stream between the two runtimes, in both directions. A session is
//! used for sending once it is confirmed: at once by its initiator, by the
//! responder after the first datagram the initiator sealed under it. Old
//! sessions keep opening stragglers until three newer ones exist.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ferry_wire::seal::{self as wire, SealView};
use ferry_wire::ParticipantId;
use parking_lot::RwLock;
use snow::{HandshakeState, StatelessTransportState};

use crate::{KeyId, PeerIdentity};

/// The Noise protocol of ferry's UDP sessions.
pub const NOISE: &str = "Noise_IK_25519_AESGCM_SHA256";
/// Bound into every handshake with the domain and both participants.
const PROLOGUE: &[u8] = b"ferry/udp/1";
/// Bytes of an X25519 public key.
pub const KEY_LEN: usize = 32;

/// What discovery proved about a remote runtime, as UDP needs it.
#[derive(Debug, Clone)]
pub struct ProvenUdp {
    /// The X25519 static key its signed announcement names.
    pub key: [u8; KEY_LEN],
    /// Its certificate's identity.
    pub identity: Arc<PeerIdentity>,
}

/// Looks up what discovery proved about a participant.
pub type Lookup = Box<dyn Fn(ParticipantId) -> Option<ProvenUdp> + Send + Sync>;

/// Timers and limits (the defaults; tests shorten them).
#[derive(Debug, Clone, Copy)]
pub struct Tuning {
    /// A session this old is replaced by a new handshake.
    pub rekey_after: Duration,
    /// … or after this many datagrams sealed under it.
    pub rekey_datagrams: u64,
    /// A session never seals more than this (AES-GCM's limit is 2²³).
    pub max_datagrams: u64,
    /// A SHAKE1 without answer is repeated this often …
    pub shake_repeat: Duration,
    /// … and given up after this long (the next datagram starts anew).
    pub shake_give_up: Duration,
    /// SHAKE1s answered per second at most (each costs two X25519).
    pub shakes_per_s: u32,
    /// Sessions with a peer discovery no longer knows (silent past its
    /// lease: an outage) are kept this long, so streams resume under them
    /// when the link returns; a peer with another key loses them at once.
    pub forget_after: Duration,
}

impl Default for Tuning {
    fn default() -> Self {
        Tuning {
            rekey_after: Duration::from_secs(120),
            rekey_datagrams: 1 << 21,
            max_datagrams: 1 << 23,
            shake_repeat: Duration::from_millis(100),
            shake_give_up: Duration::from_secs(5),
            shakes_per_s: 200,
            forget_after: Duration::from_secs(600),
        }
    }
}

/// Sessions kept per remote address (the newest; older ones are dropped).
const SESSIONS_PER_PEER: usize = 4;
/// Addresses one participant may hold sessions from at once (a peer with
/// a valid identity handshaking from ever new ports must not grow memory).
const ADDRESSES_PER_PARTICIPANT: usize = 8;

/// What [`UdpSecurity::seal`] did with a datagram.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Sealed into the output buffer: send that.
    Sealed,
    /// The peer is a plain one (`permissive`): send the datagram as it is.
    Plain,
    /// No session yet: dropped (the protocol repeats it); a handshake is
    /// under way.
    Held,
    /// Not sent: `enforce` and the peer proved no UDP key.
    Refused,
}

/// The result of [`UdpSecurity::seal`]: the outcome, and a handshake
/// datagram to send to the same address first, when one is due.
#[derive(Debug)]
pub struct Sealing {
    /// What happened to the datagram.
    pub outcome: Outcome,
    /// A SHAKE1 to send too.
    pub shake: Option<Vec<u8>>,
}

/// What [`UdpSecurity::open`] made of a datagram.
#[derive(Debug)]
pub enum Opened {
    /// A sealed datagram, opened: its inner bytes are `out[..len]`.
    Data {
        /// Inner length.
        len: usize,
        /// The participant of the session.
        peer: ParticipantId,
        /// Its proven identity.
        identity: Arc<PeerIdentity>,
    },
    /// A plain datagram a `permissive` runtime may take as it is.
    Plain,
    /// A handshake datagram to send back to the source.
    Reply(Vec<u8>),
    /// Consumed (a handshake completed, or nothing to do).
    Done,
    /// Dropped and counted: why.
    Dropped(&'static str),
}

/// What protected UDP counted (cumulative).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct UdpSecurityStats {
    /// Handshakes completed (either side).
    pub sessions: u64,
    /// Handshakes started as initiator (new sessions and rekeys).
    pub shakes_started: u64,
    /// SHAKE1/SHAKE2 refused: unknown or unproven initiator, wrong key,
    /// failed Noise message, over the rate cap.
    pub shake_refused: u64,
    /// SHAKE1s older than the newest from that initiator.
    pub shake_replayed: u64,
    /// Sealed datagrams that failed authentication (tampered, wrong key).
    pub aead_failed: u64,
    /// Sealed datagrams seen before or below the replay window.
    pub replayed: u64,
    /// Plain datagrams dropped under `enforce`.
    pub plaintext_refused: u64,
    /// Sealed datagrams for no known session (old or forged index).
    pub unknown_session: u64,
}

#[derive(Default)]
struct Counters {
    sessions: AtomicU64,
    shakes_started: AtomicU64,
    shake_refused: AtomicU64,
    shake_replayed: AtomicU64,
    aead_failed: AtomicU64,
    replayed: AtomicU64,
    plaintext_refused: AtomicU64,
    unknown_session: AtomicU64,
}

fn count(c: &AtomicU64) {
    c.fetch_add(1, Relaxed);
}

/// One session: keys for both directions between this runtime and one
/// remote runtime at one address.
struct Session {
    peer: ParticipantId,
    identity: Arc<PeerIdentity>,
    addr: SocketAddr,
    /// Ours: the peer seals to us under it.
    local_index: u32,
    /// Theirs: we seal to the peer under it.
    remote_index: u32,
    initiator: bool,
    created: Instant,
    keys: StatelessTransportState,
    /// Next counter to seal with.
    sent: AtomicU64,
    /// The peer sealed under it at least once (a responder sends only then).
    confirmed: std::sync::atomic::AtomicBool,
    window: parking_lot::Mutex<Window>,
}

/// A handshake this runtime started.
struct Pending {
    hs: HandshakeState,
    peer: ParticipantId,
    addr: SocketAddr,
    started: Instant,
    last_sent: Instant,
    datagram: Vec<u8>,
}

/// The last SHAKE1 accepted from an initiator, and the answer (repeated if
/// its SHAKE2 was lost and the same SHAKE1 comes again).
struct Answered {
    at: Instant,
    seq: u64,
    from: SocketAddr,
    shake1: Vec<u8>,
    reply: Vec<u8>,
}

#[derive(Default)]
struct State {
    /// By our index.
    sessions: HashMap<u32, Arc<Session>>,
    /// The sessions with each runtime at each address, oldest first: a
    /// session serves only the participant it was made with, so another
    /// identity handshaking from (or spoofing) the same address can neither
    /// read nor displace it.
    by_peer: HashMap<(SocketAddr, ParticipantId), Vec<Arc<Session>>>,
    /// By our index.
    pending: HashMap<u32, Pending>,
    /// Per initiator participant.
    answered: HashMap<ParticipantId, Answered>,
    /// Peers discovery stopped vouching for (silent past their lease), and
    /// since when.
    missing: HashMap<ParticipantId, Instant>,
    /// Token bucket for SHAKE1s: tokens, last refill.
    bucket: (f64, Option<Instant>),
    /// The same, per source address.
    sources: HashMap<std::net::IpAddr, (f64, Option<Instant>)>,
}

/// Protected UDP for one runtime: its static key and its sessions.
pub struct UdpSecurity {
    local: ParticipantId,
    domain: u16,
    enforce: bool,
    private: Vec<u8>,
    public: [u8; KEY_LEN],
    lookup: Lookup,
    tuning: Tuning,
    next_seq: AtomicU64,
    state: RwLock<State>,
    counters: Counters,
    housekept: parking_lot::Mutex<Option<Instant>>,
}

impl std::fmt::Debug for UdpSecurity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("UdpSecurity")
            .field("local", &self.local)
            .field("enforce", &self.enforce)
            .finish()
    }
}

/// Why protected UDP could not start.
#[derive(Debug, thiserror::Error)]
#[error("protected UDP: {0}")]
pub struct UdpSecurityError(String);

fn params() -> snow::params::NoiseParams {
    NOISE.parse().expect("a valid Noise pattern name")
}

impl UdpSecurity {
    /// Protected UDP for runtime `local` in `domain`; `lookup` tells what
    /// discovery proved about a participant. `enforce`: plain datagrams are
    /// dropped and nothing is sent plain.
    pub fn new(
        local: ParticipantId,
        domain: u16,
        enforce: bool,
        lookup: Lookup,
        tuning: Tuning,
    ) -> Result<Self, UdpSecurityError> {
        let kp = snow::Builder::new(params())
            .generate_keypair()
            .map_err(|e| UdpSecurityError(format!("no X25519 key pair: {e}")))?;
        let public: [u8; KEY_LEN] = kp
            .public
            .as_slice()
            .try_into()
            .map_err(|_| UdpSecurityError("X25519 public key of the wrong size".into()))?;
        Ok(UdpSecurity {
            local,
            domain,
            enforce,
            private: kp.private,
            public,
            lookup,
            tuning,
            next_seq: AtomicU64::new(1),
            state: RwLock::new(State::default()),
            counters: Counters::default(),
            housekept: Default::default(),
        })
    }

    /// This runtime's X25519 static public key (announced in its locator).
    pub fn public_key(&self) -> [u8; KEY_LEN] {
        self.public
    }

    /// Whether plain peers are refused.
    pub fn enforcing(&self) -> bool {
        self.enforce
    }

    /// Whether datagrams to `participant` are (or will be) sealed:
    /// discovery proved it with a UDP key, or a session with it exists.
    pub fn protects(&self, participant: ParticipantId) -> bool {
        (self.lookup)(participant).is_some()
            || self
                .state
                .read()
                .by_peer
                .keys()
                .any(|(_, p)| *p == participant)
    }

    /// Sessions held now (every address, both roles).
    pub fn live_sessions(&self) -> usize {
        self.state.read().sessions.len()
    }

    /// Counters so far.
    pub fn stats(&self) -> UdpSecurityStats {
        let c = &self.counters;
        UdpSecurityStats {
            sessions: c.sessions.load(Relaxed),
            shakes_started: c.shakes_started.load(Relaxed),
            shake_refused: c.shake_refused.load(Relaxed),
            shake_replayed: c.shake_replayed.load(Relaxed),
            aead_failed: c.aead_failed.load(Relaxed),
            replayed: c.replayed.load(Relaxed),
            plaintext_refused: c.plaintext_refused.load(Relaxed),
            unknown_session: c.unknown_session.load(Relaxed),
        }
    }

    fn prologue(&self, initiator: ParticipantId, responder: ParticipantId) -> Vec<u8> {
        let mut p = PROLOGUE.to_vec();
        p.extend_from_slice(&self.domain.to_le_bytes());
        p.extend_from_slice(&initiator.0.to_le_bytes());
        p.extend_from_slice(&responder.0.to_le_bytes());
        p
    }

    /// Seals `inner` for runtime `peer` at `to` into `out`, under a session
    /// made with that very participant. Sends nothing itself: the caller
    /// sends `out` (or `inner` when [`Outcome::Plain`]) and any SHAKE1.
    /// A peer discovery proved with a UDP key is never sent anything plain.
    pub fn seal(
        &self,
        now: Instant,
        to: SocketAddr,
        peer: ParticipantId,
        inner: &[u8],
        out: &mut Vec<u8>,
    ) -> Sealing {
        let (session, unconfirmed) = {
            let st = self.state.read();
            let list = st.by_peer.get(&(to, peer));
            (list.and_then(|v| pick(v)).cloned(), list.is_some())
        };
        let Some(s) = session else {
            if unconfirmed
                && !self
                    .state
                    .read()
                    .pending
                    .values()
                    .any(|p| p.addr == to && p.peer == peer)
            {
                // Answered its handshake; its first datagram under the
                // session confirms it.
                return Sealing {
                    outcome: Outcome::Held,
                    shake: None,
                };
            }
            if (self.lookup)(peer).is_some() {
                return Sealing {
                    outcome: Outcome::Held,
                    shake: self.start(now, to, peer),
                };
            }
            return Sealing {
                outcome: if self.enforce {
                    Outcome::Refused
                } else {
                    Outcome::Plain
                },
                shake: None,
            };
        };
        let counter = s.sent.fetch_add(1, Relaxed);
        let age = now.saturating_duration_since(s.created);
        // The side that started the session renews it by time; either side
        // once it is well overdue (its initiator may be gone quiet) or has
        // sealed many datagrams (a busy responder: replies).
        let renew = (age >= self.tuning.rekey_after && s.initiator)
            || age >= self.tuning.rekey_after * 3 / 2
            || counter >= self.tuning.rekey_datagrams;
        let shake = renew.then(|| self.start(now, to, s.peer)).flatten();
        if counter >= self.tuning.max_datagrams {
            return Sealing {
                outcome: Outcome::Held,
                shake,
            };
        }
        out.clear();
        out.extend_from_slice(&wire::sealed_header(s.remote_index, false, counter));
        out.resize(wire::SEALED_HEADER + inner.len() + wire::TAG, 0);
        match s
            .keys
            .write_message(counter, inner, &mut out[wire::SEALED_HEADER..])
        {
            Ok(n) => {
                out.truncate(wire::SEALED_HEADER + n);
                Sealing {
                    outcome: Outcome::Sealed,
                    shake,
                }
            }
            Err(_) => Sealing {
                outcome: Outcome::Held,
                shake,
            },
        }
    }

    /// Starts (or repeats, when due) a handshake with `peer` at `to`.
    fn start(&self, now: Instant, to: SocketAddr, peer: ParticipantId) -> Option<Vec<u8>> {
        let mut st = self.state.write();
        let t = self.tuning;
        st.pending
            .retain(|_, p| now.saturating_duration_since(p.started) < t.shake_give_up);
        if let Some(p) = st
            .pending
            .values_mut()
            .find(|p| p.addr == to && p.peer == peer)
        {
            if now.saturating_duration_since(p.last_sent) < t.shake_repeat {
                return None;
            }
            p.last_sent = now;
            return Some(p.datagram.clone());
        }
        let proven = (self.lookup)(peer)?;
        let prologue = self.prologue(self.local, peer);
        let mut hs = snow::Builder::new(params())
            .local_private_key(&self.private)
            .and_then(|b| b.remote_public_key(&proven.key))
            .and_then(|b| b.prologue(&prologue))
            .and_then(|b| b.build_initiator())
            .ok()?;
        let seq = self.next_seq.fetch_add(1, Relaxed);
        let mut msg = [0u8; wire::MAX_NOISE];
        let n = hs.write_message(&seq.to_le_bytes(), &mut msg).ok()?;
        let index = fresh_index(&st);
        let datagram = wire::shake1(index, self.local, peer, &msg[..n]);
        count(&self.counters.shakes_started);
        st.pending.insert(
            index,
            Pending {
                hs,
                peer,
                addr: to,
                started: now,
                last_sent: now,
                datagram: datagram.clone(),
            },
        );
        Some(datagram)
    }

    /// Opens a datagram from `from`. Sealed data lands in `out`.
    pub fn open(&self, now: Instant, from: SocketAddr, bytes: &[u8], out: &mut Vec<u8>) -> Opened {
        if !wire::is_protected(bytes) {
            if self.enforce {
                count(&self.counters.plaintext_refused);
                return Opened::Dropped("plain datagram under enforce");
            }
            // A peer we hold (or are making) a session with speaks sealed:
            // a plain datagram claiming its address is refused.
            let st = self.state.read();
            if st.by_peer.keys().any(|(a, _)| *a == from)
                || st.pending.values().any(|p| p.addr == from)
            {
                count(&self.counters.plaintext_refused);
                return Opened::Dropped("plain datagram from a protected peer");
            }
            return Opened::Plain;
        }
        match SealView::parse(bytes) {
            Err(_) => {
                count(&self.counters.shake_refused);
                Opened::Dropped("malformed protected datagram")
            }
            Ok(SealView::Sealed {
                receiver_index,
                counter,
                sealed,
                ..
            }) => self.open_sealed(from, receiver_index, counter, sealed, out),
            Ok(SealView::Shake1 {
                sender_index,
                initiator,
                responder,
                noise,
            }) => self.on_shake1(now, from, bytes, sender_index, initiator, responder, noise),
            Ok(SealView::Shake2 {
                sender_index,
                receiver_index,
                noise,
            }) => self.on_shake2(now, from, sender_index, receiver_index, noise),
        }
    }

    fn open_sealed(
        &self,
        from: SocketAddr,
        index: u32,
        counter: u64,
        sealed: &[u8],
        out: &mut Vec<u8>,
    ) -> Opened {
        let Some(s) = self.state.read().sessions.get(&index).cloned() else {
            count(&self.counters.unknown_session);
            return Opened::Dropped("no such session");
        };
        if s.addr != from {
            count(&self.counters.unknown_session);
            return Opened::Dropped("session of another address");
        }
        if !s.window.lock().fresh(counter) {
            count(&self.counters.replayed);
            return Opened::Dropped("replayed");
        }
        out.resize(sealed.len(), 0);
        let Ok(n) = s.keys.read_message(counter, sealed, out) else {
            count(&self.counters.aead_failed);
            return Opened::Dropped("authentication failed");
        };
        // Only an authentic datagram moves the window (a forged one must
        // not shift genuine ones out of it).
        if !s.window.lock().mark(counter) {
            count(&self.counters.replayed);
            return Opened::Dropped("replayed");
        }
        s.confirmed.store(true, Relaxed);
        Opened::Data {
            len: n,
            peer: s.peer,
            identity: s.identity.clone(),
        }
    }

    fn refuse(&self, why: &'static str) -> Opened {
        count(&self.counters.shake_refused);
        Opened::Dropped(why)
    }

    #[allow(clippy::too_many_arguments)]
    fn on_shake1(
        &self,
        now: Instant,
        from: SocketAddr,
        datagram: &[u8],
        sender_index: u32,
        initiator: ParticipantId,
        responder: ParticipantId,
        noise: &[u8],
    ) -> Opened {
        if responder != self.local {
            return self.refuse("SHAKE1 for another runtime");
        }
        if let Some(a) = self.state.read().answered.get(&initiator) {
            // The same SHAKE1 again from the same address (our SHAKE2 was
            // lost): the same answer, without new work.
            if a.from == from && a.shake1 == datagram {
                return Opened::Reply(a.reply.clone());
            }
        }
        // Only a participant signed discovery proved (no crypto, no budget
        // spent on the others), within its source's and the global budget.
        let Some(proven) = (self.lookup)(initiator) else {
            return self.refuse("SHAKE1 from an unproven participant");
        };
        if !self.spend_shake(now, from.ip()) {
            return self.refuse("SHAKE1 over the rate cap");
        }
        let prologue = self.prologue(initiator, self.local);
        let Ok(mut hs) = snow::Builder::new(params())
            .local_private_key(&self.private)
            .and_then(|b| b.prologue(&prologue))
            .and_then(|b| b.build_responder())
        else {
            return self.refuse("no responder state");
        };
        let mut payload = [0u8; wire::MAX_NOISE];
        let Ok(n) = hs.read_message(noise, &mut payload) else {
            return self.refuse("SHAKE1 failed authentication");
        };
        if hs.get_remote_static() != Some(&proven.key[..]) {
            return self.refuse("SHAKE1 static key is not the one its participant announced");
        }
        let Ok(seq_bytes) = <[u8; 8]>::try_from(&payload[..n]) else {
            return self.refuse("SHAKE1 payload of the wrong size");
        };
        let seq = u64::from_le_bytes(seq_bytes);
        if self
            .state
            .read()
            .answered
            .get(&initiator)
            .is_some_and(|a| seq <= a.seq)
        {
            count(&self.counters.shake_replayed);
            return Opened::Dropped("replayed SHAKE1");
        }
        let mut msg = [0u8; wire::MAX_NOISE];
        let Ok(m) = hs.write_message(&[], &mut msg) else {
            return self.refuse("no SHAKE2");
        };
        let Ok(keys) = hs.into_stateless_transport_mode() else {
            return self.refuse("no session keys");
        };
        let mut st = self.state.write();
        let index = fresh_index(&st);
        let reply = wire::shake2(index, sender_index, &msg[..m]);
        st.answered.insert(
            initiator,
            Answered {
                at: now,
                seq,
                from,
                shake1: datagram.to_vec(),
                reply: reply.clone(),
            },
        );
        self.install(
            &mut st,
            Session {
                peer: initiator,
                identity: proven.identity,
                addr: from,
                local_index: index,
                remote_index: sender_index,
                initiator: false,
                created: now,
                keys,
                sent: AtomicU64::new(0),
                confirmed: false.into(),
                window: Default::default(),
            },
        );
        Opened::Reply(reply)
    }

    fn on_shake2(
        &self,
        now: Instant,
        from: SocketAddr,
        sender_index: u32,
        receiver_index: u32,
        noise: &[u8],
    ) -> Opened {
        let mut st = self.state.write();
        let Some(mut p) = st.pending.remove(&receiver_index) else {
            drop(st);
            return self.refuse("SHAKE2 for no handshake of ours");
        };
        if p.addr != from {
            st.pending.insert(receiver_index, p);
            drop(st);
            return self.refuse("SHAKE2 from another address");
        }
        let mut payload = [0u8; wire::MAX_NOISE];
        if p.hs.read_message(noise, &mut payload).is_err() {
            // A forged SHAKE2 (the index is in clear) must not cancel the
            // real one on its way: snow leaves the state as it was.
            st.pending.insert(receiver_index, p);
            drop(st);
            return self.refuse("SHAKE2 failed authentication");
        }
        let Some(proven) = (self.lookup)(p.peer) else {
            drop(st);
            return self.refuse("SHAKE2 from a participant no longer proven");
        };
        let Ok(keys) = p.hs.into_stateless_transport_mode() else {
            drop(st);
            return self.refuse("no session keys");
        };
        self.install(
            &mut st,
            Session {
                peer: p.peer,
                identity: proven.identity,
                addr: from,
                local_index: receiver_index,
                remote_index: sender_index,
                initiator: true,
                created: now,
                keys,
                sent: AtomicU64::new(0),
                confirmed: true.into(),
                window: Default::default(),
            },
        );
        Opened::Done
    }

    fn install(&self, st: &mut State, s: Session) {
        count(&self.counters.sessions);
        let s = Arc::new(s);
        st.sessions.insert(s.local_index, s.clone());
        let (peer, addr) = (s.peer, s.addr);
        let list = st.by_peer.entry((addr, peer)).or_default();
        let mut dropped: Vec<Arc<Session>> = Vec::new();
        if !s.initiator {
            // One unconfirmed answer per peer and address: replayed or
            // repeated SHAKE1s cannot pile up answers.
            list.retain(|o| {
                let keep = o.initiator || o.confirmed.load(Relaxed);
                if !keep {
                    dropped.push(o.clone());
                }
                keep
            });
        }
        list.push(s);
        while list.len() > SESSIONS_PER_PEER {
            // The oldest goes (a new answer is about to be used by its
            // initiator; answers cannot pile up, see above).
            dropped.push(list.remove(0));
        }
        // Too many addresses for one participant: the one it used least
        // recently (its newest session is the oldest) goes.
        let mut addrs: Vec<(Instant, SocketAddr)> = st
            .by_peer
            .iter()
            .filter(|((_, p), _)| *p == peer)
            .filter_map(|((a, _), v)| Some((v.last()?.created, *a)))
            .collect();
        if addrs.len() > ADDRESSES_PER_PARTICIPANT {
            addrs.sort();
            for (_, a) in &addrs[..addrs.len() - ADDRESSES_PER_PARTICIPANT] {
                dropped.extend(st.by_peer.remove(&(*a, peer)).unwrap_or_default());
            }
        }
        for d in dropped {
            st.sessions.remove(&d.local_index);
        }
    }

    /// A SHAKE1 from `ip` may cost its two X25519: a tenth of the global
    /// budget per source address (20/s by default), and the global one.
    fn spend_shake(&self, now: Instant, ip: std::net::IpAddr) -> bool {
        let mut st = self.state.write();
        let cap = f64::from(self.tuning.shakes_per_s);
        if st.sources.len() >= SOURCES && !st.sources.contains_key(&ip) {
            let oldest = st.sources.iter().min_by_key(|(_, b)| b.1).map(|(k, _)| *k);
            if let Some(k) = oldest {
                st.sources.remove(&k);
            }
        }
        let per_source = (cap / 10.0).max(1.0);
        let source = st.sources.entry(ip).or_insert((per_source, None));
        if !take(source, per_source, now) {
            return false;
        }
        take(&mut st.bucket, cap, now)
    }

    /// Housekeeping (about once a second): sessions and expectations of
    /// participants discovery no longer vouches for (gone, or another key)
    /// are dropped, and so are handshakes given up.
    pub fn handle_timeout(&self, now: Instant) {
        {
            let mut last = self.housekept.lock();
            if last.is_some_and(|l| now.saturating_duration_since(l) < Duration::from_secs(1)) {
                return;
            }
            *last = Some(now);
        }
        let mut st = self.state.write();
        let give_up = self.tuning.shake_give_up;
        st.pending
            .retain(|_, p| now.saturating_duration_since(p.started) < give_up);
        let lookup = &self.lookup;
        let forget_after = self.tuning.forget_after;
        let State {
            sessions,
            by_peer,
            answered,
            missing,
            ..
        } = &mut *st;
        // What discovery says of each peer we hold state for: the same key
        // (keep), another key (drop now: a new certificate, or another
        // runtime), or nothing — silent past its lease, as in an outage:
        // keep for `forget_after`, so the streams of a link that comes back
        // carry on under their sessions, as they do without security.
        let mut known: HashMap<ParticipantId, Option<KeyId>> = HashMap::new();
        let mut keep = |peer: ParticipantId, key: Option<KeyId>| {
            let proven = *known
                .entry(peer)
                .or_insert_with(|| lookup(peer).map(|p| p.identity.key_id()));
            match proven {
                Some(k) => {
                    missing.remove(&peer);
                    key.is_none_or(|mine| mine == k)
                }
                None => {
                    let since = *missing.entry(peer).or_insert(now);
                    now.saturating_duration_since(since) < forget_after
                }
            }
        };
        sessions.retain(|_, s| keep(s.peer, Some(s.identity.key_id())));
        by_peer.retain(|_, v| {
            v.retain(|s| sessions.contains_key(&s.local_index));
            !v.is_empty()
        });
        // The newest handshake counter of each initiator outlives its
        // sessions (a SHAKE1 recorded long ago stays refused); the map is
        // bounded, oldest answers first out.
        if answered.len() > ANSWERED {
            let mut by_age: Vec<(Instant, ParticipantId)> =
                answered.iter().map(|(p, a)| (a.at, *p)).collect();
            by_age.sort();
            for (_, p) in &by_age[..answered.len() - ANSWERED] {
                answered.remove(p);
            }
        }
        let live: std::collections::HashSet<ParticipantId> =
            sessions.values().map(|s| s.peer).collect();
        missing.retain(|p, _| live.contains(p));
    }
}

/// Initiators whose newest handshake counter is remembered.
const ANSWERED: usize = 4096;

/// Source addresses whose handshake budget is tracked (the least recently
/// seen goes first).
const SOURCES: usize = 1024;

/// Takes a token from `bucket` (tokens, last refill), refilled at `rate`
/// per second up to `rate`.
fn take(bucket: &mut (f64, Option<Instant>), rate: f64, now: Instant) -> bool {
    let (tokens, last) = *bucket;
    let refill = last.map_or(rate, |l| {
        now.saturating_duration_since(l).as_secs_f64() * rate
    });
    let tokens = (tokens + refill).min(rate);
    if tokens < 1.0 {
        *bucket = (tokens, Some(now));
        return false;
    }
    *bucket = (tokens - 1.0, Some(now));
    true
}

/// The session to seal with: the newest confirmed one.
fn pick(list: &[Arc<Session>]) -> Option<&Arc<Session>> {
    list.iter().rev().find(|s| s.confirmed.load(Relaxed))
}

fn fresh_index(st: &State) -> u32 {
    loop {
        let i = crate::random_u64() as u32;
        if i != 0 && !st.sessions.contains_key(&i) && !st.pending.contains_key(&i) {
            return i;
        }
    }
}

/// Blocks of the replay window.
const BLOCKS: usize = 64;
/// Counters this far below the highest seen are refused (WireGuard's
/// construction: a ring of 64-bit blocks, one kept free).
const WINDOW: u64 = ((BLOCKS - 1) * 64) as u64;

/// Which counters were opened, near the highest.
#[derive(Debug)]
struct Window {
    top: Option<u64>,
    bits: [u64; BLOCKS],
}

impl Default for Window {
    fn default() -> Self {
        Window {
            top: None,
            bits: [0; BLOCKS],
        }
    }
}

impl Window {
    /// Whether `c` is neither seen nor below the window.
    fn fresh(&self, c: u64) -> bool {
        match self.top {
            None => true,
            Some(top) if c > top => true,
            Some(top) if top - c >= WINDOW => false,
            Some(_) => self.bits[block(c)] & bit(c) == 0,
        }
    }

    /// Marks `c` seen; false if it was (or is below the window).
    fn mark(&mut self, c: u64) -> bool {
        if !self.fresh(c) {
            return false;
        }
        match self.top {
            Some(top) if c <= top => {}
            Some(top) => {
                let steps = (c / 64 - top / 64).min(BLOCKS as u64);
                for i in 1..=steps {
                    self.bits[block((top / 64 + i) * 64)] = 0;
                }
                self.top = Some(c);
            }
            None => {
                self.bits = [0; BLOCKS];
                self.top = Some(c);
            }
        }
        self.bits[block(c)] |= bit(c);
        true
    }
}

fn block(c: u64) -> usize {
    ((c / 64) % BLOCKS as u64) as usize
}

fn bit(c: u64) -> u64 {
    1 << (c % 64)
}

#[cfg(test)]
mod tests {
    use super::Window;

    #[test]
    fn the_window_takes_each_counter_once_and_refuses_far_below() {
        let mut w = Window::default();
        assert!(w.mark(5));
        assert!(!w.mark(5) && !w.fresh(5));
        assert!(w.mark(3), "reordered, within the window");
        assert!(w.mark(10_000));
        assert!(!w.fresh(5), "far below the top now");
        assert!(w.mark(10_000 - 4000) && !w.mark(10_000 - 4000));
        assert!(!w.fresh(10_000 - 4100));
        // Each counter of a long run exactly once, with reordering.
        let mut w = Window::default();
        for c in 0..100_000u64 {
            let c = if c % 7 == 3 {
                c + 2
            } else if c % 7 == 5 {
                c - 2
            } else {
                c
            };
            assert!(w.mark(c), "{c} refused");
            assert!(!w.mark(c), "{c} taken twice");
        }
        // A jump past the whole ring clears it.
        assert!(w.mark(1 << 40) && w.mark((1 << 40) - 1));
    }
}
