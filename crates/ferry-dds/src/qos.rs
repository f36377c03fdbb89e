//! DDS QoS as ROS 2 sets it (reliability, durability, history, deadline,
//! lifespan, liveliness), the few policies ferry's ports carry.

use std::time::Duration;

use crate::ffi::RawQos;

/// Liveliness kinds (DDS; ROS 2 offers automatic and manual by topic).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Liveliness {
    /// Asserted by the participant's own traffic.
    #[default]
    Automatic,
    /// Asserted by the application for the participant.
    ManualByParticipant,
    /// Asserted by the application per writer.
    ManualByTopic,
}

/// The QoS of one DDS reader or writer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DdsQos {
    /// Reliable (true) or best effort.
    pub reliable: bool,
    /// Transient local (true: late joiners get the writer's history) or volatile.
    pub transient_local: bool,
    /// Keep all (None) or keep the last `n` samples.
    pub keep_last: Option<u32>,
    /// How long a reliable write may block on a full history.
    pub max_blocking: Duration,
    /// Deadline between samples; None: infinite.
    pub deadline: Option<Duration>,
    /// How long a sample stays valid; None: infinite.
    pub lifespan: Option<Duration>,
    /// Liveliness kind.
    pub liveliness: Liveliness,
    /// Liveliness lease; None: infinite.
    pub lease: Option<Duration>,
    /// The endpoint's user data (ROS 2 Jazzy: `typehash=RIHS01_…;`).
    pub user_data: Vec<u8>,
}

impl Default for DdsQos {
    /// ROS 2's default profile: reliable, volatile, keep last 10.
    fn default() -> Self {
        DdsQos {
            reliable: true,
            transient_local: false,
            keep_last: Some(10),
            max_blocking: Duration::from_millis(100),
            deadline: None,
            lifespan: None,
            liveliness: Liveliness::Automatic,
            lease: None,
            user_data: Vec::new(),
        }
    }
}

impl DdsQos {
    /// ROS 2's sensor-data profile: best effort, volatile, keep last 5.
    pub fn sensor_data() -> Self {
        DdsQos {
            reliable: false,
            keep_last: Some(5),
            ..DdsQos::default()
        }
    }

    /// The flat form the C side takes; borrows `self.user_data`.
    pub(crate) fn raw(&self) -> RawQos {
        let ns = |d: Option<Duration>| d.map_or(-1, |d| i64::try_from(d.as_nanos()).unwrap_or(-1));
        RawQos {
            reliable: i32::from(self.reliable),
            transient_local: i32::from(self.transient_local),
            keep_all: i32::from(self.keep_last.is_none()),
            depth: self
                .keep_last
                .map_or(1, |n| i32::try_from(n.max(1)).unwrap_or(i32::MAX)),
            max_blocking_ns: ns(Some(self.max_blocking)),
            deadline_ns: ns(self.deadline),
            lifespan_ns: ns(self.lifespan),
            liveliness: match self.liveliness {
                Liveliness::Automatic => 0,
                Liveliness::ManualByParticipant => 1,
                Liveliness::ManualByTopic => 2,
            },
            lease_ns: ns(self.lease),
            user_data: if self.user_data.is_empty() {
                std::ptr::null()
            } else {
                self.user_data.as_ptr()
            },
            user_data_len: self.user_data.len(),
        }
    }
}
