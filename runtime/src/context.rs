//! The `Gaspi` context: start-up, the tables every call consults, shutdown.

use crate::base::{allreduce_slot, system_data_size, system_notifications, Base, SYSTEM_SEG};
use crate::groups::GroupTable;
use crate::model::config::Config;
use crate::model::config::TransportChoice;
use crate::model::error::{Error, Result};
use crate::model::ids::{Rank, RankState, SegId};
use crate::net::connection::{ControlOut, Urgency};
use crate::net::frame::Message;
use crate::net::peers::{Peer, PeerEvents, Peers};
use crate::net::rendezvous::{self, Endpoint};
use crate::progress::ProgressEngine;
use crate::protocol::assisted_copy::{CopyHelper, BOARD_BYTES};
use crate::queue::QueueState;
use crate::segments::LocalSegment;
use crate::transport::registry;
use crate::transport::tables::SegmentTables;
use crate::transport::tcp::TcpTransport;
use crate::transport::NetworkTransport;
use crate::transport::{shared_memory::SharedMemoryTransport, Transport};
use crate::waiter_progress::{WaitWork, WaiterProgress};
use gaspi_segments::HostId;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Everything the calls and the progress engine share.
#[derive(Debug)]
pub(crate) struct Inner {
    /// What every service of this rank reads (see `base.rs`).
    pub base: Arc<Base>,
    /// The protocol layer: path choice, the queues.
    pub protocol: crate::protocol::Protocol,
    pub groups: GroupTable,
    /// Reads posted through the TCP transport, awaiting their data.
    pub posted_reads: Arc<crate::transport::tcp::PostedReads>,
    /// Atomic requests whose call returned `Timeout`, for an identical
    /// call to adopt (`atomics.rs`, decision 0029).
    pub abandoned_atomics: crate::atomics::AbandonedAtomics,
    /// Passive messages received, not yet taken (see `passive.rs`).
    pub passive: crate::passive::Inbox,
    /// The GPU path: home device, queue streams' work, owner-run copies.
    pub gpu: Arc<crate::gpu::Gpu>,
    /// What this rank's waiters do while they spin: help with copies
    /// posted to it (`protocol/assisted_copy.rs`); `None` when off.
    pub copy_helper: Option<Arc<CopyHelper>>,
    /// Connections of TCP peers that waiting threads read themselves
    /// (`waiter_progress.rs`).
    pub waiter_progress: Arc<WaiterProgress>,
    /// What waiters on this rank's notification areas do while they spin;
    /// `None` when there is nothing (no copy help, no TCP peer).
    pub wait_work: Option<Arc<WaitWork>>,
    /// The network transports this rank opened (`transport/registry.rs`):
    /// each registers every host segment this rank creates.
    pub network: Vec<Arc<dyn NetworkTransport>>,
    /// Peers' requests into this rank's GPU segments in flight on the
    /// apply streams (`transport/tcp/gpu_apply.rs`).
    pub gpu_apply: Arc<crate::transport::tcp::gpu_apply::GpuApply>,
}

/// How long `term` waits for its goodbyes to reach peers that do not
/// read (stopped ones); past it the rank leaves anyway.
const GOODBYE_FLUSH: Duration = Duration::from_secs(2);
/// How long `term` waits for the progress engine to read every connection
/// before its goodbye (the engine never blocks: milliseconds).
const SWEEP_BOUND: Duration = Duration::from_millis(500);

impl Inner {
    /// Sends the answers waiters left owed to peers, if any (progress
    /// engine; see `transport/tcp/serve.rs`, `SettleStash`).
    pub fn send_owed_answers(&self) {
        // Peers' requests the GPU apply streams finished (one load when
        // none is in flight).
        crate::transport::tcp::serve::complete_gpu_applies(self);
        if !self.waiter_progress.take_owed() {
            return;
        }
        for (r, peer) in self.base.peers.iter() {
            if let Some(owed) = peer.settle_stash.take_frames() {
                let _ = self
                    .base
                    .peers
                    .send_frame_by(r, &owed, Urgency::Now, "settle");
            }
        }
    }

