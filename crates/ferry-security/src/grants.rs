//! Grants: what one enclave may do, as rules of name patterns, and their
//! compact binary form carried in the enclave's certificate.
//!
//! Evaluation is order-independent: any matching `deny` rule refuses,
//! else any matching `allow` rule permits, else the action is refused
//! (default deny).
//!
//! Binary form (little endian, at most [`MAX_GRANTS_BYTES`]):
//!
//! ```text
//! version u8 = 1 | n_domains u8 | n × domain u16 (none: every domain)
//! | n_rules u16 | n × { effect u8 (1 allow, 2 deny) | actions u8 (bits of
//!   Action) | pattern: len u16 (≤ 255) + UTF-8 }
//! ```

use std::fmt;

use thiserror::Error;

/// Object identifier of the certificate extension that carries the grants.
///
/// The arc is the IANA Private Enterprise Number reserved for
/// documentation (32473, RFC 5612): a placeholder until ferry has its own
/// PEN. Changing it is this one constant and a `create-permissions` run.
pub const GRANTS_OID: &[u64] = &[1, 3, 6, 1, 4, 1, 32473, 22, 1];

/// Largest encoded grants, bytes.
pub const MAX_GRANTS_BYTES: usize = 8 * 1024;
/// Most rules per enclave.
pub const MAX_RULES: usize = 1024;
/// Longest pattern, bytes.
pub const MAX_PATTERN: usize = 255;

const VERSION: u8 = 1;

/// Something an enclave does with a name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Action {
    /// Create a publisher on a topic.
    Publish,
    /// Create a subscriber on a topic.
    Subscribe,
    /// Call a service (create a client).
    Call,
    /// Serve a service.
    Serve,
    /// Change a node's live settings through its admin plane (node name).
    Admin,
    /// Read a node's connections and counters through its admin plane.
    Monitor,
}

impl Action {
    /// Every action, in bit order.
    pub const ALL: [Action; 6] = [
        Action::Publish,
        Action::Subscribe,
        Action::Call,
        Action::Serve,
        Action::Admin,
        Action::Monitor,
    ];

    /// The action's bit in [`Rule::actions`].
    pub fn bit(self) -> u8 {
        1 << (self as u8)
    }

    /// The policy file's word for the action.
    pub fn word(self) -> &'static str {
        match self {
            Action::Publish => "publish",
            Action::Subscribe => "subscribe",
            Action::Call => "call",
            Action::Serve => "serve",
            Action::Admin => "admin",
            Action::Monitor => "monitor",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// Whether a rule permits or refuses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// Permits, unless a deny rule matches too.
    Allow,
    /// Refuses, whatever else matches.
    Deny,
}

/// A name pattern: an absolute ROS name whose segments may be `*` (any
/// one segment), contain `*` (any characters within the segment), or be
/// `**` (zero or more whole segments).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Pattern(String);

/// A pattern that is not one.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum PatternError {
    /// Names in a policy are absolute.
    #[error("pattern {0:?} is not absolute: start it with `/`")]
    NotAbsolute(String),
    /// An empty segment (`//`, or a trailing `/` after a segment).
    #[error("pattern {0:?} has an empty segment (`//` or a trailing `/`)")]
    EmptySegment(String),
    /// `**` mixed with other characters in one segment.
    #[error("pattern {0:?}: `**` must be a whole segment (`/a/**`, not `/a/b**`)")]
    DoubleStar(String),
    /// A character outside ROS names and `*`.
    #[error("pattern {0:?} has {1:?}: names are letters, digits, `_`, `~`, `{{` `}}` and `/`; `*` matches")]
    Character(String, char),
    /// Longer than [`MAX_PATTERN`].
    #[error("pattern of {0} bytes: at most 255")]
    TooLong(usize),
}

