//! rmw_zenoh's graph: one liveliness token per node and per endpoint,
//!
//! ```text
//! @ros2_lv/<domain>/<zid>/<nid>/<nid>/NN/<enclave>/<namespace>/<node>
//! @ros2_lv/<domain>/<zid>/<nid>/<id>/<MP|MS|SS|SC>/<enclave>/<namespace>/<node>/<name>/<type>/<hash>/<qos>
//! ```
//!
//! with every `/` of the enclave, namespace, node, name, type and hash
//! written as `%`. A token is network input: [`Token::parse`] refuses what
//! rmw_zenoh's `Entity::make` refuses (fewer chunks, an empty chunk,
//! another admin space, an unknown kind, a bad QoS chunk) and never panics.

use crate::qos::{QosError, RmwQos};
use crate::{demangle, mangle};

/// The key expression prefix of rmw_zenoh's liveliness tokens.
pub const ADMIN_SPACE: &str = "@ros2_lv";

/// What a token stands for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EntityKind {
    /// `NN`: a node.
    Node,
    /// `MP`: a publisher.
    Publisher,
    /// `MS`: a subscription.
    Subscription,
    /// `SS`: a service server.
    Service,
    /// `SC`: a service client.
    Client,
}

impl EntityKind {
    /// The token's chunk for this kind.
    pub fn as_str(self) -> &'static str {
        match self {
            EntityKind::Node => "NN",
            EntityKind::Publisher => "MP",
            EntityKind::Subscription => "MS",
            EntityKind::Service => "SS",
            EntityKind::Client => "SC",
        }
    }

    fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "NN" => EntityKind::Node,
            "MP" => EntityKind::Publisher,
            "MS" => EntityKind::Subscription,
            "SS" => EntityKind::Service,
            "SC" => EntityKind::Client,
            _ => return None,
        })
    }
}

/// An endpoint's topic or service, as its token carries it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TopicInfo {
    /// Fully qualified name (`/chatter`).
    pub name: String,
    /// RMW type name (`std_msgs::msg::dds_::String_`).
    pub type_name: String,
    /// Type hash as ROS 2 prints it (`RIHS01_…`).
    pub type_hash: String,
    /// QoS.
    pub qos: RmwQos,
}

/// One node or endpoint of rmw_zenoh's graph.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// ROS domain.
    pub domain: u32,
    /// The Zenoh session's id (lowercase hex).
    pub zid: String,
    /// The node's id within its session.
    pub nid: String,
    /// The entity's id within its session (a node's own: its nid).
    pub id: String,
    /// What it is.
    pub kind: EntityKind,
    /// The node's enclave (`/` when none is set).
    pub enclave: String,
    /// The node's namespace (`/` for the root).
    pub namespace: String,
    /// The node's name.
    pub node: String,
    /// The topic or service of an endpoint; None for a node.
    pub topic: Option<TopicInfo>,
}

/// Why a liveliness token was refused.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    /// Fewer chunks than a node (9) or an endpoint (13) has.
    #[error("a liveliness token has 9 chunks (node) or 13 (endpoint); this one has {0}")]
    Chunks(usize),
    /// An empty chunk.
    #[error("a liveliness token with an empty chunk")]
    Empty,
    /// Not under `@ros2_lv`.
    #[error("not under rmw_zenoh's `@ros2_lv`")]
    AdminSpace,
    /// Not a plain decimal domain.
    #[error("domain `{0}` is not a number")]
    Domain(String),
    /// An entity kind rmw_zenoh does not define.
    #[error("`{0}` is not NN, MP, MS, SS or SC")]
    Kind(String),
    /// The QoS chunk.
    #[error("bad QoS chunk: {0}")]
    Qos(#[from] QosError),
    /// A chunk with a character a token cannot carry (`/` inside a chunk,
    /// a Zenoh wildcard `*`, `$`, `#`, `?`).
    #[error("chunk `{0}` has a character a key expression chunk cannot carry")]
    Character(String),
    /// A token that would not read back as itself: a name with `%`
    /// (rmw_zenoh reads it as `/`) or a QoS value rmw does not define.
    #[error("`{0}` would not read back as the same entity (a `%` in a name, or a QoS value rmw does not define)")]
    Unrepresentable(String),
}

/// rmw_zenoh's GID of a token's key expression (see [`Token::gid`]).
pub fn gid_of(key_expr: &str) -> [u8; 16] {
    let h = xxhash_rust::xxh3::xxh3_128(key_expr.as_bytes());
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&(h as u64).to_le_bytes());
    g[8..].copy_from_slice(&((h >> 64) as u64).to_le_bytes());
    g
}

fn chunk_ok(c: &str) -> bool {
    !c.is_empty() && !c.contains(['/', '*', '$', '#', '?'])
}

