//! Ferry's metadata on MQTT messages, as MQTT 5 properties.
//!
//! A sample carries one user property, `ferry`, whose value is four fields
//! separated by single spaces:
//!
//! ```text
//! ferry = <participant hex>.<entity> <seq> <source time ns> <type name>
//! e.g.    3f2a9c01d4e5b677.3 17 1763900000000000000 std_msgs/msg/String
//! ```
//!
//! plus the content type (`application/cdr` or `application/json`). One
//! property rather than one per field: every MQTT 5 client and broker on
//! the way holds each property as strings of its own (allocated when the
//! message is built, queued, parsed and forwarded), so each extra property
//! costs on every hop of every sample. A service request carries
//! `ferry = <client>`, a response topic and 8 bytes of correlation data
//! (the request id); a failed call's reply carries `ferry.error`.
//!
//! Messages queue in the outbox as [`Meta`] — numbers and shared strings —
//! and get their properties when handed to the client, once.

use std::sync::Arc;

use bytes::Bytes;
use ferry_wire::{EndpointId, ParticipantId};
use rumqttc::v5::mqttbytes::v5::PublishProperties;

/// The user property with ferry's metadata.
pub const KEY: &str = "ferry";
/// The user property of a failed call's reply (the error text).
pub const ERROR_KEY: &str = "ferry.error";

/// What a queued message's properties are made from.
#[derive(Debug, Clone)]
pub(crate) enum Meta {
    /// No properties (discovery announcements).
    None,
    /// A sample of a cloud-scope writer.
    Sample {
        /// `<participant hex>.<entity>`, formatted once per writer.
        writer: Arc<str>,
        seq: u64,
        stamp_ns: u64,
        type_name: Arc<str>,
        /// `application/cdr` or `application/json`.
        content_type: &'static str,
    },
    /// A service request; the reply goes to `reply_to`.
    Request {
        client: Arc<str>,
        id: u64,
        reply_to: Arc<str>,
    },
    /// A service reply (an error text instead of a payload on failure).
    Reply { id: u64, error: Option<String> },
}

impl Meta {
    /// The MQTT 5 properties of the message.
    pub fn properties(&self) -> Option<PublishProperties> {
        let props = match self {
            Meta::None => return None,
            Meta::Sample {
                writer,
                seq,
                stamp_ns,
                type_name,
                content_type,
            } => {
                let (mut a, mut b) = (itoa::Buffer::new(), itoa::Buffer::new());
                let (seq, stamp) = (a.format(*seq), b.format(*stamp_ns));
                let mut v = String::with_capacity(
                    writer.len() + seq.len() + stamp.len() + type_name.len() + 3,
                );
                for part in [&**writer, " ", seq, " ", stamp, " ", &**type_name] {
                    v.push_str(part);
                }
                PublishProperties {
                    content_type: Some((*content_type).into()),
                    user_properties: vec![(KEY.into(), v)],
                    ..Default::default()
                }
            }
            Meta::Request {
                client,
                id,
                reply_to,
            } => PublishProperties {
                response_topic: Some(reply_to.to_string()),
                correlation_data: Some(Bytes::copy_from_slice(&id.to_le_bytes())),
                content_type: Some("application/cdr".into()),
                user_properties: vec![(KEY.into(), client.to_string())],
                ..Default::default()
            },
            Meta::Reply { id, error } => PublishProperties {
                correlation_data: Some(Bytes::copy_from_slice(&id.to_le_bytes())),
                content_type: Some("application/cdr".into()),
                user_properties: error
                    .iter()
                    .map(|e| (ERROR_KEY.into(), e.clone()))
                    .collect(),
                ..Default::default()
            },
        };
        Some(props)
    }
}

/// The value of user property `key`, if the message has it.
pub fn user_prop<'a>(p: &'a Option<PublishProperties>, key: &str) -> Option<&'a str> {
    p.as_ref()?
        .user_properties
        .iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
}

/// A decimal u64: digits only, no sign, no overflow.
fn decimal(s: &str) -> Option<u64> {
    if s.is_empty() {
        return None;
    }
    s.bytes().try_fold(0u64, |n, b| {
        let d = b.wrapping_sub(b'0');
        (d < 10).then_some(())?;
        n.checked_mul(10)?.checked_add(u64::from(d))
    })
}

