//! A Mosquitto `acl_file` from a keystore's grants: the broker then refuses
//! what the policy refuses on the MQTT path, where a reader cannot tell who
//! published (the broker let the writer in; nothing else proves it).
//!
//! With `require_certificate true` and `use_identity_as_username true`, the
//! MQTT user is the certificate's common name: the enclave. Per enclave:
//!
//! - discovery: `readwrite <prefix>/<domain>/@disc/#` (beacons are signed;
//!   runtimes check them);
//! - `publish` / `subscribe` rules: `write` / `read` on the data topic of
//!   each pattern (`/robot1/odom` → `ferry/0/robot1/odom`; a segment `*` →
//!   `+`; a final `**` → `#`);
//! - the control topics, whose traffic names no topic the broker could
//!   check and where the runtimes check no grant (a late joiner's history
//!   `@hist`, service requests `@req` and replies `@rep`): only with the
//!   action on every name (`/**`, no deny): `publish` → `write @hist`,
//!   `subscribe` → `read @hist`, `call` → `write @req` + `read @rep`,
//!   `serve` → `read @req` + `write @rep`. So through a broker with this
//!   ACL, transient_local history and services work for such enclaves only;
//! - `deny` rules: `topic deny` (Mosquitto refuses both directions there,
//!   stricter than a deny of one action).
//!
//! MQTT filters cannot say everything a pattern can: an allow whose pattern
//! has `*` inside a segment (`/cam*`) or `**` before its end is refused
//! (widening it would allow more than the policy); a deny of that shape is
//! widened (`+`, `#`), which refuses more. A grant whose first segment is a
//! wildcard (`/**`, `/*/odom`) matches the control topics too: where the
//! enclave has nothing to do there they get a `topic deny` (Mosquitto
//! checks denies first), and where it may act in one direction only the
//! export is refused.

use std::fmt::Write as _;

use thiserror::Error;

use crate::grants::{Action, Effect, Grants};

/// Why no ACL file was written.
#[derive(Debug, Error)]
pub enum AclError {
    /// An allow rule that an MQTT filter cannot express without allowing
    /// more.
    #[error(
        "{enclave}: `{pattern}` cannot be an MQTT filter without allowing more (`*` inside a \
         segment, or `**` before the end): list the names, or use whole-segment `*` and a final `**`"
    )]
    Inexpressible {
        /// The enclave.
        enclave: String,
        /// The pattern.
        pattern: String,
    },
    /// A topic prefix (or an enclave name) with MQTT wildcards or spaces.
    #[error("`{0}`: a topic prefix or user name without `+`, `#` or spaces")]
    Prefix(String),
    /// A wildcard data grant would reach a control topic in the direction
    /// the enclave may not use there.
    #[error(
        "{enclave}: a grant whose first segment is a wildcard also reaches {topic}, where this          enclave may act in one direction only: name the first segment of that grant"
    )]
    ControlTopic {
        /// The enclave.
        enclave: String,
        /// The control topic.
        topic: &'static str,
    },
}

/// The MQTT filter for a pattern under `base` (`<prefix>/<domain>/`):
/// `Ok(filter)` exact, `Err(filter)` only by widening.
fn filter(base: &str, pattern: &str) -> Result<String, String> {
    let segs: Vec<&str> = pattern.split('/').filter(|s| !s.is_empty()).collect();
    let mut out = Vec::with_capacity(segs.len());
    let mut exact = true;
    for (i, s) in segs.iter().enumerate() {
        let last = i + 1 == segs.len();
        match *s {
            "**" => {
                out.push("#");
                exact &= last;
                break;
            }
            "*" => out.push("+"),
            s if s.contains('*') => {
                out.push("+");
                exact = false;
            }
            s => out.push(s),
        }
    }
    let f = if out.is_empty() {
        // `/`: the root name only (its data topic is the base itself).
        base.to_string()
    } else {
        format!("{base}{}", out.join("/"))
    };
    if exact {
        Ok(f)
    } else {
        Err(f)
    }
}

/// Read and write, as bits.
const READ: u8 = 1;
const WRITE: u8 = 2;

fn word(bits: u8) -> &'static str {
    match bits {
        READ => "read",
        WRITE => "write",
        _ => "readwrite",
    }
}

/// Whether a data filter (after `<prefix>/<domain>/`) can match a control
/// topic `@x/<participant>/<entity>`: a wildcard first segment, and
/// three segments or a `#`.
fn reaches_control(f: &str) -> bool {
    let segs: Vec<&str> = f.split('/').collect();
    match segs.first() {
        Some(&"#") => true,
        Some(&"+") => segs.len() == 3 || segs.last() == Some(&"#"),
        _ => false,
    }
}

/// Whether the grants allow `action` on every name (an allow of `/**` and
/// no deny of it): the control topics of that action carry every topic's
/// traffic, and the runtimes there check no grant.
fn everywhere(grants: &Grants, action: Action) -> bool {
    let of = |e: Effect| {
        grants
            .rules
            .iter()
            .filter(move |r| r.effect == e && r.actions & action.bit() != 0)
    };
    of(Effect::Allow).any(|r| r.pattern.as_str() == "/**") && of(Effect::Deny).next().is_none()
}

