//! The QoS chunk of a liveliness token, as rmw_zenoh writes and reads it:
//! `R:D:H,depth:dl_s,dl_ns:ls_s,ls_ns:L,lease_s,lease_ns`, each value
//! written only where it differs from rmw_zenoh's default (reliable,
//! volatile, keep last 42, infinite deadline, lifespan and lease,
//! automatic liveliness) — ROS 2's default profile is `::,10:,:,:,,`.
//! Values are the `rmw_qos_*_policy_e` numbers.

use std::time::Duration;

use ferry_wire::types::{Durability, History, Qos, Reliability};

/// `RMW_QOS_POLICY_RELIABILITY_RELIABLE`.
pub const RELIABLE: u8 = 1;
/// `RMW_QOS_POLICY_RELIABILITY_BEST_EFFORT`.
pub const BEST_EFFORT: u8 = 2;
/// `RMW_QOS_POLICY_DURABILITY_TRANSIENT_LOCAL`.
pub const TRANSIENT_LOCAL: u8 = 1;
/// `RMW_QOS_POLICY_DURABILITY_VOLATILE`.
pub const VOLATILE: u8 = 2;
/// `RMW_QOS_POLICY_HISTORY_KEEP_LAST`.
pub const KEEP_LAST: u8 = 1;
/// `RMW_QOS_POLICY_HISTORY_KEEP_ALL`.
pub const KEEP_ALL: u8 = 2;
/// `RMW_QOS_POLICY_LIVELINESS_AUTOMATIC`.
pub const AUTOMATIC: u8 = 1;
/// rmw_zenoh's default history depth.
pub const DEFAULT_DEPTH: u64 = 42;
/// `RMW_DURATION_INFINITE` as (seconds, nanoseconds).
pub const INFINITE: (u64, u64) = (9_223_372_036, 854_775_807);

/// A token's QoS in rmw's numbers (what rmw_zenoh's graph holds).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RmwQos {
    /// `rmw_qos_reliability_policy_e`: 0 system default, 1 reliable,
    /// 2 best effort, 3 unknown, 4 best available.
    pub reliability: u8,
    /// `rmw_qos_durability_policy_e`: 0 system default, 1 transient
    /// local, 2 volatile, 3 unknown, 4 best available.
    pub durability: u8,
    /// `rmw_qos_history_policy_e`: 0 system default, 1 keep last,
    /// 2 keep all, 3 unknown.
    pub history: u8,
    /// History depth.
    pub depth: u64,
    /// Deadline (seconds, nanoseconds).
    pub deadline: (u64, u64),
    /// Lifespan (seconds, nanoseconds).
    pub lifespan: (u64, u64),
    /// `rmw_qos_liveliness_policy_e`: 0 system default, 1 automatic,
    /// 3 manual by topic, 4 unknown, 5 best available.
    pub liveliness: u8,
    /// Liveliness lease (seconds, nanoseconds).
    pub lease: (u64, u64),
}

/// Why a token's QoS chunk was refused (rmw_zenoh refuses the same).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum QosError {
    /// Fewer than the six `:`-separated policies, or a policy with fewer
    /// `,`-separated parts than it has.
    #[error("a QoS chunk has 6 `:`-separated policies (`R:D:H,depth:s,ns:s,ns:L,s,ns`)")]
    Shape,
    /// A policy value rmw does not define.
    #[error("`{value}` is not a {policy} policy")]
    Policy {
        /// Which policy.
        policy: &'static str,
        /// What was there.
        value: String,
    },
    /// A number that is not a plain unsigned decimal.
    #[error("`{0}` is not an unsigned number")]
    Number(String),
}

impl Default for RmwQos {
    /// rmw_zenoh's defaults: what an empty field means.
    fn default() -> Self {
        RmwQos {
            reliability: RELIABLE,
            durability: VOLATILE,
            history: KEEP_LAST,
            depth: DEFAULT_DEPTH,
            deadline: INFINITE,
            lifespan: INFINITE,
            liveliness: AUTOMATIC,
            lease: INFINITE,
        }
    }
}

/// A ferry duration in rmw's terms, as rmw_zenoh's `best_available_qos`
/// leaves it: none, zero (rmw's "unspecified") and anything past
/// `RMW_DURATION_INFINITE` are infinite.
fn duration(d: Option<Duration>) -> (u64, u64) {
    match d {
        Some(d) if !d.is_zero() && d < Duration::new(INFINITE.0, INFINITE.1 as u32) => {
            (d.as_secs(), u64::from(d.subsec_nanos()))
        }
        _ => INFINITE,
    }
}