impl Token {
    /// The key expression to declare the token on.
    pub fn key_expr(&self) -> String {
        let mut k = format!(
            "{ADMIN_SPACE}/{}/{}/{}/{}/{}/{}/{}/{}",
            self.domain,
            self.zid,
            self.nid,
            self.id,
            self.kind.as_str(),
            mangle(&self.enclave),
            mangle(&self.namespace),
            mangle(&self.node)
        );
        if let Some(t) = &self.topic {
            k.push_str(&format!(
                "/{}/{}/{}/{}",
                mangle(&t.name),
                mangle(&t.type_name),
                mangle(&t.type_hash),
                t.qos.encode()
            ));
        }
        k
    }

    /// The entity's GID as rmw_zenoh computes it: XXH3-128 (seed 0) of
    /// the token's key expression, the low 64 bits then the high 64, each
    /// little endian. It goes in every attachment of the entity's samples,
    /// queries and replies, and names the entity in `ros2 topic info -v`.
    pub fn gid(&self) -> [u8; 16] {
        gid_of(&self.key_expr())
    }

    /// Whether this token can be declared as it is: every chunk non-empty
    /// and free of the characters a key expression chunk cannot carry, and
    /// rmw_zenoh would read it back as this same entity.
    pub fn check(&self) -> Result<(), TokenError> {
        let key = self.key_expr();
        match Token::parse(&key) {
            Ok(t) if t == *self => Ok(()),
            Ok(_) => Err(TokenError::Unrepresentable(key)),
            Err(e) => Err(e),
        }
    }

