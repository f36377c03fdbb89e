//! rmw_zenoh's graph as a ferry runtime sees it: the liveliness tokens of
//! one domain, parsed (strictly, [`Token::parse`]) and kept, plus the
//! ferry runtimes among the Zenoh sessions (their `@ferry_lv` tokens, see
//! [`ferry_token`]). No I/O: the session's liveliness subscriber feeds it.
//!
//! What a peer declares is its word: a token names a node, an endpoint and
//! its QoS; a `@ferry_lv` token says which ferry participant a session
//! runs. That last claim decides who a publisher skips and whose samples a
//! reader drops as duplicates — which matters only for a participant that
//! ferry's own discovery also finds (a direct path needs one). So a claim
//! to be a participant discovery knows is believed only when that
//! participant announced the same Zenoh id ([`Graph::discovered`]); a
//! claim to be one it does not know is only a name (shown, harmless).
//! The graph is bounded ([`MAX_TOKENS`]) whatever peers declare.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use ferry_wire::{EndpointId, ParticipantId};

use crate::token::{gid_of, EntityKind, Token, TokenError};

/// The key expression prefix of ferry's own liveliness tokens (one per
/// runtime: which ferry participant a Zenoh session runs). rmw_zenoh reads
/// only `@ros2_lv`, so it never sees them.
pub const FERRY_SPACE: &str = "@ferry_lv";

/// Most tokens one graph keeps (endpoints, nodes and ferry runtimes
/// together); further ones are refused until others leave.
pub const MAX_TOKENS: usize = 65_536;

/// The longest token taken (rmw_zenoh's are a few hundred bytes).
pub const MAX_TOKEN_BYTES: usize = 1024;

/// The token that says session `zid` runs ferry participant `runtime`.
pub fn ferry_token(domain: u32, zid: &str, runtime: ParticipantId) -> String {
    format!("{FERRY_SPACE}/{domain}/{zid}/{:016x}", runtime.0)
}

/// Why a token was not taken into the graph.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum GraphError {
    /// Not a token of rmw_zenoh's form.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// A `@ferry_lv` token that is not `@ferry_lv/<domain>/<zid>/<16 hex>`.
    #[error("not a ferry runtime's token: `{0}`")]
    Ferry(String),
    /// Another domain's token.
    #[error("a token of domain {0}")]
    Domain(u32),
    /// [`MAX_TOKENS`] reached.
    #[error("the graph holds {MAX_TOKENS} tokens already")]
    Full,
    /// Longer than [`MAX_TOKEN_BYTES`].
    #[error("a token of {0} bytes (at most {MAX_TOKEN_BYTES})")]
    TooLong(usize),
}

/// A publisher known by its GID: its token, and the ferry endpoint it is
/// when its session is a ferry runtime's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publisher {
    /// Its token.
    pub token: Token,
    /// The ferry endpoint (runtime, entity id) when a ferry runtime
    /// declared it (its word).
    pub ferry: Option<EndpointId>,
}

/// The tokens of one domain, but those of this runtime's own session.
#[derive(Debug)]
pub struct Graph {
    domain: u32,
    own_zid: String,
    /// Key expression → token (nodes and endpoints).
    tokens: HashMap<String, Token>,
    /// GID → key expression, for publishers, services and clients (what
    /// attachments name).
    by_gid: HashMap<[u8; 16], String>,
    /// zid → ferry participant, from `@ferry_lv` tokens; None when two
    /// tokens claim different participants for one session (neither is
    /// believed while both stand).
    ferry: HashMap<String, Vec<(String, ParticipantId)>>,
    /// `@ferry_lv` tokens held.
    ferry_claims: usize,
    /// The participants ferry's discovery knows, each with the Zenoh id
    /// it announced (None: none): [`Graph::discovered`].
    discovered: HashMap<ParticipantId, Option<String>>,
    /// Bumped on every change; shared, so the hot paths read it without
    /// the graph's lock ([`Graph::changes`]).
    generation: Arc<AtomicU64>,
}

impl Graph {
    /// An empty graph of `domain` for the session `own_zid` (whose tokens
    /// it leaves out, as rmw_zenoh does).
    pub fn new(domain: u32, own_zid: &str) -> Self {
        Graph {
            domain,
            own_zid: own_zid.to_string(),
            tokens: HashMap::new(),
            by_gid: HashMap::new(),
            ferry: HashMap::new(),
            ferry_claims: 0,
            discovered: HashMap::new(),
            generation: Arc::new(AtomicU64::new(0)),
        }
    }