impl Pattern {
    /// Checks `text` as a pattern.
    pub fn new(text: &str) -> Result<Pattern, PatternError> {
        if text.len() > MAX_PATTERN {
            return Err(PatternError::TooLong(text.len()));
        }
        if !text.starts_with('/') {
            return Err(PatternError::NotAbsolute(text.into()));
        }
        if text != "/" {
            for seg in text[1..].split('/') {
                if seg.is_empty() {
                    return Err(PatternError::EmptySegment(text.into()));
                }
                if seg.contains("**") && seg != "**" {
                    return Err(PatternError::DoubleStar(text.into()));
                }
                if let Some(c) = seg.chars().find(|c| {
                    !(c.is_ascii_alphanumeric() || matches!(c, '_' | '~' | '*' | '{' | '}'))
                }) {
                    return Err(PatternError::Character(text.into(), c));
                }
            }
        }
        Ok(Pattern(text.into()))
    }

    /// The pattern as written.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Whether the absolute name `name` matches.
    pub fn matches(&self, name: &str) -> bool {
        let pat: Vec<&str> = segments(&self.0);
        let name: Vec<&str> = segments(name);
        match_segments(&pat, &name)
    }
}

impl fmt::Display for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn segments(s: &str) -> Vec<&str> {
    s.split('/').filter(|p| !p.is_empty()).collect()
}

fn match_segments(pat: &[&str], name: &[&str]) -> bool {
    match pat.split_first() {
        None => name.is_empty(),
        Some((&"**", rest)) => (0..=name.len()).any(|skip| match_segments(rest, &name[skip..])),
        Some((p, rest)) => match name.split_first() {
            Some((n, more)) => match_one(p, n) && match_segments(rest, more),
            None => false,
        },
    }
}

