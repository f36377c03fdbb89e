//! The policy file: per enclave, what it may and may not do.
//!
//! ```yaml
//! version: 1
//! domains: [0]                  # where these grants hold; omitted: every domain
//! identities:
//!   /robot1/talker:
//!     allow: { publish: [/chatter, "/robot1/**"], subscribe: [/parameter_events] }
//!     deny:  { publish: [/robot1/cmd_vel] }
//!   /ops/cli:
//!     allow: { subscribe: ["/**"], monitor: ["/**"], admin: ["/robot1/**"] }
//! ```
//!
//! Names are absolute ROS names (topics and services; node names for
//! `admin` and `monitor`). Unknown keys are errors that name the key.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use thiserror::Error;

use crate::enclave::{check_enclave, EnclaveError};
use crate::grants::{Action, Effect, Grants, Pattern, PatternError, Rule, MAX_RULES};

/// A policy: the grants of every enclave it names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    /// Enclave → its grants (the policy's `domains` copied into each).
    pub identities: BTreeMap<String, Grants>,
}

/// A policy file that cannot be used.
#[derive(Debug, Error)]
pub enum PolicyError {
    /// Not YAML, or a key or value the policy does not have (the message
    /// names it and its line).
    #[error("policy: {0}")]
    Syntax(String),
    /// Another version of the format.
    #[error("policy version {0}: this ferry reads version 1")]
    Version(u32),
    /// An identity name that is not an enclave path.
    #[error("policy: identity {name:?}: {source}")]
    Enclave {
        /// The name as written.
        name: String,
        /// Why.
        source: EnclaveError,
    },
    /// A pattern that is not one.
    #[error("policy: identity {enclave}, {action}: {source}")]
    Pattern {
        /// The enclave.
        enclave: String,
        /// `allow.publish`, `deny.admin`, ….
        action: String,
        /// Why.
        source: PatternError,
    },
    /// Grants too large for a certificate.
    #[error("policy: identity {enclave}: {source}")]
    Grants {
        /// The enclave.
        enclave: String,
        /// Why.
        source: crate::grants::GrantsError,
    },
    /// More than [`MAX_RULES`] rules for one enclave.
    #[error("policy: identity {enclave} has {n} rules, at most 1024")]
    TooManyRules {
        /// The enclave.
        enclave: String,
        /// Its rules.
        n: usize,
    },
}

#[derive(Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct File {
    version: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    domains: Option<Vec<u16>>,
    identities: BTreeMap<String, Identity>,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Identity {
    #[serde(default, skip_serializing_if = "Actions::is_empty")]
    allow: Actions,
    #[serde(default, skip_serializing_if = "Actions::is_empty")]
    deny: Actions,
}

#[derive(Debug, Default, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
struct Actions {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    publish: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    subscribe: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    call: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    serve: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    admin: Vec<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    monitor: Vec<String>,
}

impl Actions {
    fn is_empty(&self) -> bool {
        self.lists().iter().all(|(_, l)| l.is_empty())
    }

    fn lists(&self) -> [(Action, &Vec<String>); 6] {
        [
            (Action::Publish, &self.publish),
            (Action::Subscribe, &self.subscribe),
            (Action::Call, &self.call),
            (Action::Serve, &self.serve),
            (Action::Admin, &self.admin),
            (Action::Monitor, &self.monitor),
        ]
    }

    fn list_mut(&mut self, a: Action) -> &mut Vec<String> {
        match a {
            Action::Publish => &mut self.publish,
            Action::Subscribe => &mut self.subscribe,
            Action::Call => &mut self.call,
            Action::Serve => &mut self.serve,
            Action::Admin => &mut self.admin,
            Action::Monitor => &mut self.monitor,
        }
    }
}

