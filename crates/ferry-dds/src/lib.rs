//! DDS as a path of ferry's ports, so that ferry nodes and ROS 2 nodes
//! (rmw_cyclonedds, rmw_fastrtps) exchange messages with no bridge.
//!
//! The DDS side is Cyclone DDS (the C library rmw_cyclonedds uses, from
//! the system: Debian's `cyclonedds-dev`), through a small C file
//! (`csrc/ferry_dds.c`) that gives Cyclone a type carrying serialized CDR
//! as it is: ferry holds every sample as CDR with its encapsulation header
//! already, so a sample crosses with one copy each way and Cyclone never
//! needs the fields. Why Cyclone and not RustDDS, and what it costs:
//! `docs/DDS.md`.
//!
//! This crate is the DDS layer only: [`Participant`], [`Writer`] and
//! [`Reader`] on raw CDR with ROS 2's names ([`names`]) and QoS
//! ([`DdsQos`]); the port (which paths a ferry publisher uses) lives in
//! `ferry`.

mod conflicts;
mod ffi;
pub mod graph;
mod listener;
mod log;
pub mod names;
mod node_graph;
pub mod path;
mod qos;
mod service;

use std::collections::HashMap;
use std::ffi::{c_void, CStr, CString};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicI32, Ordering};
use std::sync::Arc;

use parking_lot::Mutex;

pub use listener::{policy_name, OnConflict, OnReaders, QosConflict, WriterHooks};
pub use node_graph::Graph;
pub use path::discovery_xml;
pub use qos::{DdsQos, Liveliness};

/// What went wrong in a DDS call, with Cyclone's own words.
#[derive(Debug, thiserror::Error)]
pub enum DdsError {
    /// Cyclone refused to create an entity.
    #[error("cannot create the DDS {what}: {text} (Cyclone DDS code {code}){hint}")]
    Create {
        /// participant, topic, writer or reader.
        what: &'static str,
        /// Cyclone's return code.
        code: i32,
        /// Cyclone's text for it.
        text: String,
        /// What to check.
        hint: &'static str,
    },
    /// A write failed (a reliable writer's history stayed full for its
    /// `max_blocking`, or the writer is gone).
    #[error("the DDS write failed: {text} (Cyclone DDS code {code})")]
    Write {
        /// Cyclone's return code.
        code: i32,
        /// Cyclone's text for it.
        text: String,
    },
    /// A query on an entity failed.
    #[error("the DDS {what} query failed: {text} (Cyclone DDS code {code})")]
    Query {
        /// What was asked.
        what: &'static str,
        /// Cyclone's return code.
        code: i32,
        /// Cyclone's text for it.
        text: String,
    },
    /// A name outside ROS 2's rules.
    #[error("`{name}` is not a valid name here: {why}")]
    Name {
        /// The name given.
        name: String,
        /// The rule.
        why: &'static str,
    },
}

fn text(code: i32) -> String {
    // SAFETY: dds_strretcode returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(ffi::ferry_dds_strretcode(code)) }
        .to_string_lossy()
        .into_owned()
}

fn created(what: &'static str, e: ffi::Entity) -> Result<ffi::Entity, DdsError> {
    if e >= 0 {
        return Ok(e);
    }
    let hint = match what {
        "participant" => " — is the domain id 0..=232 and a network interface up?",
        "topic" => " — a topic of this name with another type exists in this participant",
        _ => "",
    };
    Err(DdsError::Create {
        what,
        code: e,
        text: text(e),
        hint,
    })
}

fn cstring(s: &str) -> Result<CString, DdsError> {
    CString::new(s).map_err(|_| DdsError::Name {
        name: s.replace('\0', "\\0"),
        why: "a NUL byte in a name",
    })
}

