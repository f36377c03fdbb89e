//! The runtime: one per process and configuration (domain). It owns the
//! discovery state machine, the transports and the I/O thread, and turns
//! matches into connections.

mod forward;
pub(crate) mod io;
mod outbox;
mod timer;

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::Instant;

use ferry_conn::{Action, LocalOptions, Table};
use ferry_discovery::{Discovery, Event as DiscEvent, LeaveReason};
use ferry_wire::beacon::{EndpointRecord, NodeRecord, ParticipantInfo, Record};
use ferry_wire::{EndpointId, EndpointKind, Locator, ParticipantId, TransportKind};
use parking_lot::Mutex;

use crate::config::Config;
use crate::error::BuildError;
use crate::event::{EventQueue, PortEvent};
use crate::graph::{Graph, GraphEndpoint, GraphNode};
use crate::transport::{ConnectRequest, Link, PeerInfo, ReplySink, RouteOf, Transport};

/// With host discovery on, how long a starting runtime stays quiet while
/// its host elects a leader (elections take 2–10 ms): long enough for a
/// fed follower to say so in its first beacon, short enough not to delay
/// a runtime whose leader never feeds it.
const HOST_ROLE_GRACE: std::time::Duration = std::time::Duration::from_millis(250);

/// A local writer (publisher or client) as the runtime sees it.
pub(crate) trait WriterPort: Send + Sync {
    fn connections(&self) -> Vec<crate::stats::ConnectionInfo>;
    fn links(&self) -> &crate::transport::Links;
    fn add_link(&self, link: Arc<dyn Link>);
    fn remove_link(&self, reader: EndpointId);
    fn events(&self) -> &EventQueue;
    fn reply_sink(self: Arc<Self>) -> Option<Arc<dyn ReplySink>>;
    fn housekeeping(&self, _now: Instant) {}
}

/// A local reader (subscriber or service) as the runtime sees it.
pub(crate) trait ReaderPort: Send + Sync {
    fn connections(&self) -> Vec<crate::stats::ConnectionInfo>;
    fn events(&self) -> &EventQueue;
    fn set_matched(&self, writer: EndpointId, matched: bool);
    fn housekeeping(&self, _now: Instant) {}
}

struct LocalWriter {
    record: EndpointRecord,
    port: Weak<dyn WriterPort>,
}

struct LocalReader {
    record: EndpointRecord,
    port: Weak<dyn ReaderPort>,
}

/// Mutable state under one lock.
pub(crate) struct Core {
    pub discovery: Discovery,
    nodes: BTreeMap<u32, NodeRecord>,
    writers: HashMap<u32, LocalWriter>,
    readers: HashMap<u32, LocalReader>,
    /// Every pair of a local port with a peer: matching, paths, outages.
    table: Table,
    /// Remote nodes already warned about for sharing a local node's name.
    same_name_warned: HashSet<(ParticipantId, u32)>,
}

/// State shared by the API threads and the I/O thread.
pub(crate) struct Shared {
    pub id: ParticipantId,
    pub cfg: Config,
    /// This runtime's identity (security mode `permissive` or `enforce`).
    pub security: Option<Arc<crate::security::Security>>,
    /// What the transports see of it, with the remote runtimes discovery
    /// proved (kept current here as participants join and leave).
    pub transport_security: Option<Arc<crate::transport::TransportSecurity>>,
    pub local: PeerInfo,
    pub core: Mutex<Core>,
    transports: Vec<Arc<dyn Transport>>,
    /// Shared memory, when available here.
    pub shm: Option<Arc<crate::transport::shm::ShmTransport>>,
    /// The MQTT broker connection, with an `[mqtt]` section.
    #[cfg(feature = "mqtt")]
    pub mqtt: Option<Arc<ferry_mqtt::Broker>>,
    /// The DDS path to ROS 2 nodes, with a `[ros2]` section.
    pub ros2: Option<crate::ros2::Ros2>,
    /// The Zenoh path, with a `[zenoh]` section.
    pub zenoh: Option<crate::zenoh::Zenoh>,
    /// This runtime's place in its host's leader election
    /// (`host_leader = true`).
    pub host_leader: Option<ferry_transport::leader::HostLeader>,
    /// Forwarding through host leaders (`host_leader = true`): the writer
    /// side and this runtime's relay.
    pub fwd: Option<Arc<crate::transport::fwd::ForwardTransport>>,
    /// The election's role changed: the I/O thread announces it.
    pub host_role_changed: Arc<std::sync::atomic::AtomicBool>,
    pub io: crate::reactor::IoHandle,
    next_entity: AtomicU32,
    /// Scheduling the I/O thread should run at (it delivers every inbound
    /// network connection): the highest any subscriber asked for.
    pub io_policy: crate::priority::PolicyCell,
    /// A port with a deadline appeared: housekeep at once and then often.
    pub housekeep_soon: std::sync::atomic::AtomicBool,
    /// What the listeners accepted and turned away.
    pub listener_counters: Arc<crate::stats::ListenerCounters>,
}