    /// Wakes threads waiting on replies or on the system segment.
    pub fn wake_all(&self) {
        for q in &self.protocol.queues {
            q.outstanding.wake();
        }
        self.base.system.notifications.signal();
        self.groups.wake();
        self.passive.wake();
        self.base.peers.wake_replies();
    }

    /// Maps a segment that `owner` registered with this rank.
    pub fn attach(
        &self,
        owner: Rank,
        seg: usize,
        desc: &crate::model::descriptor::SegmentDescriptor,
    ) -> Result<()> {
        let transport = self
            .base
            .transport(owner)?
            .ok_or_else(|| Error::NoTransport {
                rank: owner,
                reason: "it is on another host and no network transport is available yet".into(),
            })?;
        let remote = transport
            .attach(owner, seg as u8, desc, &self.gpu.home)
            .map_err(|e| self.owner_gone(owner, e))?;
        self.base
            .tables
            .update(|t| t.set_remote(owner.0 as usize, seg, Some(remote.into())));
        Ok(())
    }

    /// `e`, unless it says that the process of `owner` has ended (its
    /// memory could not be opened because of that): then the error that
    /// names `owner` as gone, terminated if it said goodbye, else dead.
    pub fn owner_gone(&self, owner: Rank, e: Error) -> Error {
        match e {
            Error::Segment(gaspi_segments::SegmentError::OwnerGone { .. }) => self
                .base
                .peers
                .peer_ok(owner)
                .err()
                .unwrap_or(Error::PeerDead { rank: owner }),
            e => e,
        }
    }

    /// Forgets a segment `owner` registered with this rank.
    pub fn detach(&self, owner: Rank, seg: usize) {
        self.base
            .tables
            .update(|t| t.set_remote(owner.0 as usize, seg, None));
    }
}

/// The TCP transport's target side reads the rank through this
/// (`transport/tcp/serve.rs`).
impl crate::transport::tcp::serve::TcpHost for Inner {
    #[inline]
    fn rank(&self) -> Rank {
        self.base.rank
    }

    #[inline]
    fn peers(&self) -> &Peers {
        &self.base.peers
    }

    #[inline]
    fn tables(&self) -> &SegmentTables {
        &self.base.tables
    }

    #[inline]
    fn posted_reads(&self) -> &crate::transport::tcp::PostedReads {
        &self.posted_reads
    }

    #[inline]
    fn outstanding(&self, queue: usize) -> Option<&crate::transport::outstanding::Outstanding> {
        self.protocol.queues.get(queue).map(|q| &*q.outstanding)
    }

    #[inline]
    fn owed_answers(&self) {
        self.waiter_progress.owed_answers(&self.base.peers);
    }

    #[inline]
    fn gpu_apply(&self) -> &Arc<crate::transport::tcp::gpu_apply::GpuApply> {
        &self.gpu_apply
    }
}

/// What the runtime does on news of a peer from the network layer.
struct InnerEvents(std::sync::Weak<Inner>);

impl PeerEvents for InnerEvents {
    fn gone(&self, rank: Rank) {
        if let Some(inner) = self.0.upgrade() {
            // Reads it will never answer: let their segments go.
            inner.posted_reads.forget_rank(rank);
            inner.wake_all();
        }
    }

    fn before_reply_sleep(
        &self,
        rank: Rank,
        deadline: Option<Instant>,
        waiting: &dyn Fn() -> bool,
    ) {
        // A TCP peer's answer (an atomic's old value, say): read its
        // connection here for the spin budget before sleeping
        // (`waiter_progress.rs`).
        let Some(inner) = self.0.upgrade() else {
            return;
        };
        if inner.base.transport_name(rank) == "tcp" {
            inner
                .waiter_progress
                .spin_while(inner.base.config.effective_spin(), deadline, waiting);
        }
    }
}