/// The GUIDs of the endpoints matched with `e` now (readers of a writer,
/// writers of a reader; at most 1024); empty when `e` is gone.
pub(crate) fn matched_guids(e: ffi::Entity, writer: bool) -> Vec<Guid> {
    const MAX: usize = 1024;
    let mut out = vec![0u8; 16 * MAX];
    // SAFETY: room for MAX GUIDs of 16 bytes.
    let n =
        unsafe { ffi::ferry_dds_matched_guids(e, i32::from(writer), out.as_mut_ptr(), MAX as u32) };
    let n = usize::try_from(n).unwrap_or(0).min(MAX);
    out[..16 * n]
        .chunks_exact(16)
        .filter_map(|c| c.try_into().ok())
        .collect()
}

/// Turns Cyclone's write batching on or off for every writer of the
/// process: samples are packed into one datagram until it is full or
/// [`Writer::flush`] is called (more samples per second, later delivery).
/// Off by default; ferry's ports never turn it on (ddsperf's pub does, and
/// the throughput bench compares with it).
pub fn write_batching(on: bool) {
    // SAFETY: a plain flag.
    unsafe { ffi::ferry_dds_write_batch(i32::from(on)) };
}

/// A DDS GUID (16 bytes: prefix of 12 + entity id of 4); ROS 2's gid.
pub type Guid = [u8; 16];

struct Handle(ffi::Entity);

/// A writer or reader with its own publisher or subscriber.
struct EndpointHandle(ffi::Entity);

impl Drop for EndpointHandle {
    fn drop(&mut self) {
        let e = self.0;
        if e < 0 {
            return; // deleted by its owner (`Writer`)
        }
        // SAFETY: made by `ferry_dds_writer` / `_reader`, deleted once (with
        // its parent); Cyclone waits for running listeners.
        off_handler(move || unsafe {
            ffi::ferry_dds_delete_endpoint(e);
        });
    }
}

impl Drop for Handle {
    fn drop(&mut self) {
        let e = self.0;
        // SAFETY: the entity was created by this crate and is deleted once;
        // Cyclone waits for running listeners of a deleted reader.
        off_handler(move || unsafe {
            ffi::ferry_dds_delete(e);
        });
    }
}

thread_local! {
    /// This thread is running a reader's handler (a Cyclone thread).
    static IN_LISTENER: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

type Deletion = Box<dyn FnOnce() + Send>;

/// Runs `delete` now — or, on a thread running a DDS handler (where
/// Cyclone's deletes wait for that very thread: the handler of the entity
/// itself, or its cleanup of any entity), on ferry's reaper thread, in the
/// order asked. Deletes capture entity ids only: if the reaper cannot run,
/// dropping one deletes nothing (a leak, logged, never a hang).
pub(crate) fn off_handler(delete: impl FnOnce() + Send + 'static) {
    if !IN_LISTENER.with(std::cell::Cell::get) {
        delete();
        return;
    }
    static REAPER: std::sync::OnceLock<Mutex<Option<std::sync::mpsc::Sender<Deletion>>>> =
        std::sync::OnceLock::new();
    let reaper = REAPER.get_or_init(|| {
        let (tx, rx) = std::sync::mpsc::channel::<Deletion>();
        let spawned = std::thread::Builder::new()
            .name("ferry-dds-reaper".into())
            .spawn(move || rx.into_iter().for_each(|d| d()))
            .is_ok();
        Mutex::new(spawned.then_some(tx))
    });
    let sent = reaper
        .lock()
        .as_ref()
        .is_some_and(|tx| tx.send(Box::new(delete)).is_ok());
    if !sent {
        tracing::error!("a DDS entity dropped inside a DDS handler could not be deleted");
    }
}

/// A participant, and the domain it keeps alive (deleted in this order).
struct PpHandle {
    pp: Handle,
    _domain: Option<Arc<Handle>>,
}

/// The domains this process created, shared by their participants: a
/// domain is created once with ferry's settings and deleted with its last
/// participant.
static DOMAINS: Mutex<Option<HashMap<u32, std::sync::Weak<Handle>>>> = Mutex::new(None);

fn domain_handle(domain: u32, settings: &DomainSettings) -> Result<Option<Arc<Handle>>, DdsError> {
    let mut domains = DOMAINS.lock();
    let map = domains.get_or_insert_with(HashMap::new);
    if let Some(h) = map.get(&domain).and_then(std::sync::Weak::upgrade) {
        return Ok(Some(h));
    }
    let xml = cstring(&settings.config_xml)?;
    log::install();
    // SAFETY: plain values and a C string alive for the call.
    let e = unsafe { ffi::ferry_dds_domain(domain, settings.max_sample_bytes, xml.as_ptr()) };
    if e == ffi::PRECONDITION_NOT_MET {
        // Created in this process by other code: it owns it.
        return Ok(None);
    }
    let h = Arc::new(Handle(created("domain", e)?));
    map.insert(domain, Arc::downgrade(&h));
    map.retain(|_, w| w.strong_count() > 0);
    Ok(Some(h))
}

/// How this process creates a DDS domain (its first participant of the
/// domain decides; later ones share it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DomainSettings {
    /// The largest sample a peer may send (larger ones are dropped).
    pub max_sample_bytes: u32,
    /// Cyclone configuration (XML fragments) applied before the user's
    /// `CYCLONEDDS_URI`: e.g. [`discovery_xml`].
    pub config_xml: String,
}