/// The Mosquitto ACL lines for `enclaves` (name and grants), topics under
/// `prefix` (ferry's `[mqtt] prefix`, default `ferry`).
pub fn mosquitto_acl(enclaves: &[(String, Grants)], prefix: &str) -> Result<String, AclError> {
    if prefix.is_empty() || prefix.contains(['+', '#']) || prefix.contains(char::is_whitespace) {
        return Err(AclError::Prefix(prefix.into()));
    }
    let mut m = String::from(
        "# Generated by `ferry security export-mqtt-acl` from the keystore's grants.\n\
         # mosquitto.conf: require_certificate true, use_identity_as_username true,\n\
         # acl_file <this file>. Users are enclaves (the certificates' common names).\n",
    );
    for (enclave, grants) in enclaves {
        if enclave.contains(char::is_whitespace) {
            return Err(AclError::Prefix(enclave.clone()));
        }
        let _ = writeln!(m, "\nuser {enclave}");
        let domains: Vec<String> = match &grants.domains {
            Some(d) => d.iter().map(u16::to_string).collect(),
            None => vec!["+".into()],
        };
        let all = |a: Action| everywhere(grants, a);
        // The control topics: what the enclave may do there. History and
        // service traffic name no topic the broker could check, so they are
        // granted only with the action on every name.
        let hist = (if all(Action::Publish) { WRITE } else { 0 })
            | (if all(Action::Subscribe) { READ } else { 0 });
        let req = (if all(Action::Call) { WRITE } else { 0 })
            | (if all(Action::Serve) { READ } else { 0 });
        let rep = (if all(Action::Call) { READ } else { 0 })
            | (if all(Action::Serve) { WRITE } else { 0 });
        let control = [("@hist", hist), ("@req", req), ("@rep", rep)];
        for d in &domains {
            let base = format!("{prefix}/{d}/");
            let mut lines: Vec<String> = vec![format!("topic readwrite {base}@disc/#")];
            for (c, bits) in control {
                if bits != 0 {
                    lines.push(format!("topic {} {base}{c}/#", word(bits)));
                }
            }
            // What wildcard data grants would also reach there.
            let mut reach = 0u8;
            for r in &grants.rules {
                let pattern = r.pattern.as_str();
                let bits = (if r.actions & Action::Publish.bit() != 0 {
                    WRITE
                } else {
                    0
                }) | (if r.actions & Action::Subscribe.bit() != 0 {
                    READ
                } else {
                    0
                });
                if bits == 0 {
                    continue;
                }
                let f = match (filter(&base, pattern), r.effect) {
                    (Ok(f), _) => f,
                    (Err(f), Effect::Deny) => {
                        lines.push(format!("# deny {pattern}: widened to {f}"));
                        f
                    }
                    (Err(_), Effect::Allow) => {
                        return Err(AclError::Inexpressible {
                            enclave: enclave.clone(),
                            pattern: pattern.into(),
                        })
                    }
                };
                if r.effect == Effect::Deny {
                    lines.push(format!("topic deny {f}"));
                    continue;
                }
                if reaches_control(&f[base.len().min(f.len())..]) {
                    reach |= bits;
                }
                lines.push(format!("topic {} {f}", word(bits)));
            }
            // A wildcard first segment matches the control topics too:
            // refuse them where the enclave has nothing to do, and refuse
            // the export where it may do one thing there but the wildcard
            // would give it the other (Mosquitto's deny takes both).
            for (c, bits) in control {
                if reach & !bits == 0 {
                    continue;
                }
                if bits != 0 {
                    return Err(AclError::ControlTopic {
                        enclave: enclave.clone(),
                        topic: c,
                    });
                }
                lines.push(format!("topic deny {base}{c}/#"));
            }
            for l in lines {
                let _ = writeln!(m, "{l}");
            }
        }
    }
    Ok(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::grants::{Pattern, Rule};

    fn rule(effect: Effect, actions: &[Action], pattern: &str) -> Rule {
        Rule {
            effect,
            actions: actions.iter().fold(0, |a, x| a | x.bit()),
            pattern: Pattern::new(pattern).unwrap(),
        }
    }

    #[test]
    fn patterns_become_filters_and_denies_are_listed() {
        let talker = Grants {
            domains: Some(vec![0]),
            rules: vec![
                rule(Effect::Allow, &[Action::Publish], "/chatter"),
                rule(Effect::Allow, &[Action::Publish], "/robot1/**"),
                rule(Effect::Deny, &[Action::Publish], "/robot1/cmd_vel"),
                rule(Effect::Allow, &[Action::Subscribe], "/robot1/*/odom"),
            ],
        };
        let acl = mosquitto_acl(&[("/robot1/talker".into(), talker)], "ferry").unwrap();
        for line in [
            "user /robot1/talker",
            "topic readwrite ferry/0/@disc/#",
            "topic write ferry/0/chatter",
            "topic write ferry/0/robot1/#",
            "topic deny ferry/0/robot1/cmd_vel",
            "topic read ferry/0/robot1/+/odom",
        ] {
            assert!(acl.lines().any(|l| l == line), "{line} missing:\n{acl}");
        }
        // Not every name: no history, no services through the broker (the
        // runtimes would check no grant there).
        assert!(
            !acl.contains("@req") && !acl.contains("@rep") && !acl.contains("@hist"),
            "{acl}"
        );
    }

    #[test]
    fn a_wildcard_first_segment_does_not_open_the_control_topics() {
        // Three segments match @req/<participant>/<entity>.
        let g = Grants {
            domains: Some(vec![0]),
            rules: vec![rule(Effect::Allow, &[Action::Publish], "/*/*/*")],
        };
        let acl = mosquitto_acl(&[("/w".into(), g)], "ferry").unwrap();
        for line in [
            "topic write ferry/0/+/+/+",
            "topic deny ferry/0/@hist/#",
            "topic deny ferry/0/@req/#",
            "topic deny ferry/0/@rep/#",
        ] {
            assert!(acl.lines().any(|l| l == line), "{line} missing:\n{acl}");
        }
        // May serve everything (reads requests) but a wildcard would let it
        // write requests too: refused, with the enclave named.
        let g = Grants {
            domains: Some(vec![0]),
            rules: vec![
                rule(Effect::Allow, &[Action::Serve], "/**"),
                rule(Effect::Allow, &[Action::Publish], "/*/*/status"),
            ],
        };
        let e = mosquitto_acl(&[("/srv".into(), g)], "ferry").unwrap_err();
        assert!(matches!(e, AclError::ControlTopic { .. }), "{e}");
        // Two segments cannot match a control topic: nothing to deny.
        let g = Grants {
            domains: Some(vec![0]),
            rules: vec![rule(Effect::Allow, &[Action::Publish], "/*/status")],
        };
        let acl = mosquitto_acl(&[("/w".into(), g)], "ferry").unwrap();
        assert!(!acl.contains("deny"), "{acl}");
        assert!(mosquitto_acl(&[("/a b".into(), Grants::default())], "ferry").is_err());
    }

    #[test]
    fn services_every_domain_and_wildcards_at_the_root_are_said() {
        let g = Grants {
            domains: None,
            rules: vec![
                rule(Effect::Allow, &[Action::Call, Action::Serve], "/srv/**"),
                rule(Effect::Allow, &[Action::Subscribe, Action::Publish], "/**"),
            ],
        };
        let acl = mosquitto_acl(&[("/ops".into(), g)], "fleet").unwrap();
        for line in [
            "topic readwrite fleet/+/@hist/#",
            "topic readwrite fleet/+/#",
        ] {
            assert!(acl.lines().any(|l| l == line), "{line} missing:\n{acl}");
        }
        // Services on /srv/** only: not through the broker, and the /**
        // data grant must not open them either.
        assert!(
            acl.lines().any(|l| l == "topic deny fleet/+/@req/#"),
            "{acl}"
        );
        let all = Grants {
            domains: None,
            rules: vec![rule(Effect::Allow, &[Action::Call, Action::Serve], "/**")],
        };
        let acl = mosquitto_acl(&[("/ops".into(), all)], "fleet").unwrap();
        for line in [
            "topic readwrite fleet/+/@req/#",
            "topic readwrite fleet/+/@rep/#",
        ] {
            assert!(acl.lines().any(|l| l == line), "{line} missing:\n{acl}");
        }
    }

    #[test]
    fn what_a_filter_cannot_say_is_refused_for_an_allow_and_widened_for_a_deny() {
        let allow = Grants {
            domains: Some(vec![3]),
            rules: vec![rule(Effect::Allow, &[Action::Subscribe], "/cam*")],
        };
        let e = mosquitto_acl(&[("/a".into(), allow)], "ferry").unwrap_err();
        assert!(e.to_string().contains("/cam*"), "{e}");
        let mid = Grants {
            domains: Some(vec![3]),
            rules: vec![rule(Effect::Allow, &[Action::Publish], "/a/**/b")],
        };
        assert!(mosquitto_acl(&[("/a".into(), mid)], "ferry").is_err());
        let deny = Grants {
            domains: Some(vec![3]),
            rules: vec![
                rule(Effect::Allow, &[Action::Subscribe], "/x/**"),
                rule(Effect::Deny, &[Action::Subscribe], "/x/secret*"),
            ],
        };
        let acl = mosquitto_acl(&[("/a".into(), deny)], "ferry").unwrap();
        assert!(acl.lines().any(|l| l == "topic deny ferry/3/x/+"), "{acl}");
        assert!(mosquitto_acl(&[], "a+b").is_err());
    }
}