/// Raises this process's soft limit on open files to its hard limit: a
/// rank holds a descriptor per connected peer, and the usual soft limit of
/// 1024 would cap a job at about a thousand ranks (GPI-2's issue #66).
fn raise_fd_limit() {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the one rlimit struct
    // passed, which lives across both calls.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < lim.rlim_max {
            lim.rlim_cur = lim.rlim_max;
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                tracing::debug!("could not raise the open-file limit");
            }
        }
    }
}

/// A rank's handle on the job: every GASPI call is a method of it.
///
/// `Gaspi` is `Send + Sync`: threads may share it. Dropping it terminates
/// the rank (as [`Gaspi::term`] does, ignoring errors).
///
/// ```no_run
/// use gaspi::{Config, Gaspi, Group, Memory, NotifyId, Queue, Rank, SegId, Timeout};
/// let gaspi = Gaspi::init(Config::from_env()?.standalone_ranks(2))?;
/// let seg = gaspi.segment_create(SegId(0), 1 << 20, Memory::Host, Group::ALL, Timeout::Block)?;
/// let peer = Rank((gaspi.rank().0 + 1) % gaspi.size());
/// seg.write(0, &[gaspi.rank().0 as u64])?;
/// gaspi.write_notify(SegId(0), 0, peer, SegId(0), 4096, 8, NotifyId(7), 1, Queue(0))?;
/// gaspi.wait(Queue(0), Timeout::Block)?;
/// let id = gaspi.notify_waitsome(SegId(0), NotifyId(0), 64, Timeout::Ms(1000))?;
/// let value = gaspi.notify_reset(SegId(0), id)?;
/// assert_eq!((id, value), (NotifyId(7), 1));
/// # Ok::<(), gaspi::Error>(())
/// ```
#[derive(Debug)]
pub struct Gaspi {
    pub(crate) inner: Arc<Inner>,
    engine: Mutex<Option<ProgressEngine>>,
    /// Rank 0's endpoint directory, while it serves (decision 0065).
    directory: Mutex<Option<rendezvous::DirectoryThread>>,
    /// The PMIx session under the PMIx bootstrap, finalized when the rank
    /// terminates (decision 0084).
    #[cfg(feature = "pmix")]
    pmix: Option<crate::net::pmix::PmixEndpoints>,
    /// The bootstrap used and its traffic through this rank.
    bootstrap: String,
    traffic: Arc<rendezvous::Traffic>,
    connections: usize,
}

/// What the start-up cost this rank ([`Gaspi::startup`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StartupStats {
    /// The bootstrap that started the job, as the start-up log line names it.
    pub bootstrap: String,
    /// Bytes this rank sent for the bootstrap so far (start-up, and on rank
    /// 0 the answers of its endpoint directory), as the kernel counts them.
    pub sent_bytes: u64,
    /// Bytes this rank received for the bootstrap so far (and for the
    /// endpoint lookups it made).
    pub received_bytes: u64,
    /// Control connections this rank held when `init` returned.
    pub connections: usize,
}