    /// A number that changes whenever the graph does.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// The generation counter itself: [`Graph::generation`] without the
    /// graph's lock (what a publisher checks on every sample).
    pub fn changes(&self) -> Arc<AtomicU64> {
        self.generation.clone()
    }

    fn changed(&mut self) {
        self.generation.fetch_add(1, Ordering::AcqRel);
    }

    fn len(&self) -> usize {
        self.tokens.len() + self.ferry_claims
    }

    /// A token appeared. `Ok(false)`: this session's own, left out.
    pub fn put(&mut self, key: &str) -> Result<bool, GraphError> {
        if key.len() > MAX_TOKEN_BYTES {
            return Err(GraphError::TooLong(key.len()));
        }
        if let Some(rest) = key
            .strip_prefix(FERRY_SPACE)
            .and_then(|r| r.strip_prefix('/'))
        {
            return self.put_ferry(key, rest);
        }
        if self.tokens.contains_key(key) {
            return Ok(true);
        }
        let t = Token::parse(key)?;
        if t.domain != self.domain {
            return Err(GraphError::Domain(t.domain));
        }
        if t.zid == self.own_zid {
            return Ok(false);
        }
        if self.len() >= MAX_TOKENS {
            return Err(GraphError::Full);
        }
        if t.kind != EntityKind::Node && t.kind != EntityKind::Subscription {
            self.by_gid.insert(gid_of(key), key.to_string());
        }
        self.tokens.insert(key.to_string(), t);
        self.changed();
        Ok(true)
    }

    fn put_ferry(&mut self, key: &str, rest: &str) -> Result<bool, GraphError> {
        let bad = || GraphError::Ferry(key.to_string());
        let parts: Vec<&str> = rest.split('/').collect();
        let [domain, zid, participant] = parts.as_slice() else {
            return Err(bad());
        };
        if !domain.bytes().all(|b| b.is_ascii_digit()) || domain.is_empty() {
            return Err(bad());
        }
        let d: u32 = domain.parse().map_err(|_| bad())?;
        if d != self.domain {
            return Err(GraphError::Domain(d));
        }
        if zid.is_empty() || !zid.bytes().all(|b| b.is_ascii_hexdigit()) || participant.len() != 16
        {
            return Err(bad());
        }
        let p = u64::from_str_radix(participant, 16).map_err(|_| bad())?;
        if *zid == self.own_zid {
            return Ok(false);
        }
        if let Some(claims) = self.ferry.get(*zid) {
            if claims.iter().any(|(k, _)| k == key) {
                return Ok(true);
            }
            if claims.len() >= 4 {
                return Err(GraphError::Full);
            }
        }
        if self.len() >= MAX_TOKENS {
            return Err(GraphError::Full);
        }
        self.ferry
            .entry(zid.to_string())
            .or_default()
            .push((key.to_string(), ParticipantId(p)));
        self.ferry_claims += 1;
        self.changed();
        Ok(true)
    }

    /// A token went (its session closed or undeclared it).
    pub fn delete(&mut self, key: &str) {
        if key.starts_with(FERRY_SPACE) {
            let before = self.ferry_claims;
            self.ferry.retain(|_, claims| {
                claims.retain(|(k, _)| k != key);
                !claims.is_empty()
            });
            self.ferry_claims = self.ferry.values().map(Vec::len).sum();
            if self.ferry_claims != before {
                self.changed();
            }
            return;
        }
        if self.tokens.remove(key).is_some() {
            self.by_gid.remove(&gid_of(key));
            self.changed();
        }
    }

    /// The ferry participant session `zid` runs, as its `@ferry_lv`
    /// tokens claim — None while tokens claim different participants for
    /// it, and None when ferry's discovery knows that participant with
    /// another Zenoh id or none (a false claim).
    pub fn ferry_runtime(&self, zid: &str) -> Option<ParticipantId> {
        let claims = self.ferry.get(zid)?;
        let p = claims.first()?.1;
        let consistent = claims.iter().all(|(_, q)| *q == p);
        let vouched = match self.discovered.get(&p) {
            // Unknown to discovery (while its table is not full): no
            // direct path from or to it, so the claim is only a name.
            None => self.discovered.len() < MAX_TOKENS,
            Some(announced) => announced.as_deref() == Some(zid),
        };
        (consistent && vouched).then_some(p)
    }

