//! What endpoints' DDS listeners tell Rust: QoS conflicts with remote
//! endpoints (DDS's offered / requested incompatible QoS status), and a
//! writer's matched-reader count.

use std::ffi::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::ffi;

/// A QoS conflict DDS found between one of this process's endpoints and a
/// remote endpoint on its topic: the two are not matched.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QosConflict {
    /// The last policy in conflict, by ROS 2's name where ROS 2 has one
    /// (`reliability`, `durability`, `deadline`, `liveliness`), else DDS's.
    pub policy: &'static str,
    /// Conflicts this endpoint has had so far.
    pub total: u32,
    /// The local endpoint (for [`crate::matched_guids`]).
    pub(crate) entity: ffi::Entity,
}

/// Told of each [`QosConflict`], on a Cyclone thread (keep it short; work
/// that reads DDS state or waits belongs off that thread).
pub type OnConflict = Box<dyn Fn(QosConflict) + Send + Sync>;

/// The name of DDS QoS policy `id` (`dds_qos_policy_id_t`).
pub fn policy_name(id: u32) -> &'static str {
    match id {
        1 => "user_data",
        2 => "durability",
        3 => "presentation",
        4 => "deadline",
        5 => "latency_budget",
        6 => "ownership",
        7 => "ownership_strength",
        8 => "liveliness",
        9 => "time_based_filter",
        10 => "partition",
        11 => "reliability",
        12 => "destination_order",
        13 => "history",
        14 => "resource_limits",
        21 => "lifespan",
        24 => "type_consistency",
        25 => "data_representation",
        _ => "another policy",
    }
}

/// The callback and the C struct pointing at it (boxed: the C side keeps
/// a pointer until the endpoint is deleted).
pub(crate) struct ConflictCtx {
    raw: ffi::Incompatible,
    on_conflict: OnConflict,
}

// SAFETY: `raw.ctx` points at this same boxed value, which only Cyclone's
// listener reads (shared, immutable); the callback is Send + Sync.
unsafe impl Send for ConflictCtx {}
// SAFETY: as above.
unsafe impl Sync for ConflictCtx {}

impl ConflictCtx {
    pub(crate) fn new(on_conflict: OnConflict) -> Box<ConflictCtx> {
        let mut b = Box::new(ConflictCtx {
            raw: ffi::Incompatible {
                cb: on_incompatible,
                ctx: std::ptr::null_mut(),
            },
            on_conflict,
        });
        b.raw.ctx = std::ptr::from_mut(&mut *b).cast();
        b
    }

    /// What the C side is given.
    pub(crate) fn raw(&self) -> *const ffi::Incompatible {
        &self.raw
    }
}

/// Told of a writer's new count of matched readers (but those its ignore
/// key leaves out), on the thread that counted (Cyclone's, or the one
/// creating the writer); keep it short.
pub type OnReaders = Box<dyn Fn(usize) + Send + Sync>;

/// What a writer's listener reports besides its count.
#[derive(Default)]
pub struct WriterHooks {
    /// Readers whose QoS conflicts with the writer's.
    pub on_conflict: Option<OnConflict>,
    /// The count of matched readers changed.
    pub on_readers: Option<OnReaders>,
}

/// A boxed [`OnReaders`] the C side points at (through `MatchCtx::ctx`).
pub(crate) struct ReadersCtx(pub(crate) OnReaders);

/// `MatchCtx::on_change`.
pub(crate) extern "C" fn on_readers(ctx: *mut c_void, count: i32) {
    // SAFETY: `ctx` is the boxed `ReadersCtx` of the writer, freed only
    // after the writer is deleted (its listener stopped).
    let ctx = unsafe { &*(ctx as *const ReadersCtx) };
    let _running = crate::InHandler::enter();
    let n = usize::try_from(count).unwrap_or(0);
    if catch_unwind(AssertUnwindSafe(|| (ctx.0)(n))).is_err() {
        tracing::error!("a DDS matched-readers handler panicked");
    }
}

/// The C pointer of an optional context (NULL: no listener).
pub(crate) fn raw_of(c: Option<&ConflictCtx>) -> *const ffi::Incompatible {
    c.map_or(std::ptr::null(), ConflictCtx::raw)
}

extern "C" fn on_incompatible(ctx: *mut c_void, entity: ffi::Entity, policy: u32, total: u32) {
    // SAFETY: `ctx` is the boxed `ConflictCtx` given with the endpoint,
    // freed only after the endpoint is deleted (its listener stopped).
    let ctx = unsafe { &*(ctx as *const ConflictCtx) };
    let _running = crate::InHandler::enter();
    let conflict = QosConflict {
        policy: policy_name(policy),
        total,
        entity,
    };
    // A panic must not cross into C.
    if catch_unwind(AssertUnwindSafe(|| (ctx.on_conflict)(conflict))).is_err() {
        tracing::error!("a DDS QoS-conflict handler panicked");
    }
}

type Job = Box<dyn FnOnce() + Send>;

/// Runs `job` on ferry-dds's conflict thread, in order: work a QoS conflict
/// needs (reading DDS discovery, waiting for ROS 2's graph) off Cyclone's
/// handler threads. At most 256 wait; more are dropped (logged): a peer
/// can cause conflicts at will, and their reports must stay bounded.
pub(crate) fn examine(job: impl FnOnce() + Send + 'static) {
    static WORKER: std::sync::OnceLock<Option<std::sync::mpsc::SyncSender<Job>>> =
        std::sync::OnceLock::new();
    let worker = WORKER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Job>(256);
        std::thread::Builder::new()
            .name("ferry-dds-conflicts".into())
            .spawn(move || {
                for job in rx {
                    if catch_unwind(AssertUnwindSafe(job)).is_err() {
                        tracing::error!("examining a DDS QoS conflict panicked");
                    }
                }
            })
            .ok()
            .map(|_| tx)
    });
    let sent = worker
        .as_ref()
        .is_some_and(|tx| tx.try_send(Box::new(job)).is_ok());
    if !sent {
        tracing::debug!("a DDS QoS conflict was not examined (too many at once)");
    }
}
