//! ROS 2 services over Zenoh as rmw_zenoh carries them: a service is a
//! queryable on `<domain>/<name>/<service type>/<service type hash>`
//! (declared complete) with an `SS` token; a client is a querier on the
//! same key (every complete queryable, no consolidation) with an `SC`
//! token. A request's attachment carries the client's sequence number,
//! source time and GID (its `SC` token's); the reply echoes that sequence
//! number and GID. Dropping the query ends the call for the client.
//!
//! **A ferry service** answers every query on its key: the request goes to
//! its handler as from a connection per client GID (what the client's
//! token says it is), under a request id of the service's own (the
//! sequence numbers of different clients collide), at most
//! [`MAX_PENDING`] unanswered at once. A failed call answers with a Zenoh
//! error reply carrying the service's message (an rmw_zenoh client logs
//! it; a ferry client fails the call with it).
//!
//! **A ferry client** calls over Zenoh only when no path of its own reaches
//! a service ([`ferry_transport::transport::Link::reaches_reader`] is false
//! here, so a direct link wins): the services it counts are the `SS`
//! tokens on its name and type that are not ferry services it reaches,
//! once Zenoh routes to one. A reply finishes the call it was asked for
//! (each query has its own callback: a reply can only finish its own
//! call), and only when its attachment echoes the call. A query that ends
//! without a reply — every service it reached went away — fails the call
//! at once (`ServiceGone`), not after the timeout.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use ferry_transport::message::Payload;
use ferry_transport::priority::{Applied, Packets, Priority, PriorityError};
use ferry_transport::stats::ConnStats;
use ferry_transport::transport::{
    lookup_reader, InFrame, InboundConn, Inbox, Link, OutFrame, Replier, ReplyBody, ReplySink,
    SendError,
};
use ferry_wire::frame::FrameKind;
use ferry_wire::{EndpointId, Qos, TransportKind, TypeHash};
use parking_lot::Mutex;
use zenoh::bytes::ZBytes;
use zenoh::handlers::CallbackDrop;
use zenoh::liveliness::LivelinessToken;
use zenoh::query::{ConsolidationMode, Querier, Query, QueryTarget, Reply};
use zenoh::sample::Locality;
use zenoh::Wait;

use crate::graph::Graph;
use crate::path::{new_conn, Need, Reached, ReaderEntry, ZenohError, ZenohPath, ZENOH_ENDPOINT};
use crate::token::EntityKind;
use crate::Attachment;

/// Requests awaiting their reply, per service: more are refused ("busy")
/// until replies make room.
pub const MAX_PENDING: usize = 4096;

/// Most clients one service keeps a connection record for.
const MAX_CLIENTS: usize = 1024;

/// Most calls one client has in flight over Zenoh: a query lasts until
/// every service it reached answered or the 600 s timeout, even when the
/// call timed out first, so a service that never finishes its queries
/// would otherwise pile them up.
const MAX_IN_FLIGHT: usize = 1024;

/// How long a call may wait for its replies (rmw_zenoh's default
/// `queries_default_timeout`); a ferry client's own timeout is usually
/// shorter and ends the call first.
const QUERY_TIMEOUT: Duration = Duration::from_secs(600);

/// The wall clock, ns since the epoch (a request's or reply's source time).
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// One call in progress at a ferry service.
struct Call {
    query: Query,
    seq: i64,
    gid: [u8; 16],
}

#[derive(Default)]
struct Calls {
    next: u64,
    by_id: HashMap<u64, Call>,
    /// (client GID, its sequence number) of the calls in progress.
    asked: HashSet<([u8; 16], i64)>,
}

/// Answers the queries a ferry service took over Zenoh.
struct ZenohReplier {
    key: String,
    name: String,
    calls: Mutex<Calls>,
}

impl ZenohReplier {
    /// The request id the service gets for `query` (attachment `att`), or
    /// why it is refused (the query is answered with that error).
    fn register(&self, query: Query, att: &Attachment) -> Result<u64, &'static str> {
        let mut c = self.calls.lock();
        let why = if c.by_id.len() >= MAX_PENDING {
            "busy: too many calls in progress"
        } else if !c.asked.insert((att.gid, att.sequence)) {
            "a call with this client's sequence number is in progress"
        } else {
            c.next += 1;
            let id = c.next;
            c.by_id.insert(
                id,
                Call {
                    query,
                    seq: att.sequence,
                    gid: att.gid,
                },
            );
            return Ok(id);
        };
        drop(c);
        let _ = query.reply_err(why).wait();
        Err(why)
    }
}