impl Policy {
    /// Parses and checks a policy.
    pub fn parse(text: &str) -> Result<Policy, PolicyError> {
        let file: File =
            serde_norway::from_str(text).map_err(|e| PolicyError::Syntax(e.to_string()))?;
        if file.version != 1 {
            return Err(PolicyError::Version(file.version));
        }
        if file
            .domains
            .as_ref()
            .is_some_and(|d| d.is_empty() || d.len() > 255)
        {
            return Err(PolicyError::Syntax(
                "`domains` lists 1 to 255 domains; leave it out for every domain".into(),
            ));
        }
        let mut identities = BTreeMap::new();
        for (name, id) in file.identities {
            check_enclave(&name).map_err(|source| PolicyError::Enclave {
                name: name.clone(),
                source,
            })?;
            let mut rules = Vec::new();
            for (effect, word, actions) in [
                (Effect::Allow, "allow", &id.allow),
                (Effect::Deny, "deny", &id.deny),
            ] {
                for (action, list) in actions.lists() {
                    for text in list {
                        let pattern =
                            Pattern::new(text).map_err(|source| PolicyError::Pattern {
                                enclave: name.clone(),
                                action: format!("{word}.{action}"),
                                source,
                            })?;
                        rules.push(Rule {
                            effect,
                            actions: action.bit(),
                            pattern,
                        });
                    }
                }
            }
            if rules.len() > MAX_RULES {
                return Err(PolicyError::TooManyRules {
                    enclave: name,
                    n: rules.len(),
                });
            }
            let grants = Grants {
                domains: file.domains.clone(),
                rules,
            };
            // What cannot travel in a certificate is refused here.
            grants.encode().map_err(|source| PolicyError::Grants {
                enclave: name.clone(),
                source,
            })?;
            identities.insert(name, grants);
        }
        Ok(Policy { identities })
    }
}

/// One enclave's grants written as a policy file of its own (what
/// `create-permissions` leaves beside the certificate, for people).
pub fn grants_yaml(enclave: &str, grants: &Grants) -> String {
    let mut id = Identity::default();
    for r in &grants.rules {
        let side = match r.effect {
            Effect::Allow => &mut id.allow,
            Effect::Deny => &mut id.deny,
        };
        for a in Action::ALL {
            if r.actions & a.bit() != 0 {
                side.list_mut(a).push(r.pattern.as_str().to_string());
            }
        }
    }
    let file = File {
        version: 1,
        domains: grants.domains.clone(),
        identities: BTreeMap::from([(enclave.to_string(), id)]),
    };
    serde_norway::to_string(&file).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    const POLICY: &str = r#"
version: 1
domains: [0]
identities:
  /robot1/talker:
    allow: { publish: [/chatter, "/robot1/**"], subscribe: [/parameter_events] }
    deny:  { publish: [/robot1/cmd_vel] }
  /ops/cli:
    allow: { subscribe: ["/**"], monitor: ["/**"], admin: ["/robot1/**"] }
"#;

    #[test]
    fn a_policy_becomes_grants_per_enclave() {
        let p = Policy::parse(POLICY).unwrap();
        let t = &p.identities["/robot1/talker"];
        assert!(t.allows(Action::Publish, "/chatter"));
        assert!(t.allows(Action::Publish, "/robot1/odom"));
        assert!(!t.allows(Action::Publish, "/robot1/cmd_vel"));
        assert!(!t.allows(Action::Subscribe, "/chatter"));
        assert_eq!(t.domains, Some(vec![0]));
        let c = &p.identities["/ops/cli"];
        assert!(c.allows(Action::Admin, "/robot1/arm"));
        assert!(!c.allows(Action::Admin, "/robot2/arm"));
        // Written back for people, it reads back to the same grants.
        let again = Policy::parse(&grants_yaml("/robot1/talker", t)).unwrap();
        assert_eq!(&again.identities["/robot1/talker"], t);
    }

    #[test]
    fn mistakes_name_the_key() {
        let e = Policy::parse("version: 1\nidentities:\n  /a:\n    allow: { publsh: [/x] }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("publsh"), "{e}");
        let e = Policy::parse("version: 1\nidentitys: {}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("identitys"), "{e}");
        let e = Policy::parse("version: 2\nidentities: {}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("version 2"), "{e}");
        let e = Policy::parse("version: 1\nidentities:\n  /a:\n    deny: { admin: [x] }\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("deny.admin") && e.contains("absolute"), "{e}");
        let e = Policy::parse("version: 1\ndomains: []\nidentities: {}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("leave it out"), "{e}");
        let e = Policy::parse("version: 1\nidentities:\n  robot:\n    allow: {}\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("robot"), "{e}");
    }
}