impl Default for DomainSettings {
    fn default() -> Self {
        DomainSettings {
            max_sample_bytes: Participant::DEFAULT_MAX_SAMPLE,
            config_xml: String::new(),
        }
    }
}

/// One DDS domain participant (one per ferry runtime).
pub struct Participant {
    handle: Arc<PpHandle>,
    domain: u32,
}

impl Participant {
    /// The largest sample a peer may send by default (as ferry's own
    /// `max_frame_bytes`): 256 MiB.
    pub const DEFAULT_MAX_SAMPLE: u32 = 256 << 20;

    /// Joins DDS domain `domain` (ROS 2: `ROS_DOMAIN_ID`) with `user_data`
    /// (ROS 2: `enclave=/;`), taking samples up to [`Self::DEFAULT_MAX_SAMPLE`].
    pub fn new(domain: u32, user_data: &[u8]) -> Result<Self, DdsError> {
        Self::with_max_sample(domain, user_data, Self::DEFAULT_MAX_SAMPLE)
    }

    /// As [`Participant::new`], taking samples up to `max_sample_bytes`
    /// (larger ones are dropped by DDS; the first participant of a domain in
    /// the process sets it). `CYCLONEDDS_URI` applies on top.
    pub fn with_max_sample(
        domain: u32,
        user_data: &[u8],
        max_sample_bytes: u32,
    ) -> Result<Self, DdsError> {
        let settings = DomainSettings {
            max_sample_bytes,
            ..DomainSettings::default()
        };
        Self::with_settings(domain, user_data, &settings)
    }

    /// As [`Participant::new`], creating the domain with `settings` if this
    /// process has not yet; `CYCLONEDDS_URI` applies on top.
    pub fn with_settings(
        domain: u32,
        user_data: &[u8],
        settings: &DomainSettings,
    ) -> Result<Self, DdsError> {
        let dom = domain_handle(domain, settings)?;
        // SAFETY: plain values; the C side copies the user data.
        let e = unsafe { ffi::ferry_dds_participant(domain, user_data.as_ptr(), user_data.len()) };
        Ok(Participant {
            handle: Arc::new(PpHandle {
                pp: Handle(created("participant", e)?),
                _domain: dom,
            }),
            domain,
        })
    }

    /// The domain joined.
    pub fn domain(&self) -> u32 {
        self.domain
    }

    /// This participant's GUID.
    pub fn guid(&self) -> Result<Guid, DdsError> {
        guid_of(self.handle.pp.0)
    }

    /// The DDS topic `name` carrying DDS type `type_name` as raw CDR.
    pub fn topic(&self, name: &str, type_name: &str) -> Result<Topic, DdsError> {
        let (n, t) = (cstring(name)?, cstring(type_name)?);
        let mut sertype: *const c_void = std::ptr::null();
        // SAFETY: valid C strings; `sertype` is set on success.
        let e =
            unsafe { ffi::ferry_dds_topic(self.handle.pp.0, n.as_ptr(), t.as_ptr(), &mut sertype) };
        let e = created("topic", e)?;
        Ok(Topic {
            handle: Arc::new(Handle(e)),
            _participant: self.handle.clone(),
            sertype: Sertype(sertype),
            name: name.to_string(),
            type_name: type_name.to_string(),
        })
    }