impl Replier for ZenohReplier {
    fn reply(&self, request_id: u64, result: Result<ReplyBody, String>) {
        let call = {
            let mut c = self.calls.lock();
            let call = c.by_id.remove(&request_id);
            if let Some(call) = &call {
                c.asked.remove(&(call.gid, call.seq));
            }
            call
        };
        let Some(call) = call else {
            tracing::debug!("`{}`: a reply for a forgotten Zenoh call", self.name);
            return;
        };
        let sent = match result.map(|b| (b.encode)()) {
            Ok(Ok(body)) => {
                let att = Attachment {
                    sequence: call.seq,
                    timestamp_ns: now_ns(),
                    gid: call.gid,
                };
                call.query
                    .reply(self.key.clone(), ZBytes::from(body))
                    .attachment(ZBytes::from(att.encode().to_vec()))
                    .wait()
            }
            Ok(Err(e)) => call
                .query
                .reply_err(format!("the reply could not be encoded: {e}"))
                .wait(),
            Err(message) => call.query.reply_err(message).wait(),
        };
        if let Err(e) = sent {
            tracing::warn!("`{}`: a reply did not go out over Zenoh: {e}", self.name);
        }
        // Dropping the query ends the call for the client.
    }
}

/// One ferry service's Zenoh clients: a connection per client whose `SC`
/// token the graph holds, at most [`MAX_CLIENTS`] (those whose token went
/// make room), and one shared by every GID without a token (so queries
/// with made-up GIDs cannot fill the records).
#[derive(Default)]
struct Clients {
    map: HashMap<[u8; 16], Arc<InboundConn>>,
    unknown: Option<Arc<InboundConn>>,
    last_sweep: Option<Instant>,
}

impl Clients {
    fn conn(
        &mut self,
        gid: &[u8; 16],
        graph: &Mutex<Graph>,
        inbox: &dyn Inbox,
        locator: &str,
        replier: &Arc<dyn Replier>,
    ) -> Option<Arc<InboundConn>> {
        if let Some(conn) = self.map.get(gid) {
            return Some(conn.clone());
        }
        let Some(found) = graph.lock().by_gid(gid) else {
            let conn = self.unknown.get_or_insert_with(|| {
                let c = new_conn(&[0; 16], None, locator, Some(replier.clone()));
                inbox.attach(c.clone());
                c
            });
            return Some(conn.clone());
        };
        if self.map.len() >= MAX_CLIENTS {
            if self
                .last_sweep
                .is_none_or(|t| t.elapsed() >= Duration::from_secs(1))
            {
                self.last_sweep = Some(Instant::now());
                let g = graph.lock();
                self.map.retain(|gid, conn| {
                    let live = g.by_gid(gid).is_some();
                    if !live {
                        inbox.detach(conn);
                    }
                    live
                });
            }
            if self.map.len() >= MAX_CLIENTS {
                return None;
            }
        }
        let conn = new_conn(gid, Some(&found), locator, Some(replier.clone()));
        inbox.attach(conn.clone());
        self.map.insert(*gid, conn.clone());
        Some(conn)
    }
}

/// Takes one query at service `id`: checked, then handed to the service
/// as a request from its client's connection.
fn take_query(
    id: EndpointId,
    q: Query,
    clients: &Mutex<Clients>,
    graph: &Mutex<Graph>,
    replier: &Arc<ZenohReplier>,
    locator: &str,
) {
    let Some(inbox) = lookup_reader(id) else {
        return;
    };
    let att = match q.attachment().map(|a| Attachment::decode(&a.to_bytes())) {
        Some(Ok(a)) if a.sequence >= 0 && a.timestamp_ns >= 0 => a,
        _ => {
            tracing::debug!("{locator}: a query without rmw_zenoh's attachment refused");
            let _ = q
                .reply_err("a request needs rmw_zenoh's attachment (sequence ≥ 0, time ≥ 0, GID)")
                .wait();
            return;
        }
    };
    let answer: Arc<dyn Replier> = replier.clone();
    let Some(conn) = clients
        .lock()
        .conn(&att.gid, graph, &*inbox, locator, &answer)
    else {
        let _ = q.reply_err("busy: too many clients").wait();
        return;
    };
    let payload = Bytes::from(
        q.payload()
            .map(|p| p.to_bytes().into_owned())
            .unwrap_or_default(),
    );
    conn.stats.message(payload.len());
    let Ok(request_id) = replier.register(q, &att) else {
        conn.stats.drops.fetch_add(1, Ordering::Relaxed);
        return;
    };
    let bytes = move || Ok(payload.clone());
    inbox.deliver(
        &conn,
        &InFrame {
            kind: FrameKind::Request,
            seq: request_id,
            stamp_ns: u64::try_from(att.timestamp_ns).unwrap_or(0),
            arrival_ns: 0,
            payload: Payload {
                typed: None,
                bytes: &bytes,
            },
        },
    );
}