    /// Ferry's discovery knows participant `p`, which announced Zenoh
    /// session `zid` (the locator `zenoh/<zid>`; None: no Zenoh session).
    /// From now on only that session's claim to be `p` is believed.
    /// Bounded: past [`MAX_TOKENS`] participants a new one is not recorded,
    /// and — as a safe default — no claim to be it is believed until some
    /// leave (see [`Graph::ferry_runtime`]; the table is then full).
    pub fn discovered(&mut self, p: ParticipantId, zid: Option<&str>) {
        if self.discovered.get(&p).is_some_and(|a| a.as_deref() == zid) {
            return;
        }
        if !self.discovered.contains_key(&p) && self.discovered.len() >= MAX_TOKENS {
            return;
        }
        self.discovered.insert(p, zid.map(str::to_string));
        self.changed();
    }

    /// Participant `p` left ferry's discovery: a claim to be it is a name
    /// again.
    pub fn left(&mut self, p: ParticipantId) {
        if self.discovered.remove(&p).is_some() {
            self.changed();
        }
    }

    /// The publisher, service or client whose GID is `gid`.
    pub fn by_gid(&self, gid: &[u8; 16]) -> Option<Publisher> {
        let token = self.tokens.get(self.by_gid.get(gid)?)?.clone();
        let ferry = self.ferry_runtime(&token.zid).and_then(|p| {
            Some(EndpointId {
                participant: p,
                entity: token.id.parse().ok()?,
            })
        });
        Some(Publisher { token, ferry })
    }

    /// Every node and endpoint token, sorted by key expression.
    pub fn tokens(&self) -> Vec<Token> {
        let mut v: Vec<(&String, &Token)> = self.tokens.iter().collect();
        v.sort_by(|a, b| a.0.cmp(b.0));
        v.into_iter().map(|(_, t)| t.clone()).collect()
    }