    /// A writer of `topic` with `qos`.
    pub fn writer(&self, topic: &Topic, qos: &DdsQos) -> Result<Writer, DdsError> {
        self.writer_ignoring(topic, qos, "")
    }

    /// A writer whose [`Writer::has_readers`] leaves out readers whose user
    /// data contains `ignore` (at most 63 bytes; empty: none) — ferry's
    /// own DDS readers, which take their samples over ferry's paths.
    pub fn writer_ignoring(
        &self,
        topic: &Topic,
        qos: &DdsQos,
        ignore: &str,
    ) -> Result<Writer, DdsError> {
        self.writer_with(topic, qos, ignore, WriterHooks::default())
    }

    /// [`Self::writer_ignoring`], with `hooks` told of every reader whose
    /// QoS conflicts with this writer's (DDS's offered incompatible QoS
    /// status) and of every change of its matched-reader count.
    pub fn writer_with(
        &self,
        topic: &Topic,
        qos: &DdsQos,
        ignore: &str,
        hooks: WriterHooks,
    ) -> Result<Writer, DdsError> {
        let raw = qos.raw();
        let mut key = [0u8; 64];
        if ignore.len() >= key.len() || ignore.contains('\0') {
            return Err(DdsError::Name {
                name: ignore.to_string(),
                why: "an ignore key of at most 63 bytes without NUL",
            });
        }
        key[..ignore.len()].copy_from_slice(ignore.as_bytes());
        let readers = hooks.on_readers.map(|f| Box::new(listener::ReadersCtx(f)));
        let matched = Box::new(ffi::MatchCtx {
            count: AtomicI32::new(0),
            busy: AtomicI32::new(0),
            ignore: key,
            on_change: readers.as_ref().map(|_| listener::on_readers as _),
            ctx: readers.as_deref().map_or(std::ptr::null_mut(), |r| {
                std::ptr::from_ref(r).cast_mut().cast()
            }),
        });
        let conflict = hooks.on_conflict.map(listener::ConflictCtx::new);
        // SAFETY: `raw` borrows `qos`, alive for the call;
        // the C side copies. `matched` and `conflict` outlive the writer
        // (freed after its delete, which stops its listener).
        let e = unsafe {
            ffi::ferry_dds_writer(
                self.handle.pp.0,
                topic.handle.0,
                &raw,
                std::ptr::from_ref(&*matched).cast_mut(),
                listener::raw_of(conflict.as_deref()),
            )
        };
        Ok(Writer {
            handle: EndpointHandle(created("writer", e)?),
            matched: std::mem::ManuallyDrop::new((matched, conflict, readers)),
            topic: topic.clone(),
        })
    }

    /// A reader of `topic` with `qos`; `on_sample` runs on Cyclone's
    /// listener thread for every sample (keep it short: hand it over; never
    /// drop the reader from its own handler — deleting waits for it).
    pub fn reader<F>(&self, topic: &Topic, qos: &DdsQos, on_sample: F) -> Result<Reader, DdsError>
    where
        F: Fn(Sample) + Send + Sync + 'static,
    {
        self.reader_with(topic, qos, on_sample, None)
    }