impl Gaspi {
    /// Starts this rank: reads the launch, meets the other ranks, maps the
    /// same-host peers, starts the progress engine.
    ///
    /// Without a launcher and with [`Config::standalone_ranks`] above 1,
    /// this process becomes the launcher of that many copies of itself and
    /// exits with the job's exit code; `init` returns in the copies.
    pub fn init(mut config: Config) -> Result<Gaspi> {
        config.validate()?;
        if config.launch.is_standalone() && config.standalone_ranks > 1 {
            let code = crate::launcher::relaunch_self(config.standalone_ranks)?;
            std::process::exit(code);
        }
        crate::launcher::adopt_lifeline();
        // Under a PMIx server (decision 0084): rank, size and the job key
        // from PMIx before anything reads them.
        #[cfg(feature = "pmix")]
        let pmix = match config.launch.launcher {
            gaspi_launch::Launcher::Pmix => Some(crate::net::pmix::start(
                &mut config.launch,
                Instant::now() + config.init_timeout,
            )?),
            _ => None,
        };
        #[cfg(not(feature = "pmix"))]
        if config.launch.launcher == gaspi_launch::Launcher::Pmix {
            return Err(Error::Config(
                "launched for the PMIx bootstrap, but this build of the runtime has no feature \
                 pmix"
                    .into(),
            ));
        }
        let under_pmix = config.launch.launcher == gaspi_launch::Launcher::Pmix;
        // Decided once: the choice reads the cores this process may use,
        // which under cgroups means reading /proc (tens of microseconds),
        // and waits ask for it on every call.
        config.spin = Some(config.effective_spin());
        let info = config.launch.clone();
        let rank = Rank(info.rank);
        let size = info.size;
        let deadline = Instant::now() + config.init_timeout;
        let copy_assist_min = config.effective_copy_assist_min();
        let copy_helper = copy_assist_min.map(|_| Arc::new(CopyHelper::default()));
        let mut system = LocalSegment::alloc_host(
            SegId(SYSTEM_SEG as u8),
            (system_data_size(
                config.group_max,
                size,
                allreduce_slot(config.allreduce_elem_max),
            ) + BOARD_BYTES) as u64,
            system_notifications(config.group_max, size),
            config.effective_spin(),
        )?;
        // Rank 0 takes the rendezvous port before it binds any port of its
        // own: those come from the kernel's ephemeral range, where a port a
        // launcher (or a test) just probed free for the rendezvous lies too,
        // and the control listener once got exactly that port (CI,
        // `strangers`: "binding the rendezvous: Address already in use").
        let rendezvous = if rank.0 == 0 && size > 1 && !under_pmix {
            Some(rendezvous::rendezvous_listener(&info)?)
        } else {
            None
        };
        // The network transports this rank may use to other hosts
        // (`transport/registry.rs`); each registers the system segment.
        let network = registry::open_network(&config, rank, size)?;
        for t in &network {
            t.register(&mut system)?;
        }
        let (listener, control) = rendezvous::control_listener_for(&info)?;
        let me_host = HostId::current()?;
        let me = Endpoint {
            rank: rank.0,
            host: me_host.clone(),
            hostname: nix::unistd::gethostname()
                .map(|h| h.to_string_lossy().into_owned())
                .unwrap_or_default(),
            pid: std::process::id(),
            control,
            system: system.descriptor.clone(),
            transports: registry::endpoints(&network)?,
        };
        raise_fd_limit();
        // Every rank checks in with rank 0; the start-up tree's connections
        // stay open (decision 0065); every other pair connects on first use.
        let tree = rendezvous::Tree {
            size,
            fanout: config.startup_fanout,
        };
        let traffic = Arc::new(rendezvous::Traffic::default());
        // Under PMIx every rank puts its endpoint and joins the tree
        // through its parent's, from PMIx: nothing checks in with rank 0.
        #[cfg(feature = "pmix")]
        let joined = match (&pmix, size > 1) {
            (Some(p), true) => {
                p.publish(&me)?;
                Some(rendezvous::join_tree(
                    &info,
                    me.clone(),
                    |r| p.endpoint(r, deadline),
                    &listener,
                    tree,
                    deadline,
                )?)
            }
            _ => None,
        };
        #[cfg(not(feature = "pmix"))]
        let joined: Option<rendezvous::Start> = None;
        let start = if let Some(joined) = joined {
            joined
        } else if size > 1 {
            rendezvous::exchange_endpoints(
                &info,
                me,
                rendezvous,
                &listener,
                tree,
                config.endpoints_eager_max,
                &traffic,
                deadline,
            )?
        } else {
            rendezvous::Start {
                table: vec![Some(me)],
                whole: true,
                tree: Vec::new(),
                directory: None,
            }
        };
        let rendezvous::Start {
            table,
            whole,
            tree: mut star,
            directory,
        } = start;
        let here = me_host.clone();
        let shm: Arc<dyn Transport> = Arc::new(SharedMemoryTransport);
        let tcp = Arc::new(TcpTransport::default());
        let tcp_dyn: Arc<dyn Transport> = tcp.clone();
        // The transport to a peer, from its endpoint: decided for every
        // peer now when this rank knows them all, else on first use.
        let choose = {
            let (config, network, shm, tcp) = (
                config.clone(),
                network.clone(),
                shm.clone(),
                tcp_dyn.clone(),
            );
            move |peer: Rank, ep: &Endpoint| -> Result<Option<Arc<dyn Transport>>> {
                // A rank reaches itself through shared memory whatever else.
                let same_host =
                    ep.host == here && (peer == rank || config.transport == TransportChoice::Auto);
                Ok(Some(if same_host {
                    shm.clone()
                } else {
                    registry::connect_pair(&config, &network, rank, peer, &ep.transports)?
                        .unwrap_or_else(|| tcp.clone())
                }))
            }
        };
        let mut peers = Vec::with_capacity(size as usize);
        let mut transports = Vec::with_capacity(size as usize);
        for (r, ep) in table.into_iter().enumerate() {
            let r = Rank(r as u32);
            transports.push(match (&ep, whole || r == rank) {
                (Some(ep), true) => Some(choose(r, ep)?),
                _ => None,
            });
            peers.push(Peer::new(ep));
        }
        #[cfg(feature = "pmix")]
        let pmix_lookups = pmix
            .clone()
            .map(|p| Box::new(p) as Box<dyn rendezvous::EndpointSource>);
        #[cfg(not(feature = "pmix"))]
        let pmix_lookups: Option<Box<dyn rendezvous::EndpointSource>> = None;
        let lookups = pmix_lookups.or_else(|| {
            (!whole).then_some(info.rendezvous).flatten().map(|addr| {
                Box::new(rendezvous::Directory {
                    addr,
                    key: config.launch.job_key.clone(),
                    traffic: traffic.clone(),
                }) as Box<dyn rendezvous::EndpointSource>
            })
        });
        // Peers reached over TCP: a spinning waiter reads their
        // connections itself, so it does not wait for (or starve) the
        // progress engine, and spins as long as any waiter does. A job
        // that decides transports on first use may meet TCP peers later.
        let tcp_peers = !whole
            || transports.iter().any(|t| {
                t.as_ref()
                    .is_some_and(|t| t.as_ref().is_some_and(|t| t.name() == "tcp"))
            });
        // Waiters help with copies posted to this rank and read the
        // connections of TCP peers while they spin (`waiter_progress.rs`).
        let waiter_progress = Arc::new(WaiterProgress::default());
        let wait_work = WaitWork::new(
            copy_helper.clone(),
            tcp_peers.then(|| waiter_progress.clone()),
            &network,
        );
        if let Some(work) = &wait_work {
            system.notifications.set_spin_work(work.clone());
        }
        let system = Arc::new(system);
        let peers = Arc::new(Peers::new(
            rank,
            peers,
            config.launch.job_key.clone(),
            config.peer_timeout,
            lookups,
        ));
        let base = Arc::new(Base::new(
            config,
            rank,
            size,
            peers,
            transports,
            Box::new(choose),
            SegmentTables::new(size),
            system,
        ));
        let gpu = Arc::new(crate::gpu::Gpu::new(base.clone()));
        let inner = Arc::new(Inner {
            groups: GroupTable::new(base.config.group_max, size),
            posted_reads: tcp.posted_reads(),
            abandoned_atomics: Default::default(),
            passive: crate::passive::Inbox::default(),
            copy_helper,
            waiter_progress,
            wait_work,
            protocol: crate::protocol::Protocol {
                base: base.clone(),
                gpu: gpu.clone(),
                queues: (0..base.config.queue_max)
                    .map(|q| QueueState::new(q, size, q < base.config.queue_num))
                    .collect(),
                copy_assist_min: copy_assist_min.unwrap_or(u64::MAX),
            },
            gpu,
            base,
            network,
            gpu_apply: Default::default(),
        });
        if let Some(helper) = &inner.copy_helper {
            helper.bind(Arc::downgrade(&inner.base));
        }
        tcp.bind(Arc::downgrade(&inner.base.peers));
        inner
            .base
            .peers
            .set_events(Box::new(InnerEvents(Arc::downgrade(&inner))));
        inner
            .waiter_progress
            .bind(Arc::downgrade(&inner) as std::sync::Weak<dyn crate::waiter_progress::WaiterHost>);
        for t in &inner.network {
            t.bind(
                Arc::downgrade(&inner.base.peers),
                inner
                    .protocol
                    .queues
                    .iter()
                    .map(|q| q.outstanding.clone())
                    .collect(),
                tcp_dyn.clone(),
            )?;
        }
        // Every peer's system segment (mapped, for same-host peers), then
        // the start barrier: no rank leaves init before every rank has
        // mapped the memory of its same-host peers, which is opened through
        // its owner's descriptors and so needs the owner alive (decision
        // 0028). A rank that fails here tells rank 0, which stops the
        // whole job's start-up with its reason.
        let mapped = (0..size).try_for_each(|r| {
            if !whole && r != rank.0 {
                return Ok(());
            }
            let desc = inner.base.peers.endpoint(Rank(r))?.system.clone();
            match inner.base.transport(Rank(r))?.is_some() {
                true => inner.attach(Rank(r), SYSTEM_SEG, &desc),
                false => Ok(()),
            }
        });
        rendezvous::finish_start(&info, &mut star, mapped, deadline)?;
        // In a job whose ranks do not know every peer, a peer's system
        // segment is attached on first use (decision 0065).
        if !whole {
            let weak = Arc::downgrade(&inner);
            let _ = inner
                .base
                .attach_system
                .set(Box::new(move |r: Rank| -> Result<()> {
                    let Some(inner) = weak.upgrade() else {
                        return Err(Error::Protocol("the rank is terminating".into()));
                    };
                    let desc = inner.base.peers.endpoint(r)?.system.clone();
                    match inner.base.transport(r)?.is_some() {
                        true => inner.attach(r, SYSTEM_SEG, &desc),
                        false => Ok(()),
                    }
                }));
        }
        // Rank 0 answers lookups from here on.
        let directory = directory.map(|d| d.serve()).transpose()?;
        // The tree's connections become control connections.
        let mut readers = Vec::with_capacity(star.len());
        for (r, c) in star {
            traffic.add(&c);
            crate::net::connection::watch_liveness(&c, inner.base.config.peer_timeout)?;
            let c = Arc::new(c);
            let _ = inner.base.peers[Rank(r)]
                .control
                .set(ControlOut::new(c.clone())?);
            readers.push((Rank(r), c));
        }
        let connections = readers.len();
        let engine = ProgressEngine::start(inner.clone(), readers, listener)?;
        // Ranks reached per transport, for the start-up line: shared
        // memory, TCP and every network transport of this build, each
        // said even when it reaches none (of the peers whose transport is
        // decided: all when the rank knows every endpoint).
        let reached = ["shm", "tcp"]
            .into_iter()
            .chain(registry::NETWORK.iter().map(|(n, _)| *n))
            .map(|name| {
                let k = (0..size)
                    .filter(|&r| {
                        r != rank.0
                            && inner
                                .base
                                .transport_known(Rank(r))
                                .is_some_and(|t| t.name() == name)
                    })
                    .count();
                format!("{name} to {k} ranks")
            })
            .collect::<Vec<_>>()
            .join(", ");
        let bootstrap = match (under_pmix, whole) {
            (true, _) => format!(
                "PMIx (endpoints on first use with PMIx_Get, tree fan-out {})",
                tree.fanout
            ),
            (false, true) => format!(
                "gaspi rendezvous (whole table, tree fan-out {})",
                tree.fanout
            ),
            (false, false) => format!(
                "gaspi rendezvous (endpoints on first use from rank 0, tree fan-out {})",
                tree.fanout
            ),
        };
        // A PMIx server started the process, but our own rendezvous ran:
        // say why (decision 0084).
        let bootstrap = match (under_pmix, info.pmix_server) {
            (false, true) if !gaspi_launch::PMIX_BUILT => format!(
                "{bootstrap}; a PMIx server started this process, but this build has no PMIx \
                 bootstrap (feature pmix): the launcher's variables were used"
            ),
            (false, true) => {
                format!("{bootstrap}; a PMIx server started this process, but GASPI_BOOTSTRAP=own")
            }
            _ => bootstrap,
        };
        tracing::info!(
            rank = rank.0,
            size,
            "GASPI rank {} of {} up (launcher {:?}, bootstrap {}); transports: {}",
            rank.0,
            size,
            inner.base.config.launch.launcher,
            bootstrap,
            reached,
        );
        Ok(Gaspi {
            inner,
            engine: Mutex::new(Some(engine)),
            directory: Mutex::new(directory),
            #[cfg(feature = "pmix")]
            pmix,
            bootstrap,
            traffic,
            connections,
        })
    }

