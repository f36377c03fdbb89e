//! The C side (`csrc/ferry_dds.c`): entity handles are Cyclone's
//! `dds_entity_t` (negative = a `dds_return_t` error code).

use std::ffi::{c_char, c_void};

/// Cyclone's entity handle, or an error code when negative.
pub type Entity = i32;

/// `DDS_RETCODE_PRECONDITION_NOT_MET`.
pub const PRECONDITION_NOT_MET: i32 = -4;

/// The QoS ferry sets, as `ferry_dds_qos` in C.
#[repr(C)]
pub struct RawQos {
    pub reliable: i32,
    pub transient_local: i32,
    pub keep_all: i32,
    pub depth: i32,
    pub max_blocking_ns: i64,
    pub deadline_ns: i64,
    pub lifespan_ns: i64,
    pub liveliness: i32,
    pub lease_ns: i64,
    pub user_data: *const u8,
    pub user_data_len: usize,
}

/// A writer's matched-reader count, as `ferry_dds_match_ctx` in C: readers
/// whose user data contains `ignore` (NUL-terminated; empty: none) are
/// left out; `on_change(ctx, count)` (optional) is told of each new count.
#[repr(C)]
pub struct MatchCtx {
    pub count: std::sync::atomic::AtomicI32,
    pub busy: std::sync::atomic::AtomicI32,
    pub ignore: [u8; 64],
    pub on_change: Option<extern "C" fn(ctx: *mut c_void, count: i32)>,
    pub ctx: *mut c_void,
}

// SAFETY: `ctx` points at the writer's boxed `ReadersCtx` (Send + Sync,
// only read), alive as long as this context; the counts are atomics.
unsafe impl Send for MatchCtx {}
// SAFETY: as above.
unsafe impl Sync for MatchCtx {}

/// One taken sample, as `ferry_dds_taken` in C.
#[repr(C)]
pub struct Taken {
    pub data: *const u8,
    pub len: usize,
    pub source_timestamp: i64,
    pub publication_handle: u64,
    pub valid_data: i32,
    pub serdata: *mut c_void,
}

/// One discovered endpoint, as `ferry_dds_endpoint` in C (valid for the
/// callback only).
#[repr(C)]
pub struct RawEndpoint {
    pub topic: *const c_char,
    pub type_name: *const c_char,
    pub guid: *const u8,
    pub participant: *const u8,
    pub user_data: *const u8,
    pub user_data_len: usize,
}

/// Receives one discovered endpoint.
pub type OnEndpoint = extern "C" fn(ctx: *mut c_void, ep: *const RawEndpoint);

/// Told of a QoS conflict: the context, the endpoint, DDS's policy id,
/// conflicts so far.
pub type OnIncompatible = extern "C" fn(ctx: *mut c_void, e: Entity, policy: u32, total: u32);

/// A QoS-conflict callback and its context, as `ferry_dds_incompatible`
/// in C (outlives the endpoint it is given to).
#[repr(C)]
pub struct Incompatible {
    pub cb: OnIncompatible,
    pub ctx: *mut c_void,
}

/// Called by Cyclone's listener thread when a reader has data.
pub type OnData = extern "C" fn(reader: Entity, ctx: *mut c_void);

extern "C" {
    pub fn ferry_dds_domain(domain: u32, max_sample_bytes: u32, extra: *const c_char) -> Entity;
    pub fn ferry_dds_participant(domain: u32, user_data: *const u8, len: usize) -> Entity;
    pub fn ferry_dds_topic(
        pp: Entity,
        topic: *const c_char,
        type_name: *const c_char,
        sertype: *mut *const c_void,
    ) -> Entity;
    pub fn ferry_dds_writer(
        pp: Entity,
        topic: Entity,
        qos: *const RawQos,
        matched: *mut MatchCtx,
        incompatible: *const Incompatible,
    ) -> Entity;
    pub fn ferry_dds_reader(
        pp: Entity,
        topic: Entity,
        qos: *const RawQos,
        cb: OnData,
        ctx: *mut c_void,
        incompatible: *const Incompatible,
    ) -> Entity;
    pub fn ferry_dds_write(wr: Entity, sertype: *const c_void, data: *const u8, len: usize) -> i32;
    pub fn ferry_dds_take(rd: Entity, out: *mut Taken, max: u32) -> i32;
    pub fn ferry_dds_release(serdata: *mut c_void);
    pub fn ferry_dds_publication(
        rd: Entity,
        handle: u64,
        guid: *mut u8,
        participant: *mut u8,
        user_data: *mut u8,
        cap: usize,
    ) -> i32;
    pub fn ferry_dds_guid(e: Entity, guid: *mut u8) -> i32;
    pub fn ferry_dds_builtin_reader(pp: Entity, writers: i32) -> Entity;
    pub fn ferry_dds_endpoints(rd: Entity, max: u32, cb: OnEndpoint, ctx: *mut c_void) -> i32;
    pub fn ferry_dds_matched(e: Entity, is_writer: i32) -> i32;
    pub fn ferry_dds_matched_guids(e: Entity, is_writer: i32, out: *mut u8, max: u32) -> i32;
    pub fn ferry_dds_strretcode(rc: i32) -> *const c_char;
    pub fn ferry_dds_write_batch(enable: i32);
    pub fn ferry_dds_flush(wr: Entity);
    pub fn ferry_dds_set_log(cb: extern "C" fn(priority: u32, msg: *const c_char, len: usize));
    pub fn ferry_dds_delete(e: Entity) -> i32;
    pub fn ferry_dds_delete_endpoint(e: Entity) -> i32;
}