    /// [`Self::reader`], and `on_conflict` told of every writer whose QoS
    /// conflicts with this reader's (DDS's requested incompatible QoS
    /// status).
    pub fn reader_with<F>(
        &self,
        topic: &Topic,
        qos: &DdsQos,
        on_sample: F,
        on_conflict: Option<OnConflict>,
    ) -> Result<Reader, DdsError>
    where
        F: Fn(Sample) + Send + Sync + 'static,
    {
        let ctx = Box::into_raw(Box::new(ReaderCtx {
            on_sample: Box::new(on_sample),
            conflict: on_conflict.map(listener::ConflictCtx::new),
        }));
        let raw = qos.raw();
        // SAFETY: `ctx` (and the conflict context it holds) outlives the
        // reader: `Reader` deletes the entity (which waits for a running
        // listener) before freeing it.
        let e = unsafe {
            ffi::ferry_dds_reader(
                self.handle.pp.0,
                topic.handle.0,
                &raw,
                on_data,
                ctx.cast(),
                listener::raw_of((*ctx).conflict.as_deref()),
            )
        };
        let handle = match created("reader", e) {
            Ok(e) => EndpointHandle(e),
            Err(err) => {
                // SAFETY: no reader was made: nothing else holds `ctx`.
                drop(unsafe { Box::from_raw(ctx) });
                return Err(err);
            }
        };
        Ok(Reader {
            handle: Some(handle),
            ctx,
            topic: topic.clone(),
        })
    }
}

impl Participant {
    /// What DDS discovery tells this participant of the domain's writers
    /// and readers (built-in readers, kept while the [`Discovery`] lives).
    pub fn discovery(&self) -> Result<Discovery, DdsError> {
        let reader = |writers| {
            // SAFETY: plain values.
            let e = unsafe { ffi::ferry_dds_builtin_reader(self.handle.pp.0, writers) };
            created("built-in reader", e).map(Handle)
        };
        Ok(Discovery {
            writers: reader(1)?,
            readers: reader(0)?,
            _participant: self.handle.clone(),
        })
    }
}

/// A writer or reader as DDS discovery describes it (what its participant
/// declared: unproven).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Discovered {
    /// The DDS topic name.
    pub topic: String,
    /// The DDS type name.
    pub type_name: String,
    /// Its GUID.
    pub guid: Guid,
    /// Its participant's GUID.
    pub participant: Guid,
    /// Its user data.
    pub user_data: Vec<u8>,
}

/// The domain's writers and readers as discovery knows them now.
pub struct Discovery {
    // Field order: the readers before their participant.
    writers: Handle,
    readers: Handle,
    _participant: Arc<PpHandle>,
}

impl Discovery {
    /// Most endpoints listed per call (the rest are left out).
    pub const MAX: u32 = 16384;

    /// The writers alive now (this participant's too).
    pub fn writers(&self) -> Result<Vec<Discovered>, DdsError> {
        endpoints(self.writers.0)
    }

    /// The readers alive now.
    pub fn readers(&self) -> Result<Vec<Discovered>, DdsError> {
        endpoints(self.readers.0)
    }
}

extern "C" fn collect_endpoint(ctx: *mut c_void, ep: *const ffi::RawEndpoint) {
    // SAFETY: `ctx` is the Vec handed to `ferry_dds_endpoints` below, and
    // `ep` is valid for this call (strings NUL-terminated, GUIDs 16 bytes,
    // user data `user_data_len` bytes), as the C side promises.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe {
        let out = &mut *(ctx as *mut Vec<Discovered>);
        let ep = &*ep;
        let guid16 = |p: *const u8| {
            let mut g = [0u8; 16];
            g.copy_from_slice(std::slice::from_raw_parts(p, 16));
            g
        };
        out.push(Discovered {
            topic: CStr::from_ptr(ep.topic).to_string_lossy().into_owned(),
            type_name: CStr::from_ptr(ep.type_name).to_string_lossy().into_owned(),
            guid: guid16(ep.guid),
            participant: guid16(ep.participant),
            user_data: if ep.user_data.is_null() {
                Vec::new()
            } else {
                std::slice::from_raw_parts(ep.user_data, ep.user_data_len).to_vec()
            },
        });
    }));
}

fn endpoints(reader: ffi::Entity) -> Result<Vec<Discovered>, DdsError> {
    let mut out: Vec<Discovered> = Vec::new();
    // SAFETY: `out` outlives the call; the callback only pushes to it.
    let rc = unsafe {
        ffi::ferry_dds_endpoints(
            reader,
            Discovery::MAX,
            collect_endpoint,
            std::ptr::from_mut(&mut out).cast(),
        )
    };
    if rc < 0 {
        return Err(DdsError::Query {
            what: "discovered endpoints",
            code: rc,
            text: text(rc),
        });
    }
    Ok(out)
}