/// Handle that keeps a runtime alive; the last one stops it.
pub(crate) struct Runtime {
    pub shared: Arc<Shared>,
    thread: Mutex<Option<std::thread::JoinHandle<()>>>,
}

impl Drop for Runtime {
    fn drop(&mut self) {
        self.shared.io.shutdown();
        if let Some(t) = self.thread.lock().take() {
            let _ = t.join();
        }
        // After the I/O thread: its goodbye went to the broker's queue.
        for t in &self.shared.transports {
            t.shutdown();
        }
    }
}

fn registry() -> &'static Mutex<HashMap<Config, Weak<Runtime>>> {
    static R: OnceLock<Mutex<HashMap<Config, Weak<Runtime>>>> = OnceLock::new();
    R.get_or_init(Default::default)
}

impl Runtime {
    /// The runtime of this process for `cfg`, started on first use.
    pub fn get(cfg: Config) -> Result<Arc<Runtime>, BuildError> {
        let mut reg = registry().lock();
        if let Some(rt) = reg.get(&cfg).and_then(Weak::upgrade) {
            return Ok(rt);
        }
        let rt = Self::start(cfg.clone())?;
        reg.retain(|_, w| w.strong_count() > 0);
        reg.insert(cfg, Arc::downgrade(&rt));
        Ok(rt)
    }

    fn start(cfg: Config) -> Result<Arc<Runtime>, BuildError> {
        cfg.validate()?;
        let security = crate::security::load(&cfg.security, cfg.domain_id)?;
        let ifaces = crate::host::interfaces();
        let sockets = io::Sockets::open(&cfg, &ifaces)?;
        let id = ParticipantId(random_u64());
        #[cfg(not(feature = "mqtt"))]
        if cfg.mqtt.is_some() {
            return Err(BuildError::Broker {
                url: "[mqtt]".into(),
                why: "ferry was built without the `mqtt` feature".into(),
            });
        }
        let announce_ips: Vec<std::net::Ipv4Addr> = std::iter::once(std::net::Ipv4Addr::LOCALHOST)
            .chain(
                ifaces
                    .iter()
                    .filter(|i| {
                        !i.loopback && cfg.discovery != crate::config::DiscoveryRange::Localhost
                    })
                    .map(|i| i.addr),
            )
            .collect();
        let listener_counters = Arc::new(crate::stats::ListenerCounters::default());
        let transport_security = security
            .as_ref()
            .map(|s| s.for_transports(cfg.domain_id, cfg.security.tcp_rekey()))
            .transpose()?;
        let ctx = crate::transport::StartContext {
            security: transport_security.as_ref(),
            id,
            cfg: &cfg,
            ifaces: &ifaces,
            io: &sockets.handle,
            bind_ip: sockets.bind_ip,
            announce_ips: &announce_ips,
            listener_counters: &listener_counters,
        };
        let mut transports: Vec<Arc<dyn Transport>> = Vec::new();
        for start in crate::transport::start::registry() {
            if let Some(t) = start(&ctx)? {
                transports.push(t);
            }
        }
        // The typed handles the runtime keeps: shared-memory loans, and the
        // broker connection cloud-scope ports use.
        let shm = transports.iter().find_map(|t| {
            t.clone()
                .as_any()
                .downcast::<crate::transport::shm::ShmTransport>()
                .ok()
        });
        #[cfg(feature = "mqtt")]
        let mqtt = transports.iter().find_map(|t| {
            t.clone()
                .as_any()
                .downcast::<ferry_mqtt::MqttTransport>()
                .ok()
                .map(|m| m.0.clone())
        });
        let fwd = forward::start(
            id,
            &transports,
            shm.clone(),
            security.is_some(),
            cfg.forward_udp,
        );
        transports.extend(fwd.iter().map(|f| f.clone() as Arc<dyn Transport>));
        let zenoh = crate::zenoh::Zenoh::start(&cfg, id)?;
        let mut locators: Vec<Locator> = transports.iter().flat_map(|t| t.locators()).collect();
        locators.extend(zenoh.as_ref().and_then(|z| z.locator()));
        let local = PeerInfo {
            participant: id,
            host_id: crate::host::host_id(),
            net_id: crate::host::net_id(),
            pid: std::process::id(),
            locators: locators.clone(),
            direct: true,
            secured: security.is_some(),
        };
        let info = ParticipantInfo {
            host_id: local.host_id,
            net_id: local.net_id,
            pid: local.pid,
            lease_ms: cfg.lease_ms,
            name: crate::host::process_name(),
            locators,
        };
        let mut dcfg = ferry_discovery::Config::new(cfg.domain_id, id, info);
        dcfg.multicast = cfg.discovery != crate::config::DiscoveryRange::Off;
        dcfg.broker = cfg.announces_through_broker();
        dcfg.broker_addresses = cfg.mqtt.as_ref().is_some_and(|m| m.announce_addresses);
        if dcfg.broker {
            tracing::info!(
                "announcing this runtime through the MQTT broker{}",
                if dcfg.broker_addresses {
                    ", with its network addresses"
                } else {
                    " (without its network addresses)"
                }
            );
        }
        dcfg.loopback_only = cfg.discovery == crate::config::DiscoveryRange::Localhost;
        dcfg.auth = security.as_ref().map(|s| s.discovery_auth());
        dcfg.unix_at_start_us = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as u64);
        for p in &cfg.peers {
            dcfg.static_peers.extend(cfg.peer_addrs_of(p)?);
        }
        let mut discovery = Discovery::new(dcfg, Instant::now());
        let host_discovery = cfg.host_leader && cfg.host_discovery;
        if host_discovery {
            // Quiet until the election says whether a leader feeds us.
            discovery.hold_until(Instant::now() + HOST_ROLE_GRACE);
        }
        let routes = transports
            .iter()
            .map(|t| Arc::new(RouteOf(t.clone())) as Arc<dyn ferry_conn::Route>)
            .collect();
        let mut table = Table::new(local.clone(), routes);
        table.set_forward_threshold(cfg.forward_threshold as usize);
        let ros2 = crate::ros2::Ros2::start(&cfg, id)?;
        let (cfg_host_leader, may_lead, domain_id, local_host_id) = (
            cfg.host_leader,
            cfg.host_leader_may_lead,
            cfg.domain_id,
            local.host_id,
        );
        let host_role_changed = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let shared = Arc::new(Shared {
            id,
            cfg,
            security,
            transport_security,
            local,
            core: Mutex::new(Core {
                discovery,
                nodes: BTreeMap::new(),
                writers: HashMap::new(),
                readers: HashMap::new(),
                table,
                same_name_warned: HashSet::new(),
            }),
            transports,
            shm,
            #[cfg(feature = "mqtt")]
            mqtt,
            ros2,
            zenoh,
            host_leader: cfg_host_leader.then(|| {
                let (changed, io) = (host_role_changed.clone(), sockets.handle.clone());
                let start = if host_discovery {
                    ferry_transport::leader::HostLeader::start_feeding
                } else {
                    ferry_transport::leader::HostLeader::start_as
                };
                start(
                    sockets.handle.clone(),
                    ferry_transport::leader::socket_name(domain_id, local_host_id),
                    id,
                    may_lead,
                    Box::new(move || {
                        changed.store(true, Ordering::Release);
                        io.kick();
                    }),
                )
            }),
            fwd,
            host_role_changed,
            io: sockets.handle.clone(),
            next_entity: AtomicU32::new(1),
            io_policy: Default::default(),
            housekeep_soon: Default::default(),
            listener_counters,
        });
        #[cfg(feature = "mqtt")]
        if let Some(b) = &shared.mqtt {
            let host: Arc<dyn ferry_mqtt::BrokerHost> = shared.clone();
            b.bind(Arc::downgrade(&host));
        }
        forward::bind(&shared);
        let s2 = shared.clone();
        let thread = std::thread::Builder::new()
            .name("ferry-io".into())
            .spawn(move || io::run(sockets, s2))
            .map_err(|source| BuildError::Io {
                what: "I/O thread".into(),
                source,
            })?;
        Ok(Arc::new(Runtime {
            shared,
            thread: Mutex::new(Some(thread)),
        }))
    }
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    // SAFETY: getrandom writes at most b.len() bytes into b.
    let n = unsafe { libc::getrandom(b.as_mut_ptr().cast(), b.len(), 0) };
    if n != 8 {
        let t = crate::stats::now_ns();
        return t ^ (u64::from(std::process::id()) << 32);
    }
    u64::from_le_bytes(b) | 1
}