impl ZenohPath {
    /// Ferry service `id` of node `node` (service type `srv`: name as
    /// `pkg/srv/Name`, and hash) as a queryable rmw_zenoh clients call; its
    /// handler answers them as any other client (see the module docs).
    pub fn serve(
        self: &Arc<Self>,
        node: u32,
        id: EndpointId,
        name: &str,
        srv: (&str, &TypeHash),
        qos: &Qos,
    ) -> Result<(), ZenohError> {
        let (key, token, _) = self.endpoint(node, id, EntityKind::Service, name, srv, qos)?;
        let locator = format!("zenoh/{key}");
        let replier = Arc::new(ZenohReplier {
            key: key.clone(),
            name: name.to_string(),
            calls: Mutex::default(),
        });
        let clients = Mutex::new(Clients::default());
        let graph = self.graph.clone();
        let queryable = self
            .session
            .declare_queryable(key)
            .complete(true)
            .allowed_origin(Locality::Remote)
            .callback(move |q: Query| take_query(id, q, &clients, &graph, &replier, &locator))
            .wait()
            .map_err(ZenohError::declare("queryable"))?;
        let rmw_token = self.declare(&token)?;
        self.readers.lock().insert(
            id,
            ReaderEntry {
                _endpoint: Box::new(queryable),
                _token: rmw_token,
            },
        );
        Ok(())
    }

    /// The Zenoh link of ferry client `id` of node `node`: calls to the
    /// services on its name and type that its own paths (`reached`) do not
    /// reach; replies go to `sink` (held weakly: the client holds the link).
    #[allow(clippy::too_many_arguments)]
    pub fn client_link(
        self: &Arc<Self>,
        node: u32,
        id: EndpointId,
        name: &str,
        srv: (&str, &TypeHash),
        qos: &Qos,
        reached: Reached,
        sink: Weak<dyn ReplySink>,
    ) -> Result<Arc<ZenohClientLink>, ZenohError> {
        let (key, token, rmw_type) = self.endpoint(node, id, EntityKind::Client, name, srv, qos)?;
        let querier = self
            .session
            .declare_querier(key.clone())
            .target(QueryTarget::AllComplete)
            .consolidation(ConsolidationMode::None)
            .timeout(QUERY_TIMEOUT)
            .allowed_destination(Locality::Remote)
            .wait()
            .map_err(ZenohError::declare("querier"))?;
        let rmw_token = self.declare(&token)?;
        Ok(Arc::new(ZenohClientLink {
            path: self.clone(),
            locator: format!("zenoh/{key}"),
            name: name.to_string(),
            type_name: rmw_type,
            gid: token.gid(),
            querier: Mutex::new(Some((querier, rmw_token))),
            sink,
            reached,
            need: Need::default(),
            in_flight: Arc::default(),
            stats: ConnStats::new(),
            priority: Mutex::new(Priority::default()),
            closed: AtomicBool::new(false),
        }))
    }
}

/// What one call over Zenoh has had so far.
#[derive(Default)]
struct CallState {
    answered: bool,
    /// The first error reply.
    error: Option<String>,
}

