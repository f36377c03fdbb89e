//! One error enum per operation; every variant names the cause and a remedy.

use std::time::Duration;

use crate::config::ConfigError;

/// Creating a node, publisher, subscriber, service or client failed.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// A node, topic or service name breaks the naming rules.
    #[error("invalid name `{name}`: {why}")]
    InvalidName {
        /// The name given.
        name: String,
        /// Which rule it breaks.
        why: &'static str,
    },
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The runtime could not open its sockets.
    #[error("cannot start the ferry runtime: {what}: {source} (is another program holding the port, or is the network down?)")]
    Io {
        /// What was being opened.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// This runtime's identity could not be loaded (security mode
    /// `enforce`, or a broken one under `permissive`).
    #[error("security mode {mode}: {why}")]
    Security {
        /// The mode asked for.
        mode: ferry_security::Mode,
        /// What failed, with the remedy.
        why: String,
    },
    /// The grants of this runtime's enclave do not allow the port.
    #[error("permission denied: enclave {enclave} may not {action} `{name}` (see its grants with `ferry security check KEYSTORE {enclave}`; grant it in the policy and run `ferry security create-permissions`)")]
    PermissionDenied {
        /// This runtime's enclave.
        enclave: String,
        /// What the port would do.
        action: ferry_security::Action,
        /// The port's fully qualified name.
        name: String,
    },
    /// The MQTT broker of the `[mqtt]` section could not be used
    /// (`on_unreachable = "fail"`, or the embedded broker did not start).
    #[error("MQTT broker {url}: {why} (check `mqtt.broker`, or set `mqtt.on_unreachable = \"retry\"` to start without it)")]
    Broker {
        /// The broker as configured.
        url: String,
        /// What failed.
        why: String,
    },
    /// The `[ros2]` DDS path could not start (or ferry was built without it).
    #[error("ROS 2 (DDS) path, domain {domain}: {why}")]
    Ros2 {
        /// The DDS domain.
        domain: u16,
        /// What failed, with the remedy.
        why: String,
    },
    /// The `[zenoh]` path could not start (or ferry was built without it).
    #[error("Zenoh path, domain {domain}: {why}")]
    Zenoh {
        /// The ROS domain of its keys.
        domain: u16,
        /// What failed, with the remedy.
        why: String,
    },
}

/// Encoding a message failed.
#[derive(Debug, thiserror::Error, Clone)]
#[error("cannot encode `{type_name}` as CDR: {reason}")]
pub struct EncodeError {
    /// The message type.
    pub type_name: String,
    /// What the encoder said.
    pub reason: String,
}

/// Decoding received bytes failed.
#[derive(Debug, thiserror::Error, Clone)]
pub enum DecodeError {
    /// The 4-byte CDR encapsulation header is missing or unknown.
    #[error("not CDR: encapsulation header {0:02x?} (expected 00 01 for little endian or 00 00 for big endian)")]
    Encapsulation(Vec<u8>),
    /// The body does not match the type.
    #[error("cannot decode `{type_name}` from {len} bytes: {reason} (does the publisher use the same type definition?)")]
    Body {
        /// The expected type.
        type_name: String,
        /// Body length.
        len: usize,
        /// What the decoder said.
        reason: String,
    },
}

/// Publishing a sample failed.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The message could not be encoded for a network path.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// A bounded string or sequence is over its bound: nothing was sent.
    #[error("{type_name} not published: {error}")]
    OutOfBounds {
        /// The message type.
        type_name: String,
        /// Which field, and by how much.
        error: BoundsError,
    },
    /// keep_all + reliable: a subscriber did not drain its queue in time.
    #[error("a reliable keep_all subscriber ({remote}) did not accept the sample within {waited:?}: it is too slow or stalled; use keep_last or a larger queue")]
    Blocked {
        /// The slow subscriber.
        remote: String,
        /// How long publish waited.
        waited: Duration,
    },
}

/// Receiving a sample failed.
#[derive(Debug, thiserror::Error, Clone, PartialEq, Eq)]
pub enum RecvError {
    /// Nothing arrived within the timeout.
    #[error("no sample within {0:?}")]
    Timeout(Duration),
    /// The subscriber uses a callback; samples are not queued for `recv`.
    #[error(
        "this subscriber delivers to a callback; create it without `.callback(..)` to use recv"
    )]
    CallbackMode,
}

/// A service call failed; never hangs past its timeout.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// No service with that name (and a matching type) appeared in time.
    #[error("no service `{service}` is available (waited {waited:?}); is the server running, in the same domain, with the same request/response types?")]
    NoService {
        /// The service name.
        service: String,
        /// How long the call waited for it.
        waited: Duration,
    },
    /// The service did not answer in time.
    #[error("service `{service}` did not answer within {timeout:?}")]
    Timeout {
        /// The service name.
        service: String,
        /// The call's timeout.
        timeout: Duration,
    },
    /// The service went away while the call was in flight.
    #[error("service `{service}` went away during the call (its process exited or its connection broke)")]
    ServiceGone {
        /// The service name.
        service: String,
    },
    /// The service handler failed and said why.
    #[error("service `{service}` failed: {message}")]
    Remote {
        /// The service name.
        service: String,
        /// The handler's error message.
        message: String,
    },
    /// The request could not be encoded.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// The response could not be decoded.
    #[error(transparent)]
    Decode(#[from] DecodeError),
}

/// A bounded string or sequence holds more than its bound (`string<=10`,
/// `int32[<=3]`): ROS 2 refuses to publish it, and so does ferry rather
/// than truncate it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{path}` holds {len} {unit}, over its bound of {bound}: shorten it (the definition allows at most {bound})")]
pub struct BoundsError {
    /// The field, e.g. `poses[3].frame_id`.
    pub path: String,
    /// What it holds.
    pub len: usize,
    /// The bound.
    pub bound: u64,
    /// `elements`, `bytes` or `UTF-16 units`.
    pub unit: &'static str,
}

impl BoundsError {
    /// The same error seen from the message holding `field` (element
    /// `index` of it, for a sequence).
    pub fn within(mut self, field: &str, index: Option<usize>) -> Self {
        self.path = match index {
            Some(i) => format!("{field}[{i}].{}", self.path),
            None => format!("{field}.{}", self.path),
        };
        self
    }
}