impl Shared {
    pub fn new_entity(&self) -> u32 {
        self.next_entity.fetch_add(1, Ordering::Relaxed)
    }

    fn publish_records(&self, core: &mut Core) {
        let mut recs: Vec<Record> = core.nodes.values().cloned().map(Record::Node).collect();
        let mut eps: Vec<&EndpointRecord> = core
            .writers
            .values()
            .map(|w| &w.record)
            .chain(core.readers.values().map(|r| &r.record))
            .collect();
        eps.sort_by_key(|e| e.entity);
        // The runtime renews its lease for all its endpoints (automatic
        // liveliness): announce the shortest liveliness lease any of them asks.
        let lease = eps
            .iter()
            .filter_map(|e| e.qos.liveliness_lease)
            .map(|d| d.as_millis().min(u32::MAX as u128) as u32)
            .fold(self.cfg.lease_ms, u32::min);
        recs.extend(eps.into_iter().cloned().map(Record::Endpoint));
        let now = Instant::now();
        core.discovery.set_lease(lease, now);
        core.discovery.set_records(recs, now);
        self.io.kick();
    }

    pub fn add_node(&self, rec: NodeRecord) {
        if let Some(r) = &self.ros2 {
            r.add_node(rec.id, &rec.namespace, &rec.name);
        }
        if let Some(z) = &self.zenoh {
            z.add_node(rec.id, &rec.namespace, &rec.name);
        }
        let mut core = self.core.lock();
        core.nodes.insert(rec.id, rec);
        self.publish_records(&mut core);
    }

    pub fn remove_node(&self, id: u32) {
        if let Some(r) = &self.ros2 {
            r.remove_node(id);
        }
        if let Some(z) = &self.zenoh {
            z.remove_node(id);
        }
        let mut core = self.core.lock();
        core.nodes.remove(&id);
        self.publish_records(&mut core);
    }