/// `<participant hex>.<entity>`.
pub fn parse_endpoint(s: &str) -> Option<EndpointId> {
    let (p, e) = s.split_once('.')?;
    Some(EndpointId {
        participant: ParticipantId(u64::from_str_radix(p, 16).ok()?),
        entity: e.parse().ok()?,
    })
}

/// What a received sample's `ferry` property says.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SampleMeta {
    pub writer: EndpointId,
    pub seq: u64,
    pub stamp_ns: u64,
}

impl SampleMeta {
    /// Reads a sample's metadata: `Ok(None)` without a `ferry` property (a
    /// plain client's message), `Err(())` when it is malformed.
    pub fn read(p: &Option<PublishProperties>) -> Result<Option<SampleMeta>, ()> {
        let Some(v) = user_prop(p, KEY) else {
            return Ok(None);
        };
        let mut f = v.split(' ');
        let writer = f.next().and_then(parse_endpoint).ok_or(())?;
        let seq = f.next().and_then(decimal).ok_or(())?;
        let stamp_ns = f.next().and_then(decimal).ok_or(())?;
        Ok(Some(SampleMeta {
            writer,
            seq,
            stamp_ns,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(writer: &str, seq: u64, stamp_ns: u64) -> Meta {
        Meta::Sample {
            writer: writer.into(),
            seq,
            stamp_ns,
            type_name: "std_msgs/msg/String".into(),
            content_type: "application/cdr",
        }
    }

    #[test]
    fn a_sample_carries_one_property_that_reads_back() {
        let p = sample("3f2a9c01d4e5b677.3", 17, 1_763_900_000_000_000_000).properties();
        let props = p.as_ref().unwrap();
        assert_eq!(props.content_type.as_deref(), Some("application/cdr"));
        assert_eq!(
            props.user_properties,
            vec![(
                "ferry".to_string(),
                "3f2a9c01d4e5b677.3 17 1763900000000000000 std_msgs/msg/String".to_string()
            )]
        );
        assert_eq!(
            SampleMeta::read(&p),
            Ok(Some(SampleMeta {
                writer: EndpointId {
                    participant: ParticipantId(0x3f2a_9c01_d4e5_b677),
                    entity: 3
                },
                seq: 17,
                stamp_ns: 1_763_900_000_000_000_000
            }))
        );
    }

    #[test]
    fn plain_messages_have_no_metadata_and_malformed_values_are_errors() {
        assert_eq!(SampleMeta::read(&None), Ok(None));
        let with = |v: &str| {
            Some(PublishProperties {
                user_properties: vec![("other".into(), "x".into()), (KEY.into(), v.into())],
                ..Default::default()
            })
        };
        assert!(SampleMeta::read(&with("ab.1 2 3 t")).unwrap().is_some());
        assert!(SampleMeta::read(&with("ab.1 2 3")).unwrap().is_some());
        let max = format!("ab.1 {} {}", u64::MAX, u64::MAX);
        assert_eq!(
            SampleMeta::read(&with(&max)).unwrap().unwrap().seq,
            u64::MAX
        );
        for bad in [
            "",
            "ab.1",
            "ab.1 2",
            "zz.1 2 3 t",
            "ab 2 3 t",
            "ab.1 -2 3 t",
            "ab.1 2 x t",
            "ab.1  2 3 t",
            "ab.99999999999 2 3",
            "ab.1 18446744073709551616 3",
            "ab.1 +2 3",
            "\u{0}.1 2 3",
        ] {
            assert_eq!(SampleMeta::read(&with(bad)), Err(()), "{bad:?}");
        }
    }

    #[test]
    fn requests_and_replies_carry_their_id_as_correlation_data() {
        let r = Meta::Request {
            client: "ab.2".into(),
            id: 7,
            reply_to: "ferry/0/@rep/ab/2".into(),
        }
        .properties()
        .unwrap();
        assert_eq!(r.response_topic.as_deref(), Some("ferry/0/@rep/ab/2"));
        assert_eq!(r.correlation_data.as_deref(), Some(&7u64.to_le_bytes()[..]));
        assert_eq!(user_prop(&Some(r), KEY), Some("ab.2"));
        let e = Meta::Reply {
            id: 9,
            error: Some("no".into()),
        }
        .properties();
        assert_eq!(user_prop(&e, ERROR_KEY), Some("no"));
        assert!(Meta::None.properties().is_none());
    }
}