fn guid_of(e: ffi::Entity) -> Result<Guid, DdsError> {
    let mut g = [0u8; 16];
    // SAFETY: `g` has the 16 bytes the C side writes.
    let rc = unsafe { ffi::ferry_dds_guid(e, g.as_mut_ptr()) };
    if rc < 0 {
        return Err(DdsError::Query {
            what: "guid",
            code: rc,
            text: text(rc),
        });
    }
    Ok(g)
}

fn matched(e: ffi::Entity, is_writer: bool) -> Result<usize, DdsError> {
    // SAFETY: plain values.
    let rc = unsafe { ffi::ferry_dds_matched(e, i32::from(is_writer)) };
    usize::try_from(rc).map_err(|_| DdsError::Query {
        what: "matched",
        code: rc,
        text: text(rc),
    })
}

/// The topic's type as Cyclone holds it (owned by Cyclone while the topic
/// lives).
#[derive(Clone, Copy)]
struct Sertype(*const c_void);
// SAFETY: Cyclone's sertypes are immutable and refcounted; the pointer is
// only passed back to Cyclone while the topic (held by every writer) lives.
unsafe impl Send for Sertype {}
// SAFETY: as above.
unsafe impl Sync for Sertype {}

/// A DDS topic of raw CDR samples.
#[derive(Clone)]
pub struct Topic {
    // Field order: the topic is deleted before its participant.
    handle: Arc<Handle>,
    _participant: Arc<PpHandle>,
    sertype: Sertype,
    name: String,
    type_name: String,
}

impl Topic {
    /// The DDS topic name (`rt/chatter`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The DDS type name (`std_msgs::msg::dds_::String_`).
    pub fn type_name(&self) -> &str {
        &self.type_name
    }
}

/// What a writer's listener uses: its match count, its conflict and
/// reader-count callbacks.
type WriterCtx = (
    Box<ffi::MatchCtx>,
    Option<Box<listener::ConflictCtx>>,
    Option<Box<listener::ReadersCtx>>,
);

/// A DDS writer of serialized CDR.
pub struct Writer {
    handle: EndpointHandle,
    /// Used by the writer's listener: freed only once the writer is
    /// deleted (see `Drop`).
    matched: std::mem::ManuallyDrop<WriterCtx>,
    topic: Topic,
}

impl Drop for Writer {
    fn drop(&mut self) {
        let e = std::mem::replace(&mut self.handle.0, -1);
        // SAFETY: taken once, here; the field is not used after.
        let matched = unsafe { std::mem::ManuallyDrop::take(&mut self.matched) };
        // The entity first (its listener stops), then the context, on the
        // reaper thread when dropped inside a handler.
        off_handler(move || {
            // SAFETY: made by `ferry_dds_writer`, deleted once here.
            let rc = unsafe { ffi::ferry_dds_delete_endpoint(e) };
            if rc < 0 {
                tracing::warn!(
                    "a DDS writer's delete failed ({}); its context is kept",
                    text(rc)
                );
                std::mem::forget(matched);
            }
        });
    }
}

impl Writer {
    /// Writes one sample: `cdr` is the serialized sample with its 4-byte
    /// encapsulation header, as every ferry path carries it.
    pub fn write(&self, cdr: &[u8]) -> Result<(), DdsError> {
        if cdr.len() < 4 || u32::try_from(cdr.len()).is_err() {
            return Err(DdsError::Write {
                code: 0,
                text: format!(
                    "{} bytes is not a serialized sample (a 4-byte encapsulation header, \
                     at most 4 GiB)",
                    cdr.len()
                ),
            });
        }
        // SAFETY: the sertype belongs to this writer's topic (alive: held in
        // `self.topic`); the C side copies `cdr`.
        let rc = unsafe {
            ffi::ferry_dds_write(self.handle.0, self.topic.sertype.0, cdr.as_ptr(), cdr.len())
        };
        if rc < 0 {
            return Err(DdsError::Write {
                code: rc,
                text: text(rc),
            });
        }
        Ok(())
    }