    pub fn add_writer(self: &Arc<Self>, record: EndpointRecord, port: Weak<dyn WriterPort>) {
        self.deadline_port(&record);
        {
            let mut core = self.core.lock();
            let opts = self.local_options(&record);
            core.table.add_local(record.clone(), opts, Instant::now());
            core.writers
                .insert(record.entity, LocalWriter { record, port });
            self.publish_records(&mut core);
        }
        self.drive();
    }

    pub fn add_reader(self: &Arc<Self>, record: EndpointRecord, port: Weak<dyn ReaderPort>) {
        self.deadline_port(&record);
        {
            let mut core = self.core.lock();
            let opts = self.local_options(&record);
            core.readers.insert(
                record.entity,
                LocalReader {
                    record: record.clone(),
                    port,
                },
            );
            core.table.add_local(record, opts, Instant::now());
            self.publish_records(&mut core);
        }
        self.drive();
    }

    fn deadline_port(&self, record: &EndpointRecord) {
        if record.qos.deadline.is_some() {
            self.housekeep_soon
                .store(true, std::sync::atomic::Ordering::Relaxed);
            self.io.kick();
        }
    }

    /// Whether ports need their housekeeping (deadlines, closed links)
    /// often: some port has a deadline or a connection. An idle runtime
    /// housekeeps every 2 s, so a host of idle processes stays asleep.
    pub fn busy(&self) -> bool {
        let core = self.core.lock();
        core.table.pairs().next().is_some()
            || core
                .writers
                .values()
                .any(|w| w.record.qos.deadline.is_some())
            || core
                .readers
                .values()
                .any(|r| r.record.qos.deadline.is_some())
    }

    /// How the config lets a local port be connected: a `[[topics]]` pin,
    /// and whether a publisher may reach broker-only readers (cloud scope).
    fn local_options(&self, record: &EndpointRecord) -> LocalOptions {
        LocalOptions {
            pin: self.cfg.pinned_transport(&record.topic),
            broker_ok: record.kind != EndpointKind::Publisher
                || self.cfg.topic_scope(&record.topic) == crate::config::mqtt::Scope::Cloud,
            zenoh: self.zenoh.is_some() && crate::zenoh::Zenoh::carries(&self.cfg, &record.topic),
        }
    }

    pub fn remove_endpoint(self: &Arc<Self>, entity: u32) {
        let id = EndpointId {
            participant: self.id,
            entity,
        };
        for t in &self.transports {
            t.forget_writer(id);
        }
        if let Some(r) = &self.ros2 {
            r.unsubscribe(id);
        }
        if let Some(z) = &self.zenoh {
            z.unsubscribe(id);
        }
        {
            let mut core = self.core.lock();
            core.table.remove_local(entity, Instant::now());
            core.writers.remove(&entity);
            core.readers.remove(&entity);
            self.publish_records(&mut core);
        }
        self.drive();
    }

    /// Whether source timestamps of `p` are from our clock (same host).
    pub fn same_clock(&self, p: ParticipantId) -> bool {
        p == self.id
            || self
                .core
                .lock()
                .discovery
                .participant_info(p)
                .is_some_and(|rp| rp.info.host_id == self.local.host_id)
    }

    /// A writer's connection broke: the writer drops it and the pair
    /// connects again if the reader is still there.
    pub fn link_lost(self: &Arc<Self>, writer: EndpointId, reader: EndpointId) {
        self.core
            .lock()
            .table
            .link_lost(writer, reader, Instant::now());
        self.drive();
    }

    /// Tells the transports what signed discovery proved about `rp`.
    fn note_proven(&self, rp: &ferry_discovery::RemoteParticipant) {
        if let (Some(s), Some(identity)) = (&self.transport_security, &rp.identity) {
            s.peers.insert(
                rp.id,
                crate::transport::ProvenPeer {
                    pid: rp.info.pid,
                    host_id: rp.info.host_id,
                    udp_key: rp
                        .info
                        .locators
                        .iter()
                        .filter(|l| l.transport == ferry_wire::TransportKind::Udp)
                        .find_map(|l| l.params.key),
                    identity: identity.clone(),
                },
            );
        }
    }

    /// Announces the host leader this runtime follows (or that it leads)
    /// as its `fwd/<leader>` locator, or none while it has no leader.
    pub fn announce_host_role(&self, now: Instant) {
        use crate::leader::Role;
        let Some(h) = &self.host_leader else {
            return;
        };
        let role = h.role();
        self.forward_role(&role);
        // Host discovery: a fed follower leaves the group to its leader
        // (`io::run` drops the membership); a leader, a runtime on its own
        // or one whose leader does not feed it listens and speaks itself.
        let fed = h.fed() && matches!(role, Role::Follower { .. });
        {
            let mut core = self.core.lock();
            let settled = !matches!(role, Role::Electing | Role::Follower { .. });
            if fed || settled || core.discovery.is_fed() {
                core.discovery.set_fed(fed, now);
            }
        }
        let leader = match &role {
            Role::Leader { .. } => Some(self.id),
            Role::Follower { leader } => Some(leader.participant),
            // Between two leaders (milliseconds) the last one stays
            // announced: the runtime is still in the election, and a new
            // leader relays to the runtimes it sees in it.
            Role::Electing => return,
            _ => None,
        };
        let mut locators = self.local.locators.clone();
        locators.extend(leader.map(Locator::forwarded_by));
        self.core.lock().discovery.set_locators(locators, now);
    }