    /// Ends this rank's part in the job: tells the peers, stops the progress
    /// engine. Segments stay valid while handles to them exist.
    pub fn term(self) -> Result<()> {
        self.shutdown();
        Ok(())
    }

    fn shutdown(&self) {
        self.inner.gpu.owner_copies.stop_owner_inbox();
        drop(
            self.directory
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take(),
        );
        let Some(mut engine) = self.engine.lock().unwrap_or_else(|e| e.into_inner()).take() else {
            return;
        };
        // Deaths this rank can see go out before its goodbye: a call that
        // failed naming a dead rank may have seen a send fail before the
        // engine read that rank's end (decision 0018).
        self.inner.base.peers.sweep(SWEEP_BOUND);
        // What went out over a network transport lands before the goodbye.
        for t in &self.inner.network {
            t.flush(GOODBYE_FLUSH);
        }
        // Goodbye to every peer this rank is connected to (the engine says
        // it on the connections that only carry the peers' frames).
        for r in 0..self.inner.base.size {
            let connected = self.inner.base.peers[Rank(r)].control.get().is_some();
            if r != self.inner.base.rank.0
                && connected
                && self.inner.base.peers.peer_ok(Rank(r)).is_ok()
            {
                let _ = self.inner.base.peers.send(Rank(r), &Message::Goodbye);
            }
        }
        // A peer that reads nothing (stopped) cannot hold the exit longer.
        self.inner.base.peers.flush_all(GOODBYE_FLUSH);
        engine.stop();
        // The PMIx server sees the rank finish in order.
        #[cfg(feature = "pmix")]
        if let Some(p) = &self.pmix {
            p.session.finalize();
        }
    }