/// A ferry client's querier as one of its links.
pub struct ZenohClientLink {
    path: Arc<ZenohPath>,
    locator: String,
    name: String,
    type_name: String,
    gid: [u8; 16],
    /// The querier and its token, taken when the link closes.
    querier: Mutex<Option<(Querier<'static>, LivelinessToken)>>,
    sink: Weak<dyn ReplySink>,
    reached: Reached,
    need: Need,
    /// Queries not finished yet (see [`MAX_IN_FLIGHT`]).
    in_flight: Arc<AtomicUsize>,
    stats: ConnStats,
    priority: Mutex<Priority>,
    closed: AtomicBool,
}

impl ZenohClientLink {
    /// The services this client would call over Zenoh now.
    pub fn services(&self) -> usize {
        self.need.count(
            &self.path,
            ferry_transport::stats::now_ns(),
            (EntityKind::Service, &self.name, &self.type_name),
            &self.reached,
            || {
                self.querier.lock().as_ref().is_some_and(|(q, _)| {
                    q.matching_status()
                        .wait()
                        .map(|m| m.matching())
                        .unwrap_or(true)
                })
            },
        )
    }
}

/// The callback of call `id` (attachment sequence `seq`, client `gid`):
/// the first reply that echoes the call finishes it.
fn on_reply(
    reply: &Reply,
    (id, seq, gid): (u64, i64, [u8; 16]),
    state: &Mutex<CallState>,
    sink: &Weak<dyn ReplySink>,
) {
    let mut st = state.lock();
    if st.answered {
        return;
    }
    match reply.result() {
        Ok(sample) => {
            let echoed = sample
                .attachment()
                .map(|a| Attachment::decode(&a.to_bytes()))
                .is_some_and(|a| a.is_ok_and(|a| a.sequence == seq && a.gid == gid));
            if !echoed {
                st.error.get_or_insert_with(|| {
                    "a reply whose attachment does not echo the call".into()
                });
                return;
            }
            st.answered = true;
            drop(st);
            let Some(sink) = sink.upgrade() else {
                return;
            };
            let bytes = Bytes::from(sample.payload().to_bytes().into_owned());
            let payload = move || Ok(bytes.clone());
            sink.on_reply_from(
                ZENOH_ENDPOINT,
                id,
                Ok(Payload {
                    typed: None,
                    bytes: &payload,
                }),
            );
        }
        Err(e) => {
            let text = String::from_utf8_lossy(&e.payload().to_bytes()).into_owned();
            st.error.get_or_insert(text);
        }
    }
}

impl Link for ZenohClientLink {
    fn transport(&self) -> TransportKind {
        TransportKind::Zenoh
    }
    fn remote(&self) -> EndpointId {
        ZENOH_ENDPOINT
    }
    fn locator(&self) -> String {
        self.locator.clone()
    }
    fn send(&self, frame: &OutFrame<'_>) -> Result<(), SendError> {
        if frame.kind != FrameKind::Request {
            return Ok(());
        }
        if self.in_flight.load(Ordering::Relaxed) >= MAX_IN_FLIGHT {
            self.stats.drops.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                "{}: {MAX_IN_FLIGHT} calls still open over Zenoh (a service that never \
                 finishes its queries?); this call fails",
                self.locator
            );
            return Err(SendError::Blocked(Duration::ZERO));
        }
        let body = (frame.payload.bytes)()?;
        let (id, seq, gid) = (
            frame.seq,
            i64::try_from(frame.seq).unwrap_or(i64::MAX),
            self.gid,
        );
        let att = Attachment {
            sequence: seq,
            timestamp_ns: now_ns(),
            gid,
        };
        let state = Arc::new(Mutex::new(CallState::default()));
        let (st, sink) = (state.clone(), self.sink.clone());
        let (end_state, end_sink) = (state, self.sink.clone());
        let open = self.in_flight.clone();
        open.fetch_add(1, Ordering::Relaxed);
        let handler = CallbackDrop {
            callback: move |r: Reply| on_reply(&r, (id, seq, gid), &st, &sink),
            // Every reply is in (or the query timed out): no answer fails
            // the call now, with the first error reply if there was one.
            drop: move || {
                open.fetch_sub(1, Ordering::Relaxed);
                let st = end_state.lock();
                if st.answered {
                    return;
                }
                let Some(sink) = end_sink.upgrade() else {
                    return;
                };
                match &st.error {
                    Some(e) => sink.on_reply_from(ZENOH_ENDPOINT, id, Err(e.clone())),
                    None => sink.on_unanswered(ZENOH_ENDPOINT, id),
                }
            },
        };
        let len = body.len();
        let querier = self.querier.lock();
        let Some((q, _)) = querier.as_ref() else {
            return Err(SendError::Closed);
        };
        q.get()
            .payload(ZBytes::from(body))
            .attachment(ZBytes::from(att.encode().to_vec()))
            .with(handler)
            .wait()
            .map_err(|e| {
                tracing::warn!("{}: a request did not go out: {e}", self.locator);
                SendError::Closed
            })?;
        self.stats.message(len);
        Ok(())
    }
    /// Zenoh is not a service: the services it reaches are not ferry's.
    fn reaches_reader(&self) -> bool {
        false
    }
    /// The services this client would call over Zenoh now.
    fn readers(&self) -> usize {
        self.services()
    }
    fn stats(&self) -> &ConnStats {
        &self.stats
    }
    fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Relaxed)
    }
    fn close(&self) {
        if !self.closed.swap(true, Ordering::Relaxed) {
            let gone = self.querier.lock().take();
            drop(gone);
        }
    }
    fn priority(&self) -> Priority {
        *self.priority.lock()
    }
    fn set_priority(&self, p: Priority) -> Result<Applied, PriorityError> {
        *self.priority.lock() = p;
        Ok(Applied::packets(Packets::Shared))
    }
}

impl Drop for ZenohClientLink {
    fn drop(&mut self) {
        self.close();
    }
}