    /// Tells the Zenoh path which Zenoh session `rp` announced: only that
    /// session's `@ferry_lv` claim to be `rp` is believed.
    fn vouch_zenoh(&self, rp: &ferry_discovery::RemoteParticipant) {
        if let Some(z) = &self.zenoh {
            z.discovered(rp.id, &rp.info.locators);
        }
    }

    /// Called by the I/O thread with new discovery events and on each tick.
    pub fn on_discovery(self: &Arc<Self>, events: Vec<DiscEvent>, housekeeping: bool) {
        let lost: Vec<_> = self.transports.iter().flat_map(|t| t.take_lost()).collect();
        for (w, r) in lost {
            self.link_lost(w, r);
        }
        let events_empty = events.is_empty();
        if !events_empty || housekeeping {
            let now = Instant::now();
            let mut core = self.core.lock();
            let core = &mut *core;
            // Discovery says a departing peer's endpoints left before the
            // peer itself: they leave with it, for its reason.
            let leaving: HashSet<ParticipantId> = events
                .iter()
                .filter_map(|e| match e {
                    DiscEvent::ParticipantLeft { id, .. } => Some(*id),
                    _ => None,
                })
                .collect();
            for e in events {
                match e {
                    DiscEvent::ParticipantJoined(id) => {
                        tracing::debug!("participant {id} joined");
                        if let Some(rp) = core.discovery.participant_info(id) {
                            self.note_proven(rp);
                            self.vouch_zenoh(rp);
                            let peer = peer_info(rp);
                            if let Some(f) = &self.fwd {
                                f.peer_seen(&peer);
                            }
                            core.table.peer_up(peer, now);
                        }
                    }
                    DiscEvent::ParticipantLeft { id, reason } => {
                        match reason {
                            LeaveReason::LeaseExpired => {
                                tracing::info!("participant {id} expired (silent past its lease)")
                            }
                            LeaveReason::ConnectionLost => tracing::info!(
                                "participant {id} lost its broker connection (last will)"
                            ),
                            LeaveReason::Bye => {}
                        }
                        #[cfg(feature = "mqtt")]
                        if let Some(b) = &self.mqtt {
                            b.forget(id);
                        }
                        if let Some(s) = &self.transport_security {
                            s.peers.remove(id);
                        }
                        if let Some(z) = &self.zenoh {
                            z.left(id);
                        }
                        if let Some(f) = &self.fwd {
                            f.peer_gone(id);
                        }
                        core.table.peer_left(id, reason, now);
                    }
                    DiscEvent::EndpointJoined {
                        participant,
                        endpoint,
                    } => {
                        if core.table.peer(participant).is_none() {
                            if let Some(rp) = core.discovery.participant_info(participant) {
                                self.note_proven(rp);
                                self.vouch_zenoh(rp);
                                core.table.peer_up(peer_info(rp), now);
                            }
                        }
                        warn_same_name(core, participant, endpoint.node);
                        core.table.endpoint_up(participant, endpoint, now);
                    }
                    DiscEvent::EndpointLeft {
                        participant,
                        endpoint,
                    } if !leaving.contains(&participant) => {
                        core.table.endpoint_left(participant, endpoint.entity, now);
                    }
                    DiscEvent::EndpointLeft { .. } => {}
                }
            }
            if core.table.poll_timeout().is_some_and(|t| t <= now) {
                core.table.handle_timeout(now);
            }
        }
        if let (Some(f), false) = (&self.fwd, events_empty) {
            f.relay().graph_changed();
        }
        self.drive();
        if housekeeping {
            let now = Instant::now();
            let (ws, rs): (Vec<_>, Vec<_>) = {
                let core = self.core.lock();
                (
                    core.writers
                        .values()
                        .filter_map(|w| w.port.upgrade())
                        .collect(),
                    core.readers
                        .values()
                        .filter_map(|r| r.port.upgrade())
                        .collect(),
                )
            };
            for w in ws {
                w.housekeeping(now);
            }
            for r in rs {
                r.housekeeping(now);
            }
        }
    }

    /// Carries out what the connection table decided: takes its actions out
    /// under the lock, resolves the ports they name, and acts on them after
    /// releasing it (port code never runs under the runtime lock).
    fn drive(self: &Arc<Self>) {
        loop {
            let mut work = Vec::new();
            {
                let mut core = self.core.lock();
                let mut unresolved = Vec::new();
                while let Some(action) = core.table.poll_action() {
                    let connect = match &action {
                        Action::Connect { writer, reader, .. } => Some((*writer, *reader)),
                        _ => None,
                    };
                    match self.resolve(&core, action) {
                        Some(w) => work.push(w),
                        // A connect whose port or peer is gone meanwhile:
                        // the pair must not stay Connecting.
                        None => unresolved.extend(connect),
                    }
                }
                let now = Instant::now();
                for (w, r) in unresolved {
                    core.table.connect_failed(w, r, now);
                }
            }
            if work.is_empty() {
                return;
            }
            for w in work {
                self.act(w);
            }
        }
    }