    /// The bootstrap that started the job and what it cost this rank so
    /// far: bytes sent and received (on rank 0 these grow with the lookups
    /// its endpoint directory answers) and control connections at start.
    pub fn startup(&self) -> StartupStats {
        use std::sync::atomic::Ordering::Relaxed;
        StartupStats {
            bootstrap: self.bootstrap.clone(),
            sent_bytes: self.traffic.sent.load(Relaxed),
            received_bytes: self.traffic.received.load(Relaxed),
            connections: self.connections,
        }
    }

    /// This rank.
    pub fn rank(&self) -> Rank {
        self.inner.base.rank
    }

    /// Number of ranks in the job.
    pub fn size(&self) -> u32 {
        self.inner.base.size
    }

    /// The configuration in force.
    pub fn config(&self) -> &Config {
        &self.inner.base.config
    }

    /// The error-state vector: the health of every rank as seen from here.
    pub fn state_vec(&self) -> Vec<RankState> {
        (0..self.inner.base.size)
            .map(|r| self.inner.base.peers.state_of(Rank(r)))
            .collect()
    }

    /// Name of the transport that reaches `rank`: "shm" (shared memory,
    /// CUDA IPC for GPU segments), "tcp", "verbs" or "libfabric" (see
    /// [`Self::transport_provider`] for which provider).
    pub fn transport(&self, rank: Rank) -> Result<&'static str> {
        self.inner.base.peers.check_rank(rank)?;
        Ok(self.inner.base.transport_name(rank))
    }

    /// The provider under the transport that reaches `rank`, where the
    /// transport runs over one chosen at start-up: libfabric's (`cxi`,
    /// `efa`, `verbs;ofi_rxm`, `tcp;ofi_rxm`, ..., as `GASPI_NET_PROVIDER`
    /// or `fi_getinfo` chose it); `None` for the others.
    ///
    /// ```no_run
    /// use gaspi::{Config, Gaspi, Rank};
    /// let g = Gaspi::init(Config::from_env()?)?;
    /// let to = Rank((g.rank().0 + 1) % g.size());
    /// match g.transport_provider(to)? {
    ///     Some(p) => println!("{} over {p}", g.transport(to)?),
    ///     None => println!("{}", g.transport(to)?),
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn transport_provider(&self, rank: Rank) -> Result<Option<String>> {
        self.inner.base.peers.check_rank(rank)?;
        Ok(self.inner.base.transport_provider(rank))
    }

    /// The ranks this rank has a control connection to, ascending. At
    /// start-up rank 0 is connected to every rank and every rank to rank 0;
    /// other pairs connect when one first sends to the other (a request
    /// over TCP, a segment registration, a passive message).
    ///
    /// ```no_run
    /// use gaspi::{Config, Gaspi, Rank};
    /// let g = Gaspi::init(Config::from_env()?)?;
    /// if g.rank() != Rank(0) {
    ///     assert_eq!(g.connections(), vec![Rank(0)]);
    /// }
    /// # Ok::<(), gaspi::Error>(())
    /// ```
    pub fn connections(&self) -> Vec<Rank> {
        (0..self.inner.base.size)
            .map(Rank)
            .filter(|&r| r != self.inner.base.rank && self.inner.base.peers.connected(r))
            .collect()
    }

    /// Checks that `rank` is alive and answering, within `timeout`.
    pub fn proc_ping(&self, rank: Rank, timeout: crate::Timeout) -> Result<()> {
        self.inner.base.peers.check_rank(rank)?;
        if rank == self.inner.base.rank {
            return Ok(());
        }
        self.inner.base.peers.request(
            rank,
            |token| Message::Ping { token },
            timeout.deadline(),
            "proc_ping",
        )
    }

    /// The statistics of this rank since init or the last
    /// [`Gaspi::statistics_reset`].
    pub fn statistics(&self) -> crate::Statistics {
        self.inner.base.stats.read()
    }

    /// Sets every statistics counter of this rank back to zero.
    pub fn statistics_reset(&self) {
        self.inner.base.stats.reset()
    }

    /// Stops another rank (it exits at once, as if killed).
    pub fn proc_kill(&self, rank: Rank) -> Result<()> {
        self.inner.base.peers.check_rank(rank)?;
        if rank == self.inner.base.rank {
            return Err(Error::BadRank {
                rank,
                size: self.inner.base.size,
            });
        }
        self.inner.base.peers.send(rank, &Message::Kill)
    }
}

impl Drop for Gaspi {
    fn drop(&mut self) {
        self.shutdown();
        // This thread's cached table snapshot would otherwise free the
        // segments (GPU memory, mappings) from a thread-local destructor at
        // exit, where logging from their Drop panics.
        crate::transport::tables::forget_cached();
    }
}