    /// Parses a token as rmw_zenoh's `Entity::make` does (chunks past the
    /// thirteenth, e.g. Rolling's `backends:`, are ignored).
    pub fn parse(key: &str) -> Result<Token, TokenError> {
        let parts: Vec<&str> = key.split('/').collect();
        if parts.len() < 9 {
            return Err(TokenError::Chunks(parts.len()));
        }
        if parts.iter().any(|p| p.is_empty()) {
            return Err(TokenError::Empty);
        }
        if let Some(bad) = parts.iter().find(|p| !chunk_ok(p)) {
            return Err(TokenError::Character(bad.to_string()));
        }
        if parts[0] != ADMIN_SPACE {
            return Err(TokenError::AdminSpace);
        }
        let kind = EntityKind::parse(parts[5]).ok_or_else(|| TokenError::Kind(parts[5].into()))?;
        let domain = parts[1]
            .bytes()
            .all(|b| b.is_ascii_digit())
            .then(|| parts[1].parse::<u32>().ok())
            .flatten()
            .ok_or_else(|| TokenError::Domain(parts[1].into()))?;
        let topic = if kind == EntityKind::Node {
            None
        } else {
            if parts.len() < 13 {
                return Err(TokenError::Chunks(parts.len()));
            }
            Some(TopicInfo {
                name: demangle(parts[9]),
                type_name: demangle(parts[10]),
                type_hash: demangle(parts[11]),
                qos: RmwQos::decode(parts[12])?,
            })
        };
        Ok(Token {
            domain,
            zid: parts[2].into(),
            nid: parts[3].into(),
            id: parts[4].into(),
            kind,
            enclave: demangle(parts[6]),
            namespace: demangle(parts[7]),
            node: demangle(parts[8]),
            topic,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::keys::STRING_HASH;

    const ZID: &str = "aac3178e146ba6f1fc6e6a4085e77f21";

    fn listener(kind: EntityKind, depth: u32) -> Token {
        Token {
            domain: 0,
            zid: ZID.into(),
            nid: "0".into(),
            id: "10".into(),
            kind,
            enclave: "/".into(),
            namespace: "/".into(),
            node: "listener".into(),
            topic: Some(TopicInfo {
                name: "/chatter".into(),
                type_name: "std_msgs::msg::dds_::String_".into(),
                type_hash: format!("RIHS01_{STRING_HASH}"),
                qos: RmwQos::from_ferry(&ferry_wire::types::Qos::default().keep_last(depth)),
            }),
        }
    }

    #[test]
    fn the_design_documents_tokens() {
        let node = Token {
            id: "0".into(),
            kind: EntityKind::Node,
            topic: None,
            ..listener(EntityKind::Node, 10)
        };
        let key = format!("@ros2_lv/0/{ZID}/0/0/NN/%/%/listener");
        assert_eq!(node.key_expr(), key);
        assert_eq!(Token::parse(&key), Ok(node));
        let sub = listener(EntityKind::Subscription, 10);
        let key = format!(
            "@ros2_lv/0/{ZID}/0/10/MS/%/%/listener/%chatter/std_msgs::msg::dds_::String_/RIHS01_{STRING_HASH}/::,10:,:,:,,"
        );
        assert_eq!(sub.key_expr(), key);
        assert_eq!(Token::parse(&key), Ok(sub.clone()));
        assert_eq!(sub.check(), Ok(()));
        let namespaced = Token {
            namespace: "/robot1".into(),
            ..listener(EntityKind::Publisher, 7)
        };
        assert!(namespaced
            .key_expr()
            .contains("/MP/%/%robot1/listener/%chatter/"));
        assert!(namespaced.key_expr().ends_with("/::,7:,:,:,,"));
    }

    #[test]
    fn what_rmw_zenoh_refuses_is_refused() {
        let good = listener(EntityKind::Publisher, 10).key_expr();
        assert_eq!(
            Token::parse("@ros2_lv/0/z/0/0/NN/%/%"),
            Err(TokenError::Chunks(8))
        );
        assert_eq!(
            Token::parse(&good.replace("/%/%/", "//%/")),
            Err(TokenError::Empty)
        );
        assert_eq!(
            Token::parse(&good.replace("@ros2_lv", "@ros3_lv")),
            Err(TokenError::AdminSpace)
        );
        assert_eq!(
            Token::parse(&good.replace("/MP/", "/XX/")),
            Err(TokenError::Kind("XX".into()))
        );
        // An endpoint without its topic chunks.
        let cut: Vec<&str> = good.split('/').take(11).collect();
        assert_eq!(Token::parse(&cut.join("/")), Err(TokenError::Chunks(11)));
        assert!(matches!(
            Token::parse(&good.replace("::,10:", "::,x:")),
            Err(TokenError::Qos(_))
        ));
        assert!(matches!(
            Token::parse(&good.replace("@ros2_lv/0/", "@ros2_lv/-1/")),
            Err(TokenError::Domain(_))
        ));
        // A name with a wildcard cannot be declared.
        let wild = Token {
            node: "a*b".into(),
            ..listener(EntityKind::Publisher, 10)
        };
        assert!(wild.check().is_err());
    }

    #[test]
    fn gids_are_rmw_zenohs() {
        // Golden values from rmw_zenoh's own simplified_xxhash3.cpp
        // (upstream/0.2.10, compiled with g++, memcpy of low64 then high64
        // on x86-64): lengths 0, 1, 63 (a node token), 187 (an endpoint
        // token) and 1000 cover each of XXH3's length paths.
        let hex = |g: [u8; 16]| -> String { g.iter().map(|b| format!("{b:02x}")).collect() };
        assert_eq!(hex(gid_of("")), "7f498d4624c30160d8984701d306aa99");
        assert_eq!(hex(gid_of("a")), "1f4e961eb632c6e63468f15a70af6fa9");
        let node = Token {
            id: "0".into(),
            kind: EntityKind::Node,
            topic: None,
            ..listener(EntityKind::Node, 10)
        };
        assert_eq!(hex(node.gid()), "5bd72f4daf53c0bb00c7394e7fc19547");
        let sub = listener(EntityKind::Subscription, 10);
        assert_eq!(sub.key_expr().len(), 187);
        assert_eq!(hex(sub.gid()), "f15f21d2fafc22891bb0db868309bfcb");
        assert_eq!(
            hex(gid_of(&"x".repeat(1000))),
            "82ba2c967b87a4c001cf2d5f5aafa150"
        );
    }

    proptest::proptest! {
        #[test]
        fn parsing_any_string_never_panics(s in "\\PC{0,200}") {
            let _ = Token::parse(&s);
        }

        #[test]
        fn tokens_built_from_parts_parse_back(
            domain in "[0-9]{1,3}",
            ids in proptest::collection::vec("[0-9a-f]{1,4}", 3),
            kind in proptest::sample::select(vec!["NN", "MP", "MS", "SS", "SC", "XX"]),
            names in proptest::collection::vec("[%a-z0-9_:,]{1,6}", 6),
            qos in proptest::collection::vec("[0-5]?", 11),
            extra in proptest::collection::vec("[a-z:,;]{1,4}", 0..2),
        ) {
            // The QoS chunk's separators as rmw_zenoh writes them; values
            // empty or 0–5 (most known, some not: history 4, liveliness 2).
            let seps = [":", ":", ",", ":", ",", ":", ",", ":", ",", ",", ""];
            let q: String = qos.iter().zip(seps).map(|(v, s)| format!("{v}{s}")).collect();
            let mut parts = vec![ADMIN_SPACE.to_string(), domain];
            parts.extend(ids);
            parts.push(kind.to_string());
            parts.extend(names);
            parts.push(q);
            parts.extend(extra);
            let key = parts.join("/");
            match Token::parse(&key) {
                Ok(t) => {
                    proptest::prop_assert!(kind != "XX");
                    proptest::prop_assert_eq!(Token::parse(&t.key_expr()), Ok(t.clone()));
                    proptest::prop_assert_eq!(t.check(), Ok(()));
                }
                Err(e) => proptest::prop_assert!(
                    kind == "XX" || matches!(e, TokenError::Qos(_) | TokenError::Domain(_)),
                    "{key}: {e}"
                ),
            }
        }
    }
}