    /// What one table action needs from the runtime, found under the lock.
    fn resolve(&self, core: &Core, action: Action) -> Option<Work> {
        let writer_port = |w: EndpointId| {
            core.writers
                .get(&w.entity)
                .filter(|_| w.participant == self.id)
                .and_then(|x| x.port.upgrade())
        };
        Some(match action {
            Action::Connect {
                writer,
                reader,
                transport,
                replaces,
            } => {
                let port = writer_port(writer)?;
                let wrec = core.table.endpoint(writer)?;
                let remote = core.table.peer(reader.participant)?.clone();
                let t = self
                    .transports
                    .iter()
                    .find(|t| t.kind() == transport)?
                    .clone();
                match replaces {
                    Some(TransportKind::Mqtt) => tracing::info!(
                        "{writer} → {reader}: peer now heard directly; leaving mqtt for {transport}"
                    ),
                    Some(old) => tracing::info!(
                        "{writer} → {reader}: moving from {old} to {transport} (subscribers on its host: {})",
                        if transport == TransportKind::Forwarded { "through its leader" } else { "below the forwarding threshold" }
                    ),
                    None => {}
                }
                Work::Connect(
                    t,
                    ConnectRequest {
                        writer,
                        writer_kind: wrec.kind,
                        reader,
                        topic: wrec.topic.clone(),
                        qos: wrec.qos,
                        remote,
                        reply_sink: port.clone().reply_sink(),
                    },
                    port,
                )
            }
            Action::Unlink { writer, reader } => Work::Unlink(writer_port(writer)?, reader),
            Action::Notify { port, event } => {
                if let PortEvent::IncompatibleQos { remote, .. }
                | PortEvent::IncompatibleType { remote, .. } = &event
                {
                    let topic = core.table.endpoint(port).map(|e| e.topic.as_str());
                    tracing::warn!(
                        "{port} and {remote} on `{}` not connected: {event:?}",
                        topic.unwrap_or("?")
                    );
                }
                if let Some(w) = writer_port(port) {
                    Work::NotifyWriter(w, event)
                } else {
                    let r = core
                        .readers
                        .get(&port.entity)
                        .filter(|_| port.participant == self.id)
                        .and_then(|x| x.port.upgrade())?;
                    Work::NotifyReader(r, event)
                }
            }
            Action::ForgetWriter { writer } => Work::ForgetWriter(writer),
            Action::NoPath {
                writer,
                reader,
                pinned,
            } => {
                let topic = core.table.endpoint(writer).map(|e| e.topic.as_str());
                tracing::warn!(
                    "{writer} → {reader} on `{}`: no transport reaches the peer (pinned: {pinned:?})",
                    topic.unwrap_or("?")
                );
                return None;
            }
            Action::Suspended { writer, reader, .. } => {
                tracing::info!(
                    "{writer} → {reader}: reader unreachable; keeping the UDP stream for {:?}",
                    ferry_conn::OUTAGE_GRACE
                );
                return None;
            }
        })
    }

    fn act(self: &Arc<Self>, work: Work) {
        match work {
            Work::Unlink(port, reader) => port.remove_link(reader),
            Work::NotifyWriter(port, event) => port.events().push(event),
            Work::NotifyReader(port, event) => {
                match &event {
                    PortEvent::Matched { remote, .. } => port.set_matched(*remote, true),
                    PortEvent::Unmatched { remote, .. } => port.set_matched(*remote, false),
                    _ => {}
                }
                port.events().push(event);
            }
            Work::ForgetWriter(w) => {
                for t in &self.transports {
                    t.forget_writer(w);
                }
            }
            Work::Connect(t, req, port) => {
                let me = self.clone();
                let in_process = t.kind() == TransportKind::InProcess;
                let run = move || {
                    let (wid, rid) = (req.writer, req.reader);
                    let topic = req.topic.clone();
                    let result = t.connect(req);
                    let now = Instant::now();
                    match result {
                        Ok(link) => {
                            let kind = link.transport();
                            if me.core.lock().table.connected(wid, rid, kind) {
                                tracing::debug!("{wid} → {rid} connected over {kind}");
                                port.add_link(link.clone());
                                // Make before break: a path the pair left
                                // closes once this one carries it.
                                port.links().retire_others(rid, &link);
                            } else {
                                link.close();
                            }
                        }
                        Err(crate::transport::ConnectError::Refused {
                            transport, cause, ..
                        }) => {
                            let first = me
                                .core
                                .lock()
                                .table
                                .connect_refused(wid, rid, transport, &cause, now);
                            if first {
                                let node = me
                                    .endpoint_nodes()
                                    .get(&rid)
                                    .cloned()
                                    .unwrap_or_else(|| rid.participant.to_string());
                                tracing::warn!(
                                    "{topic}: {transport} to {node} refused ({cause}); \
                                     this peer's pairs take another path"
                                );
                            }
                        }
                        Err(e) => {
                            tracing::warn!(
                                "{wid} → {rid}: {e}; retrying in {:?}",
                                ferry_conn::RETRY_AFTER
                            );
                            me.core.lock().table.connect_failed(wid, rid, now);
                        }
                    }
                    me.drive();
                };
                if in_process {
                    run(); // never blocks: connect synchronously so data flows at once
                } else {
                    let _ = std::thread::Builder::new()
                        .name("ferry-connect".into())
                        .spawn(run);
                }
            }
        }
    }