fn from_rmw(d: (u64, u64)) -> Option<Duration> {
    // Infinite and rmw's "unspecified" (0, 0) are both "none" in ferry.
    if d == INFINITE || d == (0, 0) {
        None
    } else {
        Some(Duration::from_secs(d.0).saturating_add(Duration::from_nanos(d.1)))
    }
}

impl RmwQos {
    /// A ferry port's QoS in rmw's terms (liveliness automatic).
    pub fn from_ferry(q: &Qos) -> Self {
        let (history, depth) = match q.history {
            // rmw_zenoh's depth 0 is its default, 42.
            History::KeepLast(0) => (KEEP_LAST, DEFAULT_DEPTH),
            History::KeepLast(n) => (KEEP_LAST, u64::from(n)),
            History::KeepAll => (KEEP_ALL, DEFAULT_DEPTH),
        };
        RmwQos {
            reliability: match q.reliability {
                Reliability::Reliable => RELIABLE,
                Reliability::BestEffort => BEST_EFFORT,
            },
            durability: match q.durability {
                Durability::Volatile => VOLATILE,
                Durability::TransientLocal => TRANSIENT_LOCAL,
            },
            history,
            depth,
            deadline: duration(q.deadline),
            lifespan: duration(q.lifespan),
            liveliness: AUTOMATIC,
            lease: duration(q.liveliness_lease),
        }
    }

    /// The nearest ferry QoS: best effort only when rmw says so, transient
    /// local only when rmw says so, keep all or keep last `depth` (0 → 42,
    /// as rmw_zenoh does). The depth is the peer's word: whoever sizes a
    /// queue from it bounds it first.
    pub fn to_ferry(&self) -> Qos {
        let depth = u32::try_from(self.depth).unwrap_or(u32::MAX);
        Qos {
            reliability: if self.reliability == BEST_EFFORT {
                Reliability::BestEffort
            } else {
                Reliability::Reliable
            },
            history: if self.history == KEEP_ALL {
                History::KeepAll
            } else if depth == 0 {
                History::KeepLast(DEFAULT_DEPTH as u32)
            } else {
                History::KeepLast(depth)
            },
            durability: if self.durability == TRANSIENT_LOCAL {
                Durability::TransientLocal
            } else {
                Durability::Volatile
            },
            liveliness_lease: from_rmw(self.lease),
            deadline: from_rmw(self.deadline),
            lifespan: from_rmw(self.lifespan),
            transport: None,
        }
    }

    /// The token chunk.
    pub fn encode(&self) -> String {
        let d = RmwQos::default();
        let v = |differs: bool, x: u64| {
            if differs {
                x.to_string()
            } else {
                String::new()
            }
        };
        format!(
            "{}:{}:{},{}:{},{}:{},{}:{},{},{}",
            v(self.reliability != d.reliability, self.reliability.into()),
            v(self.durability != d.durability, self.durability.into()),
            v(self.history != d.history, self.history.into()),
            v(self.depth != d.depth, self.depth),
            v(self.deadline.0 != d.deadline.0, self.deadline.0),
            v(self.deadline.1 != d.deadline.1, self.deadline.1),
            v(self.lifespan.0 != d.lifespan.0, self.lifespan.0),
            v(self.lifespan.1 != d.lifespan.1, self.lifespan.1),
            v(self.liveliness != d.liveliness, self.liveliness.into()),
            v(self.lease.0 != d.lease.0, self.lease.0),
            v(self.lease.1 != d.lease.1, self.lease.1),
        )
    }

