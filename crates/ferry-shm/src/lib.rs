//! Shared memory for ferry: the same-host path.
//!
//! - [`segment`]: named segments in `/dev/shm` stamped with their owner's
//!   pid and start time, owner-only, reserved up front (a full `/dev/shm`
//!   is an error, not a SIGBUS), and [`segment::sweep_stale`], which removes
//!   the segments of processes that died (`kill -9`).
//! - [`pool`]: a writer's slots in data segments readers map read-only;
//!   grows by sample size and by count, no preconfigured maximum.
//! - [`ring`]: per-connection submission and return rings; keep_last
//!   overflow drops the reader's oldest sample without blocking the writer.
//! - [`channel`]: the writer and reader ends, samples that return their slot
//!   when dropped, and the futex doorbell a reader sleeps on.
//!
//! Why own segments rather than the `iceoryx2` crate: see
//! `docs/ARCHITECTURE.md` (shared memory).

pub mod channel;
pub mod futex;
mod hint;
pub mod pool;
pub mod ring;
pub mod segment;

pub use channel::{
    Doorbell, Loan, Published, ReaderConn, Received, RecvError, SendError, ShmSample, Writer,
    WriterConn,
};
pub use pool::PoolError;
pub use segment::{sweep_stale, Owner, Segment, ShmError, SweepReport};
