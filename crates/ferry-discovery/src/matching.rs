//! Whether two endpoints may be connected, with ROS 2's QoS rules.

use std::fmt;
use std::time::Duration;

use ferry_wire::beacon::EndpointRecord;
use ferry_wire::{Durability, EndpointKind, Qos, Reliability};

/// A QoS policy that made a pair incompatible.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum QosPolicy {
    /// Offered best_effort, requested reliable.
    Reliability,
    /// Offered volatile, requested transient_local.
    Durability,
    /// Offered deadline longer than requested.
    Deadline,
    /// Offered liveliness lease longer than requested.
    Liveliness,
}

impl fmt::Display for QosPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Reliability => "reliability (offered best_effort, requested reliable)",
            Self::Durability => "durability (offered volatile, requested transient_local)",
            Self::Deadline => "deadline (offered period longer than requested)",
            Self::Liveliness => "liveliness (offered lease longer than requested)",
        })
    }
}

/// Why a pair on the same topic is not connected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Incompatibility {
    /// Their QoS policies conflict.
    Qos(Vec<QosPolicy>),
    /// Their message types differ (name or structure).
    Type {
        /// The writer's type name.
        offered: String,
        /// The reader's type name.
        requested: String,
    },
}

impl fmt::Display for Incompatibility {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Qos(p) => {
                write!(f, "incompatible QoS: ")?;
                for (i, p) in p.iter().enumerate() {
                    if i > 0 {
                        write!(f, ", ")?;
                    }
                    write!(f, "{p}")?;
                }
                Ok(())
            }
            Self::Type { offered, requested } if offered == requested => write!(
                f,
                "incompatible type: both say `{offered}` but their definitions differ"
            ),
            Self::Type { offered, requested } => {
                write!(
                    f,
                    "incompatible type: offered `{offered}`, requested `{requested}`"
                )
            }
        }
    }
}

/// Outcome of matching a writer (publisher/client) with a reader
/// (subscriber/service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum MatchOutcome {
    /// Not related: different topic or kinds that never pair.
    Unrelated,
    /// Same topic but may not be connected.
    Incompatible(Incompatibility),
    /// Connect them.
    Matched,
}

/// ROS 2 request-vs-offered check: `offered` is the writer's QoS.
pub fn check_qos(offered: &Qos, requested: &Qos) -> Result<(), Vec<QosPolicy>> {
    let mut bad = Vec::new();
    if offered.reliability == Reliability::BestEffort
        && requested.reliability == Reliability::Reliable
    {
        bad.push(QosPolicy::Reliability);
    }
    if offered.durability == Durability::Volatile
        && requested.durability == Durability::TransientLocal
    {
        bad.push(QosPolicy::Durability);
    }
    if longer(offered.deadline, requested.deadline) {
        bad.push(QosPolicy::Deadline);
    }
    if longer(offered.liveliness_lease, requested.liveliness_lease) {
        bad.push(QosPolicy::Liveliness);
    }
    if bad.is_empty() {
        Ok(())
    } else {
        Err(bad)
    }
}

/// `None` means infinite: offered infinite vs requested finite is "longer".
fn longer(offered: Option<Duration>, requested: Option<Duration>) -> bool {
    match (offered, requested) {
        (_, None) => false,
        (None, Some(_)) => true,
        (Some(o), Some(r)) => o > r,
    }
}

/// Decides whether `writer` may send to `reader`.
pub fn match_endpoints(writer: &EndpointRecord, reader: &EndpointRecord) -> MatchOutcome {
    let pair_ok = matches!(
        (writer.kind, reader.kind),
        (EndpointKind::Publisher, EndpointKind::Subscriber)
            | (EndpointKind::Client, EndpointKind::Service)
    );
    if !pair_ok || writer.topic != reader.topic {
        return MatchOutcome::Unrelated;
    }
    let any = writer.type_hash.is_any() || reader.type_hash.is_any();
    if !any && (writer.type_name != reader.type_name || writer.type_hash != reader.type_hash) {
        return MatchOutcome::Incompatible(Incompatibility::Type {
            offered: writer.type_name.clone(),
            requested: reader.type_name.clone(),
        });
    }
    match check_qos(&writer.qos, &reader.qos) {
        Ok(()) => MatchOutcome::Matched,
        Err(p) => MatchOutcome::Incompatible(Incompatibility::Qos(p)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferry_wire::TypeHash;

    /// A distinct hash per text.
    fn test_hash(s: &str) -> TypeHash {
        let mut h = [0u8; 32];
        for (i, b) in s.bytes().enumerate() {
            h[i % 32] = h[i % 32].wrapping_mul(31).wrapping_add(b);
        }
        TypeHash(h)
    }

    fn ep(kind: EndpointKind, qos: Qos, ty: &str) -> EndpointRecord {
        EndpointRecord {
            entity: 1,
            node: 1,
            kind,
            topic: "/chatter".into(),
            type_name: ty.into(),
            type_hash: test_hash(ty),
            qos,
        }
    }

    #[test]
    fn ros2_reliability_and_durability_rules() {
        let be = Qos::sensor_data();
        let rel = Qos::default();
        assert_eq!(check_qos(&rel, &be), Ok(()));
        assert_eq!(check_qos(&be, &rel), Err(vec![QosPolicy::Reliability]));
        assert_eq!(check_qos(&Qos::latched(), &rel), Ok(()));
        assert_eq!(
            check_qos(&rel, &Qos::latched()),
            Err(vec![QosPolicy::Durability])
        );
    }

    #[test]
    fn ros2_deadline_and_liveliness_rules() {
        let ms = Duration::from_millis;
        let d = |x| Qos::default().deadline(ms(x));
        assert_eq!(check_qos(&d(100), &d(200)), Ok(()));
        assert_eq!(check_qos(&d(200), &d(100)), Err(vec![QosPolicy::Deadline]));
        assert_eq!(
            check_qos(&Qos::default(), &d(100)),
            Err(vec![QosPolicy::Deadline])
        );
        assert_eq!(check_qos(&d(100), &Qos::default()), Ok(()));
        let l = |x| Qos::default().liveliness_lease(ms(x));
        assert_eq!(
            check_qos(&l(500), &l(100)),
            Err(vec![QosPolicy::Liveliness])
        );
    }

    #[test]
    fn types_and_kinds() {
        let w = ep(
            EndpointKind::Publisher,
            Qos::default(),
            "std_msgs/msg/String",
        );
        let r = ep(
            EndpointKind::Subscriber,
            Qos::default(),
            "std_msgs/msg/String",
        );
        assert_eq!(match_endpoints(&w, &r), MatchOutcome::Matched);
        assert_eq!(match_endpoints(&r, &w), MatchOutcome::Unrelated);
        let r2 = ep(
            EndpointKind::Subscriber,
            Qos::default(),
            "std_msgs/msg/Int32",
        );
        assert!(matches!(
            match_endpoints(&w, &r2),
            MatchOutcome::Incompatible(Incompatibility::Type { .. })
        ));
        let mut raw = r2.clone();
        raw.type_hash = TypeHash::ANY;
        assert_eq!(match_endpoints(&w, &raw), MatchOutcome::Matched);
        let mut same_name = r.clone();
        same_name.type_hash = test_hash("other layout");
        let m = match_endpoints(&w, &same_name);
        assert!(m != MatchOutcome::Matched);
        let mut other_topic = r.clone();
        other_topic.topic = "/other".into();
        assert_eq!(match_endpoints(&w, &other_topic), MatchOutcome::Unrelated);
    }
}