    /// Parses a token chunk as rmw_zenoh's `keyexpr_to_qos` does: six
    /// policies (more are ignored), empty = default, policies from rmw's
    /// enums only, numbers plain unsigned decimals.
    pub fn decode(chunk: &str) -> Result<Self, QosError> {
        let d = RmwQos::default();
        let parts: Vec<&str> = chunk.split(':').collect();
        if parts.len() < 6 {
            return Err(QosError::Shape);
        }
        let sub = |i: usize, n: usize| -> Result<Vec<&str>, QosError> {
            let v: Vec<&str> = parts[i].split(',').collect();
            if v.len() < n {
                Err(QosError::Shape)
            } else {
                Ok(v)
            }
        };
        let (history, deadline, lifespan, liveliness) =
            (sub(2, 2)?, sub(3, 2)?, sub(4, 2)?, sub(5, 3)?);
        let policy = |policy: &'static str, s: &str, default: u8, known: &[u8]| {
            if s.is_empty() {
                return Ok(default);
            }
            match s.parse::<u8>() {
                Ok(v) if known.contains(&v) && s == v.to_string() => Ok(v),
                _ => Err(QosError::Policy {
                    policy,
                    value: s.to_string(),
                }),
            }
        };
        let number = |s: &str, default: u64| {
            if s.is_empty() {
                return Ok(default);
            }
            if !s.bytes().all(|b| b.is_ascii_digit()) {
                return Err(QosError::Number(s.to_string()));
            }
            s.parse::<u64>()
                .map_err(|_| QosError::Number(s.to_string()))
        };
        Ok(RmwQos {
            reliability: policy("reliability", parts[0], d.reliability, &[0, 1, 2, 3, 4])?,
            durability: policy("durability", parts[1], d.durability, &[0, 1, 2, 3, 4])?,
            history: policy("history", history[0], d.history, &[0, 1, 2, 3])?,
            depth: number(history[1], d.depth)?,
            deadline: (
                number(deadline[0], d.deadline.0)?,
                number(deadline[1], d.deadline.1)?,
            ),
            lifespan: (
                number(lifespan[0], d.lifespan.0)?,
                number(lifespan[1], d.lifespan.1)?,
            ),
            liveliness: policy("liveliness", liveliness[0], d.liveliness, &[0, 1, 3, 4, 5])?,
            lease: (
                number(liveliness[1], d.lease.0)?,
                number(liveliness[2], d.lease.1)?,
            ),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ros2_profiles_as_rmw_zenoh_writes_them() {
        // The design document's: depth 10 (ROS 2's default profile), depth 7.
        assert_eq!(RmwQos::from_ferry(&Qos::default()).encode(), "::,10:,:,:,,");
        let seven = Qos::default().keep_last(7);
        assert_eq!(RmwQos::from_ferry(&seven).encode(), "::,7:,:,:,,");
        // From rmw_zenoh's qos_to_keyexpr: best effort depth 5 (sensor
        // data), transient local depth 1.
        let sensor = Qos::default().best_effort().keep_last(5);
        assert_eq!(RmwQos::from_ferry(&sensor).encode(), "2::,5:,:,:,,");
        let latched = Qos::default().transient_local().keep_last(1);
        assert_eq!(RmwQos::from_ferry(&latched).encode(), ":1:,1:,:,:,,");
        let all = Qos::default().keep_all();
        assert_eq!(RmwQos::from_ferry(&all).encode(), "::2,:,:,:,,");
        // What rmw_zenoh writes for depth 0 and a zero or endless deadline:
        // its defaults (42, infinite), so nothing.
        for odd in [
            Qos::default().keep_last(42),
            Qos {
                history: History::KeepLast(0),
                deadline: Some(Duration::ZERO),
                lifespan: Some(Duration::MAX),
                ..Qos::default()
            },
        ] {
            assert_eq!(RmwQos::from_ferry(&odd).encode(), "::,:,:,:,,");
        }
        let deadline = Qos {
            deadline: Some(Duration::from_millis(1500)),
            ..Qos::default()
        };
        assert_eq!(
            RmwQos::from_ferry(&deadline).encode(),
            "::,10:1,500000000:,:,,"
        );
    }

    #[test]
    fn chunks_decode_to_what_they_encode() {
        for q in [
            Qos::default(),
            Qos::default().best_effort().keep_last(5),
            Qos::default().transient_local().keep_all(),
            Qos {
                deadline: Some(Duration::from_millis(100)),
                lifespan: Some(Duration::from_secs(3)),
                liveliness_lease: Some(Duration::from_secs(2)),
                ..Qos::default()
            },
        ] {
            let r = RmwQos::from_ferry(&q);
            assert_eq!(RmwQos::decode(&r.encode()), Ok(r));
            assert_eq!(r.to_ferry(), q);
        }
        assert_eq!(RmwQos::decode(":::::,,"), Err(QosError::Shape));
        assert_eq!(RmwQos::decode("::,:,:,:,"), Err(QosError::Shape));
        assert!(matches!(
            RmwQos::decode("7::,:,:,:,,"),
            Err(QosError::Policy {
                policy: "reliability",
                ..
            })
        ));
        assert!(matches!(
            RmwQos::decode("::,-1:,:,:,,"),
            Err(QosError::Number(_))
        ));
        assert!(matches!(
            RmwQos::decode("::,99999999999999999999:,:,:,,"),
            Err(QosError::Number(_))
        ));
    }
}