/// `*` within one segment: any characters (none included).
fn match_one(pat: &str, name: &str) -> bool {
    let mut parts = pat.split('*');
    let first = parts.next().unwrap_or("");
    let Some(mut rest) = name.strip_prefix(first) else {
        return false;
    };
    let parts: Vec<&str> = parts.collect();
    let Some((last, middle)) = parts.split_last() else {
        return rest.is_empty(); // no `*`: exact
    };
    for m in middle {
        match rest.find(m) {
            Some(i) => rest = &rest[i + m.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// One rule: an effect on a set of actions for the names a pattern
/// matches.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    /// Allow or deny.
    pub effect: Effect,
    /// Bits of [`Action::bit`].
    pub actions: u8,
    /// The names.
    pub pattern: Pattern,
}

/// What one enclave may do.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Grants {
    /// Domains where the grants hold (`None`: every domain).
    pub domains: Option<Vec<u16>>,
    /// The rules (empty: nothing is allowed).
    pub rules: Vec<Rule>,
}

/// Grants bytes that are not grants.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum GrantsError {
    /// Shorter than their own lengths say.
    #[error("grants truncated at byte {0}")]
    Truncated(usize),
    /// Another version of the format.
    #[error("grants version {0}, this ferry reads version 1: re-run `ferry security create-permissions` or update ferry")]
    Version(u8),
    /// Longer than [`MAX_GRANTS_BYTES`] or [`MAX_RULES`].
    #[error("grants too large: {0}")]
    TooLarge(String),
    /// An effect byte other than 1 or 2, or unknown action bits.
    #[error("grants rule {0}: bad effect or action bits")]
    Rule(usize),
    /// A pattern that is not UTF-8 or not a pattern.
    #[error("grants rule {index}: {reason}")]
    Pattern {
        /// Rule index.
        index: usize,
        /// Why.
        reason: String,
    },
    /// Bytes after the last rule.
    #[error("{0} bytes after the grants")]
    Trailing(usize),
}

impl Grants {
    /// Whether the grants hold in `domain`.
    pub fn covers_domain(&self, domain: u16) -> bool {
        self.domains.as_ref().is_none_or(|d| d.contains(&domain))
    }

    /// Whether `action` on the absolute name `name` is allowed: no deny
    /// rule matches and an allow rule does.
    pub fn allows(&self, action: Action, name: &str) -> bool {
        let mut allowed = false;
        for r in &self.rules {
            if r.actions & action.bit() != 0 && r.pattern.matches(name) {
                match r.effect {
                    Effect::Deny => return false,
                    Effect::Allow => allowed = true,
                }
            }
        }
        allowed
    }

    /// Rules that allow, and rules that deny.
    pub fn counts(&self) -> (usize, usize) {
        let allow = self
            .rules
            .iter()
            .filter(|r| r.effect == Effect::Allow)
            .count();
        (allow, self.rules.len() - allow)
    }

    /// The binary form (see the module docs).
    pub fn encode(&self) -> Result<Vec<u8>, GrantsError> {
        if self.rules.len() > MAX_RULES {
            return Err(GrantsError::TooLarge(format!(
                "{} rules, at most {MAX_RULES}",
                self.rules.len()
            )));
        }
        let domains = self.domains.as_deref().unwrap_or(&[]);
        if domains.len() > u8::MAX as usize {
            return Err(GrantsError::TooLarge(format!(
                "{} domains, at most 255",
                domains.len()
            )));
        }
        let mut b = vec![VERSION, domains.len() as u8];
        for d in domains {
            b.extend_from_slice(&d.to_le_bytes());
        }
        b.extend_from_slice(&(self.rules.len() as u16).to_le_bytes());
        for r in &self.rules {
            b.push(match r.effect {
                Effect::Allow => 1,
                Effect::Deny => 2,
            });
            b.push(r.actions);
            let p = r.pattern.as_str().as_bytes();
            b.extend_from_slice(&(p.len() as u16).to_le_bytes());
            b.extend_from_slice(p);
        }
        if b.len() > MAX_GRANTS_BYTES {
            return Err(GrantsError::TooLarge(format!(
                "{} bytes, at most {MAX_GRANTS_BYTES}",
                b.len()
            )));
        }
        Ok(b)
    }

    /// Reads the binary form; never panics, whatever the bytes.
    pub fn decode(b: &[u8]) -> Result<Grants, GrantsError> {
        if b.len() > MAX_GRANTS_BYTES {
            return Err(GrantsError::TooLarge(format!("{} bytes", b.len())));
        }
        let mut r = Reader { b, at: 0 };
        let version = r.u8()?;
        if version != VERSION {
            return Err(GrantsError::Version(version));
        }
        let n_domains = r.u8()? as usize;
        let domains = if n_domains == 0 {
            None
        } else {
            Some(
                (0..n_domains)
                    .map(|_| r.u16())
                    .collect::<Result<Vec<_>, _>>()?,
            )
        };
        let n_rules = r.u16()? as usize;
        if n_rules > MAX_RULES {
            return Err(GrantsError::TooLarge(format!("{n_rules} rules")));
        }
        let mut rules = Vec::with_capacity(n_rules);
        for index in 0..n_rules {
            let effect = match r.u8()? {
                1 => Effect::Allow,
                2 => Effect::Deny,
                _ => return Err(GrantsError::Rule(index)),
            };
            let actions = r.u8()?;
            if actions == 0 || actions >> Action::ALL.len() != 0 {
                return Err(GrantsError::Rule(index));
            }
            let len = r.u16()? as usize;
            let text = std::str::from_utf8(r.take(len)?).map_err(|e| GrantsError::Pattern {
                index,
                reason: e.to_string(),
            })?;
            let pattern = Pattern::new(text).map_err(|e| GrantsError::Pattern {
                index,
                reason: e.to_string(),
            })?;
            rules.push(Rule {
                effect,
                actions,
                pattern,
            });
        }
        if r.at != b.len() {
            return Err(GrantsError::Trailing(b.len() - r.at));
        }
        Ok(Grants { domains, rules })
    }
}

struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], GrantsError> {
        let end = self.at.checked_add(n).filter(|&e| e <= self.b.len());
        let end = end.ok_or(GrantsError::Truncated(self.at))?;
        let s = &self.b[self.at..end];
        self.at = end;
        Ok(s)
    }

    fn u8(&mut self) -> Result<u8, GrantsError> {
        Ok(self.take(1)?[0])
    }

    fn u16(&mut self) -> Result<u16, GrantsError> {
        let s = self.take(2)?;
        Ok(u16::from_le_bytes([s[0], s[1]]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Pattern {
        Pattern::new(s).unwrap()
    }

    #[test]
    fn star_stays_in_one_segment_and_double_star_spans_any() {
        assert!(p("/chatter").matches("/chatter"));
        assert!(!p("/chatter").matches("/chatter2"));
        assert!(p("/robot1/*").matches("/robot1/cmd_vel"));
        assert!(!p("/robot1/*").matches("/robot1/arm/joints"));
        assert!(!p("/robot1/*").matches("/robot1"));
        assert!(p("/robot1/**").matches("/robot1"));
        assert!(p("/robot1/**").matches("/robot1/arm/joints"));
        assert!(p("/**/image_raw").matches("/cam/front/image_raw"));
        assert!(p("/**/image_raw").matches("/image_raw"));
        assert!(p("/cam*/image").matches("/camera/image"));
        assert!(p("/cam*/image").matches("/cam/image"));
        assert!(!p("/cam*/image").matches("/front/image"));
        assert!(p("/a*b*c").matches("/abxxc"));
        assert!(!p("/a*b*c").matches("/acb"));
        assert!(p("/**").matches("/anything/at/all"));
        assert!(p("/").matches("/"));
        assert!(!p("/").matches("/x"));
    }

    #[test]
    fn bad_patterns_say_why() {
        assert!(matches!(
            Pattern::new("chatter"),
            Err(PatternError::NotAbsolute(_))
        ));
        assert!(matches!(
            Pattern::new("/a//b"),
            Err(PatternError::EmptySegment(_))
        ));
        assert!(matches!(
            Pattern::new("/a/"),
            Err(PatternError::EmptySegment(_))
        ));
        assert!(matches!(
            Pattern::new("/a**"),
            Err(PatternError::DoubleStar(_))
        ));
        assert!(matches!(
            Pattern::new("/a b"),
            Err(PatternError::Character(_, ' '))
        ));
    }

    #[test]
    fn deny_wins_and_nothing_is_allowed_by_default() {
        let g = Grants {
            domains: Some(vec![0, 7]),
            rules: vec![
                Rule {
                    effect: Effect::Allow,
                    actions: Action::Publish.bit() | Action::Subscribe.bit(),
                    pattern: p("/robot1/**"),
                },
                Rule {
                    effect: Effect::Deny,
                    actions: Action::Publish.bit(),
                    pattern: p("/robot1/cmd_vel"),
                },
            ],
        };
        assert!(g.allows(Action::Publish, "/robot1/odom"));
        assert!(g.allows(Action::Subscribe, "/robot1/cmd_vel"));
        assert!(!g.allows(Action::Publish, "/robot1/cmd_vel"));
        assert!(!g.allows(Action::Serve, "/robot1/odom"));
        assert!(!g.allows(Action::Publish, "/robot2/odom"));
        assert!(g.covers_domain(7) && !g.covers_domain(1));
        assert!(!Grants::default().allows(Action::Publish, "/x"));
        let back = Grants::decode(&g.encode().unwrap()).unwrap();
        assert_eq!(back, g);
    }

    proptest::proptest! {
        #[test]
        fn decoding_any_bytes_never_panics(b in proptest::collection::vec(0u8..=255, 0..300)) {
            let _ = Grants::decode(&b);
        }

        #[test]
        fn every_prefix_of_valid_grants_is_an_error(cut in 0usize..40) {
            let g = Grants {
                domains: None,
                rules: vec![Rule { effect: Effect::Allow, actions: 1, pattern: p("/a/**") }],
            };
            let b = g.encode().unwrap();
            let cut = cut.min(b.len() - 1);
            proptest::prop_assert!(Grants::decode(&b[..cut]).is_err());
        }
    }
}