    fn eid(&self, entity: u32) -> EndpointId {
        EndpointId {
            participant: self.id,
            entity,
        }
    }

    /// Connections of every port of one local node (for the admin plane).
    pub fn node_connections(&self, node: u32) -> Vec<crate::stats::ConnectionInfo> {
        let (ws, rs): (Vec<_>, Vec<_>) = {
            let core = self.core.lock();
            (
                core.writers
                    .values()
                    .filter(|w| w.record.node == node)
                    .filter_map(|w| w.port.upgrade())
                    .collect(),
                core.readers
                    .values()
                    .filter(|r| r.record.node == node)
                    .filter_map(|r| r.port.upgrade())
                    .collect(),
            )
        };
        let mut out: Vec<_> = ws.iter().flat_map(|w| w.connections()).collect();
        out.extend(rs.iter().flat_map(|r| r.connections()));
        let names = self.endpoint_nodes();
        let core = self.core.lock();
        for c in &mut out {
            if let Some(n) = names.iter().find(|(id, _)| **id == c.remote) {
                c.remote_node = n.1.clone();
            }
            c.note = core
                .table
                .refused(c.remote.participant)
                .iter()
                .filter(|(k, _)| *k != c.transport)
                .map(|(k, why)| format!("{k} refused: {why}"))
                .collect::<Vec<_>>()
                .join("; ");
        }
        drop(core);
        self.name_forwarded(&mut out);
        out
    }

    /// The admin `set` command: changes the priority of the live connections
    /// of node `node`'s writers on `topic` whose reader is `to` (a node
    /// name, an endpoint id, or `*`). `sched` None keeps each connection's
    /// thread policy.
    pub fn set_priority(
        &self,
        node: u32,
        topic: &str,
        to: &str,
        class: crate::priority::PacketClass,
        sched: Option<Option<crate::priority::ThreadPolicy>>,
    ) -> Result<Vec<crate::priority::SetOutcome>, crate::priority::PriorityError> {
        let ports: Vec<_> = {
            let core = self.core.lock();
            core.writers
                .values()
                .filter(|w| w.record.node == node && w.record.topic == topic)
                .filter_map(|w| w.port.upgrade())
                .collect()
        };
        let names = self.endpoint_nodes();
        let node_of = |id: EndpointId| names.get(&id).cloned().unwrap_or_default();
        let wanted = |id: EndpointId| {
            to.is_empty() || to == "*" || to == id.to_string() || node_of(id) == to
        };
        let mut out = Vec::new();
        for port in ports {
            let links = port.links();
            for l in links
                .snapshot()
                .iter()
                .filter(|l| !l.is_closed() && wanted(l.remote()))
            {
                let p = crate::priority::Priority {
                    class,
                    thread: sched.unwrap_or(l.priority().thread),
                };
                let result = l.set_priority(p).map_err(|e| e.to_string());
                out.push(crate::priority::SetOutcome {
                    remote: l.remote().to_string(),
                    remote_node: node_of(l.remote()),
                    priority: l.priority(),
                    result,
                });
            }
            links.set_priority(|_| false, Default::default()); // re-sort
        }
        if out.is_empty() {
            return Err(crate::priority::PriorityError::NoConnection {
                topic: topic.to_string(),
                to: to.to_string(),
            });
        }
        Ok(out)
    }

    /// Node names of every known endpoint (local and discovered).
    fn endpoint_nodes(&self) -> HashMap<EndpointId, String> {
        self.graph()
            .endpoints
            .into_iter()
            .map(|e| (e.id, e.node))
            .collect()
    }

    /// Raises the threads that deliver samples — the I/O thread (TCP, UDP),
    /// the shared-memory delivery thread and the MQTT thread — to `p` unless
    /// they already run at least as high (they serve every inbound
    /// connection of the runtime: the raise is shared and lasts for the
    /// runtime's life).
    pub fn raise_delivery_threads(&self, p: crate::priority::ThreadPolicy) {
        if self.io_policy.raise(p) {
            self.io.kick();
        }
        for t in &self.transports {
            t.raise_delivery(p);
        }
    }