    /// Sends what [`write_batching`] has packed so far.
    pub fn flush(&self) {
        // SAFETY: a writer this crate made, alive while `self` is.
        unsafe { ffi::ferry_dds_flush(self.handle.0) };
    }

    /// Readers matched now.
    pub fn matched(&self) -> Result<usize, DdsError> {
        matched(self.handle.0, true)
    }

    /// Whether any reader is matched (but those a
    /// [`Participant::writer_ignoring`] key leaves out), as the last match
    /// event said: one atomic load, for the publish path.
    pub fn has_readers(&self) -> bool {
        self.readers() > 0
    }

    /// The matched readers (but those a [`Participant::writer_ignoring`]
    /// key leaves out), as the last match event said.
    pub fn readers(&self) -> usize {
        usize::try_from(self.matched.0.count.load(Ordering::Relaxed)).unwrap_or(0)
    }

    /// This writer's GUID (ROS 2's gid of the publisher).
    pub fn guid(&self) -> Result<Guid, DdsError> {
        guid_of(self.handle.0)
    }

    /// The topic written.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }
}

/// One sample a reader took.
#[derive(Debug, Clone)]
pub struct Sample {
    /// The serialized sample with its encapsulation header.
    pub cdr: Vec<u8>,
    /// The writer's source timestamp, ns since the Unix epoch.
    pub source_timestamp_ns: i64,
    /// The writer's instance handle (see [`Reader::publication`]).
    pub publication: u64,
    /// The reader that took it.
    reader: ffi::Entity,
}

impl Sample {
    /// The matched writer that sent this sample, as discovery describes it
    /// (usable inside the reader's handler, where the [`Reader`] itself is
    /// not at hand).
    pub fn writer(&self) -> Result<Publication, DdsError> {
        publication_of(self.reader, self.publication)
    }

    /// Whether writer `handle` is still matched with the reader that took
    /// this sample.
    pub(crate) fn still_matched(&self, handle: u64) -> bool {
        publication_of(self.reader, handle).is_ok()
    }
}

/// A matched writer as discovery describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Publication {
    /// The writer's GUID.
    pub guid: Guid,
    /// Its participant's GUID.
    pub participant: Guid,
    /// Its user data.
    pub user_data: Vec<u8>,
}

type OnSample = Box<dyn Fn(Sample) + Send + Sync>;

struct ReaderCtx {
    on_sample: OnSample,
    conflict: Option<Box<listener::ConflictCtx>>,
}

/// Marks the handler as running on this thread until dropped.
pub(crate) struct InHandler(bool);

impl InHandler {
    pub(crate) fn enter() -> Self {
        InHandler(IN_LISTENER.with(|f| f.replace(true)))
    }
}

impl Drop for InHandler {
    fn drop(&mut self) {
        IN_LISTENER.with(|f| f.set(self.0));
    }
}

extern "C" fn on_data(reader: ffi::Entity, ctx: *mut c_void) {
    // SAFETY: `ctx` is the `ReaderCtx` registered with this reader, alive
    // until the reader is deleted (see `Participant::reader`).
    let ctx = unsafe { &*(ctx as *const ReaderCtx) };
    let _running = InHandler::enter();
    const BATCH: usize = 16;
    loop {
        let mut taken: [std::mem::MaybeUninit<ffi::Taken>; BATCH] =
            [const { std::mem::MaybeUninit::uninit() }; BATCH];
        // SAFETY: room for BATCH samples; the C side fills `n` of them.
        let n = unsafe { ffi::ferry_dds_take(reader, taken.as_mut_ptr().cast(), BATCH as u32) };
        let Ok(n) = usize::try_from(n) else {
            return;
        };
        for t in &taken[..n] {
            // SAFETY: the first `n` entries were written by the C side.
            let t = unsafe { t.assume_init_ref() };
            if t.valid_data != 0 {
                let cdr = if t.data.is_null() || t.len == 0 {
                    Vec::new()
                } else {
                    // SAFETY: `data` holds `len` bytes until released below.
                    unsafe { std::slice::from_raw_parts(t.data, t.len) }.to_vec()
                };
                let sample = Sample {
                    cdr,
                    source_timestamp_ns: t.source_timestamp,
                    publication: t.publication_handle,
                    reader,
                };
                // A panic must not cross into C.
                if catch_unwind(AssertUnwindSafe(|| (ctx.on_sample)(sample))).is_err() {
                    tracing::error!("a DDS sample handler panicked; the sample is lost");
                }
            }
            // SAFETY: each taken sample is released once.
            unsafe { ffi::ferry_dds_release(t.serdata) };
        }
        if n < BATCH {
            return;
        }
    }
}