    /// The endpoints of `kind` on `topic` (name, RMW type name) — the
    /// subscriptions a publisher serves, the services a client calls: each
    /// a ROS 2 node's (None) or the ferry endpoint it is (runtime, entity
    /// id). Those ferry's own paths reach need nothing over Zenoh.
    pub fn endpoints(
        &self,
        kind: EntityKind,
        topic: &str,
        type_name: &str,
    ) -> Vec<Option<EndpointId>> {
        self.tokens
            .values()
            .filter(|t| {
                t.kind == kind
                    && t.topic
                        .as_ref()
                        .is_some_and(|i| i.name == topic && i.type_name == type_name)
            })
            .map(|t| {
                let p = self.ferry_runtime(&t.zid)?;
                Some(EndpointId {
                    participant: p,
                    entity: t.id.parse().ok()?,
                })
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::token::TopicInfo;
    use crate::RmwQos;

    const OWN: &str = "0123456789abcdef0123456789abcdef";
    const THEIRS: &str = "aac3178e146ba6f1fc6e6a4085e77f21";

    fn endpoint(zid: &str, kind: EntityKind, id: u32) -> Token {
        Token {
            domain: 3,
            zid: zid.into(),
            nid: "1".into(),
            id: id.to_string(),
            kind,
            enclave: "/".into(),
            namespace: "/".into(),
            node: "talker".into(),
            topic: Some(TopicInfo {
                name: "/chatter".into(),
                type_name: "std_msgs::msg::dds_::String_".into(),
                type_hash: "RIHS01_00".into(),
                qos: RmwQos::default(),
            }),
        }
    }

    #[test]
    fn keeps_others_tokens_and_finds_publishers_by_gid() {
        let mut g = Graph::new(3, OWN);
        let own = endpoint(OWN, EntityKind::Publisher, 4);
        assert_eq!(g.put(&own.key_expr()), Ok(false));
        let p = endpoint(THEIRS, EntityKind::Publisher, 7);
        assert_eq!(g.put(&p.key_expr()), Ok(true));
        let found = g.by_gid(&p.gid()).unwrap();
        assert_eq!(found.token, p);
        assert_eq!(found.ferry, None);
        // The session says it is ferry runtime 0xab (which ferry's
        // discovery does not know: a name): its publisher is ferry
        // endpoint (0xab, 7).
        let ft = ferry_token(3, THEIRS, ParticipantId(0xab));
        assert_eq!(g.put(&ft), Ok(true));
        assert_eq!(
            g.by_gid(&p.gid()).unwrap().ferry,
            Some(EndpointId {
                participant: ParticipantId(0xab),
                entity: 7
            })
        );
        // A second, different claim for the same session voids both while
        // it stands.
        let other = ferry_token(3, THEIRS, ParticipantId(0xcd));
        assert_eq!(g.put(&other), Ok(true));
        assert_eq!(g.ferry_runtime(THEIRS), None);
        g.delete(&other);
        assert_eq!(g.ferry_runtime(THEIRS), Some(ParticipantId(0xab)));
        // Discovery finds 0xab with another Zenoh session, or none: the
        // claim is false and no longer believed.
        let before = g.generation();
        g.discovered(ParticipantId(0xab), Some(OWN));
        assert!(g.generation() > before, "discovery changes the graph");
        assert_eq!(g.ferry_runtime(THEIRS), None);
        g.discovered(ParticipantId(0xab), None);
        assert_eq!(g.ferry_runtime(THEIRS), None);
        // With this very session: believed.
        g.discovered(ParticipantId(0xab), Some(THEIRS));
        assert_eq!(g.ferry_runtime(THEIRS), Some(ParticipantId(0xab)));
        // Gone from discovery: a name again.
        g.discovered(ParticipantId(0xab), None);
        g.left(ParticipantId(0xab));
        assert_eq!(g.ferry_runtime(THEIRS), Some(ParticipantId(0xab)));
        g.delete(&ft);
        assert_eq!(g.ferry_runtime(THEIRS), None);
        g.delete(&p.key_expr());
        assert!(g.by_gid(&p.gid()).is_none() && g.tokens().is_empty());
    }

    #[test]
    fn refuses_what_is_not_a_token_of_this_domain() {
        let mut g = Graph::new(3, OWN);
        let mut p = endpoint(THEIRS, EntityKind::Publisher, 7);
        p.domain = 4;
        assert_eq!(g.put(&p.key_expr()), Err(GraphError::Domain(4)));
        assert!(matches!(g.put("@ros2_lv/3/x"), Err(GraphError::Token(_))));
        for bad in [
            "@ferry_lv/3/zz/00000000000000ab",
            "@ferry_lv/3/ab/ab",
            "@ferry_lv/3/ab/00000000000000ab/x",
            "@ferry_lv/+3/ab/00000000000000ab",
            "@ferry_lv//ab/00000000000000ab",
            "@ferry_lvX/3/ab/00000000000000ab",
        ] {
            assert!(g.put(bad).is_err(), "{bad}");
            assert_eq!(g.ferry_runtime("ab"), None, "{bad}");
        }
        assert!(g.tokens().is_empty());
        let long = format!("@ros2_lv/3/{}", "a".repeat(MAX_TOKEN_BYTES));
        assert!(matches!(g.put(&long), Err(GraphError::TooLong(_))));
    }

    #[test]
    fn subscriptions_are_ros2_nodes_or_the_ferry_readers_they_are() {
        let mut g = Graph::new(3, OWN);
        let s = endpoint(THEIRS, EntityKind::Subscription, 2);
        g.put(&s.key_expr()).unwrap();
        let t = "std_msgs::msg::dds_::String_";
        assert_eq!(
            g.endpoints(EntityKind::Subscription, "/chatter", t),
            vec![None]
        );
        assert!(g
            .endpoints(EntityKind::Subscription, "/other", t)
            .is_empty());
        assert!(g.endpoints(EntityKind::Service, "/chatter", t).is_empty());
        // Discovery knows participant 9 with another session: a claim to
        // be it is a ROS 2 node's word, counted as one.
        g.discovered(ParticipantId(9), Some(OWN));
        g.put(&ferry_token(3, THEIRS, ParticipantId(9))).unwrap();
        assert_eq!(
            g.endpoints(EntityKind::Subscription, "/chatter", t),
            vec![None]
        );
        g.discovered(ParticipantId(9), Some(THEIRS));
        assert_eq!(
            g.endpoints(EntityKind::Subscription, "/chatter", t),
            vec![Some(EndpointId {
                participant: ParticipantId(9),
                entity: 2
            })]
        );
    }

    #[test]
    fn stays_bounded() {
        let mut g = Graph::new(3, OWN);
        for i in 0..MAX_TOKENS as u32 {
            g.put(&endpoint(THEIRS, EntityKind::Subscription, i).key_expr())
                .unwrap();
        }
        let more = endpoint(THEIRS, EntityKind::Subscription, u32::MAX);
        assert_eq!(g.put(&more.key_expr()), Err(GraphError::Full));
        // Known ones are still fine.
        assert_eq!(
            g.put(&endpoint(THEIRS, EntityKind::Subscription, 0).key_expr()),
            Ok(true)
        );
    }
}