    /// A snapshot of everything known: local and remote nodes and endpoints.
    pub fn graph(&self) -> Graph {
        let (ros2_nodes, ros2_endpoints) =
            self.ros2.as_ref().map(|r| r.graph()).unwrap_or_default();
        let mut g = Graph {
            ros2_nodes,
            ros2_endpoints,
            ..Graph::default()
        };
        let core = self.core.lock();
        let local_name = |nodes: &BTreeMap<u32, NodeRecord>, id: u32| {
            nodes
                .get(&id)
                .map(|n| full_name(&n.namespace, &n.name))
                .unwrap_or_default()
        };
        for n in core.nodes.values() {
            g.nodes.push(GraphNode {
                name: full_name(&n.namespace, &n.name),
                participant: self.id,
                pid: self.local.pid,
                host_id: self.local.host_id,
                locators: self.local.locators.iter().map(|l| l.to_string()).collect(),
            });
        }
        for e in core
            .writers
            .values()
            .map(|w| &w.record)
            .chain(core.readers.values().map(|r| &r.record))
        {
            g.endpoints.push(GraphEndpoint::new(
                self.eid(e.entity),
                e,
                local_name(&core.nodes, e.node),
            ));
        }
        for rp in core.discovery.participants() {
            for n in rp.nodes.values() {
                g.nodes.push(GraphNode {
                    name: full_name(&n.namespace, &n.name),
                    participant: rp.id,
                    pid: rp.info.pid,
                    host_id: rp.info.host_id,
                    locators: rp.info.locators.iter().map(|l| l.to_string()).collect(),
                });
            }
            for e in rp.endpoints.values() {
                g.endpoints.push(GraphEndpoint::new(
                    EndpointId {
                        participant: rp.id,
                        entity: e.entity,
                    },
                    e,
                    local_name(&rp.nodes, e.node),
                ));
            }
        }
        drop(core);
        if let Some(z) = &self.zenoh {
            // Ferry runtimes ferry's own graph lists are not listed twice.
            let known: std::collections::HashSet<_> =
                g.nodes.iter().map(|n| n.participant).collect();
            let (nodes, eps) = z.graph(|p| p == self.id || known.contains(&p));
            g.ros2_nodes.extend(nodes);
            g.ros2_endpoints.extend(eps);
        }
        g.nodes.sort_by(|a, b| a.name.cmp(&b.name));
        g.endpoints
            .sort_by(|a, b| a.topic.cmp(&b.topic).then(a.id.cmp(&b.id)));
        g
    }
}

#[cfg(feature = "mqtt")]
impl ferry_mqtt::BrokerHost for Shared {
    fn broker_beacon(&self, bytes: &[u8]) -> Result<(), ferry_discovery::DatagramError> {
        let from = std::net::SocketAddr::from(([0, 0, 0, 0], 0));
        let r = self.core.lock().discovery.handle_datagram(
            Instant::now(),
            from,
            ferry_discovery::Via::Broker,
            bytes,
        );
        self.io.kick();
        r
    }
    fn same_clock(&self, p: ParticipantId) -> bool {
        Shared::same_clock(self, p)
    }
    fn announce_soon(&self) {
        self.core.lock().discovery.announce_now(Instant::now());
        self.io.kick();
    }
    fn broker_vanished(&self, p: ParticipantId) {
        self.core.lock().discovery.peer_vanished(p);
        self.io.kick();
    }
}

/// One table action, with the ports it names resolved.
enum Work {
    Connect(Arc<dyn Transport>, ConnectRequest, Arc<dyn WriterPort>),
    Unlink(Arc<dyn WriterPort>, EndpointId),
    NotifyWriter(Arc<dyn WriterPort>, PortEvent),
    NotifyReader(Arc<dyn ReaderPort>, PortEvent),
    ForgetWriter(EndpointId),
}

/// Warns (once per remote node) when a remote node has the fully qualified
/// name of one of ours: services and parameters addressed by name would
/// reach either (ROS 2 warns likewise).
fn warn_same_name(core: &mut Core, participant: ParticipantId, node: u32) {
    let Some(remote) = core
        .discovery
        .participant_info(participant)
        .and_then(|rp| rp.nodes.get(&node))
    else {
        return;
    };
    let name = full_name(&remote.namespace, &remote.name);
    let clash = core
        .nodes
        .values()
        .any(|n| full_name(&n.namespace, &n.name) == name);
    if clash && core.same_name_warned.insert((participant, node)) {
        if core.same_name_warned.len() > 4096 {
            core.same_name_warned.clear();
        }
        tracing::warn!(
            "another node named {name} runs in participant {participant} (pid {}): \
             two nodes share one fully qualified name; give one another name or namespace",
            core.discovery
                .participant_info(participant)
                .map_or(0, |rp| rp.info.pid)
        );
    }
}

/// What path selection needs of a discovered runtime.
fn peer_info(rp: &ferry_discovery::RemoteParticipant) -> PeerInfo {
    PeerInfo {
        participant: rp.id,
        host_id: rp.info.host_id,
        net_id: rp.info.net_id,
        pid: rp.info.pid,
        locators: rp.info.locators.clone(),
        direct: rp.direct,
        secured: rp.enclave.is_some(),
    }
}

/// `/ns/name` from a namespace and a node name.
pub(crate) fn full_name(ns: &str, name: &str) -> String {
    if ns == "/" {
        format!("/{name}")
    } else {
        format!("{ns}/{name}")
    }
}