/// A DDS reader of serialized CDR; its handler runs until it is dropped.
pub struct Reader {
    handle: Option<EndpointHandle>,
    ctx: *mut ReaderCtx,
    topic: Topic,
}

// SAFETY: `ctx` is only read (by Cyclone's listener thread, and freed on
// drop after the entity); the handler it holds is Send + Sync.
unsafe impl Send for Reader {}
// SAFETY: as above.
unsafe impl Sync for Reader {}

impl Reader {
    /// Writers matched now.
    pub fn matched(&self) -> Result<usize, DdsError> {
        matched(self.entity(), false)
    }

    /// This reader's GUID (ROS 2's gid of the subscription).
    pub fn guid(&self) -> Result<Guid, DdsError> {
        guid_of(self.entity())
    }

    /// The topic read.
    pub fn topic(&self) -> &Topic {
        &self.topic
    }

    /// The matched writer behind a sample's `publication` handle.
    pub fn publication(&self, handle: u64) -> Result<Publication, DdsError> {
        publication_of(self.entity(), handle)
    }

    fn entity(&self) -> ffi::Entity {
        self.handle.as_ref().map_or(-1, |h| h.0)
    }
}

fn publication_of(reader: ffi::Entity, handle: u64) -> Result<Publication, DdsError> {
    {
        let (mut guid, mut participant) = ([0u8; 16], [0u8; 16]);
        let mut user_data = vec![0u8; 512];
        loop {
            // SAFETY: buffers of the sizes given.
            let rc = unsafe {
                ffi::ferry_dds_publication(
                    reader,
                    handle,
                    guid.as_mut_ptr(),
                    participant.as_mut_ptr(),
                    user_data.as_mut_ptr(),
                    user_data.len(),
                )
            };
            let len = usize::try_from(rc).map_err(|_| DdsError::Query {
                what: "matched publication",
                code: rc,
                text: text(rc),
            })?;
            // Longer than the buffer: once more with room (bounded: DDS
            // user data fits a discovery message).
            if len > user_data.len() && len <= 1 << 16 {
                user_data.resize(len, 0);
                continue;
            }
            user_data.truncate(len);
            break;
        }
        Ok(Publication {
            guid,
            participant,
            user_data,
        })
    }
}

impl Drop for Reader {
    fn drop(&mut self) {
        let Some(handle) = self.handle.take() else {
            return;
        };
        let e = handle.0;
        std::mem::forget(handle);
        let ctx = SendCtx(self.ctx);
        // The entity first (no handler runs after), then the context; on
        // a handler's thread both happen on the reaper thread.
        off_handler(move || {
            let ctx = ctx;
            // SAFETY: made by `ferry_dds_reader`, deleted once here.
            let rc = unsafe { ffi::ferry_dds_delete_endpoint(e) };
            if rc < 0 {
                // Not deleted by us (a delete elsewhere may still wait for
                // a running handler): the context stays, leaked.
                tracing::warn!(
                    "a DDS reader's delete failed ({}); its context is kept",
                    text(rc)
                );
                return;
            }
            // SAFETY: made by `Box::into_raw` in `Participant::reader`; the
            // reader is deleted, so Cyclone no longer holds it.
            drop(unsafe { Box::from_raw(ctx.0) });
        });
    }
}

/// The context pointer on its way to the thread that frees it.
struct SendCtx(*mut ReaderCtx);
// SAFETY: only the deleting thread uses it, after the reader is gone.
unsafe impl Send for SendCtx {}
