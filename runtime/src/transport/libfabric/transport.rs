//! The libfabric network transport: the layer below (`Endpoint`,
//! `MemoryRegion`, ...) behind the runtime's seam, [`NetworkTransport`]
//! and [`RemoteSegment`] (`transport/mod.rs`), registered as `libfabric`
//! in `transport/registry.rs`.
//!
//! - **Start-up.** [`open`] finds the provider (`GASPI_NET_PROVIDER`, else
//!   the best one offered, see [`Query`]), bound for the socket-based
//!   providers to the address this host reaches the rendezvous from (so
//!   that ranks in different network namespaces or on different hosts pick
//!   the interface that joins them), and opens one endpoint per rank. Its
//!   endpoint bytes ([`NetworkTransport::endpoint`]) are the provider's
//!   name and the endpoint's address; `connect` inserts a peer's address
//!   in the address vector (a peer on another provider is refused, named).
//!   Under `GASPI_TRANSPORT=auto` a provider over sockets (`tcp;ofi_rxm`)
//!   is opened only when `GASPI_NET_PROVIDER` names it: it is no better
//!   than the runtime's own TCP.
//! - **Memory.** Every host segment's data and notification words are
//!   registered when it is created; the two [`RemoteMemory`] values (48
//!   bytes) are the segment descriptor's `libfabric` key. The registration
//!   lives in the segment and is closed before its memory is unmapped.
//! - **Operations.** `write` = [`Endpoint::write`] from the registered
//!   source segment where it lies (GASPI leaves a write's source unchanged
//!   until `wait`), else from a registered staging copy; `notify` =
//!   [`Endpoint::notify`], which the layer orders after every write posted
//!   before it to that peer ([`super::libfabric::NotifyOrder`]); `read` =
//!   [`Endpoint::read`] straight into the registered local segment;
//!   `read_notify` sets the local word when every read posted before it to
//!   that owner has completed (libfabric does not complete reads in
//!   order). Atomics go to the owner by default (a NIC atomic is atomic
//!   only against other NIC atomics); with `GASPI_NET_ATOMICS=nic` and a
//!   provider that offers u64 fetch-add and compare-swap, they are
//!   libfabric atomics.
//! - **Completion.** Every operation carries a token (rank, request id);
//!   its event settles the request on its queue's count
//!   ([`Outstanding`]). A failed one marks the peer corrupt and fails the
//!   queue's next `wait` naming it. A thread reads the completion queue,
//!   sleeping on its wait descriptor; under manual progress
//!   (`tcp;ofi_rxm`, `verbs;ofi_rxm`) that thread is also what applies
//!   peers' writes to this rank's memory. `wait` reads it too while it
//!   spins ([`NetworkTransport::progress`]).
//! - **Shutdown.** [`NetworkTransport::flush`] reads 4 bytes from every
//!   rank written to and waits: the target answers after applying the
//!   writes before it, so a peer told of this rank's end has its last
//!   notifications (decision 0049).
//! - **Not here yet.** GPU segments are not registered: their descriptors
//!   carry no key, and peers reach them through TCP (the fallback).

use super::libfabric::{
    Access, AddressVector, Endpoint, Event, FabricError, LocalSlice, MemoryRegion, Node,
    NotifyOrder, Peer, Query, RemoteMemory, Token,
};
use crate::model::config::{net_device_entry, TransportChoice};
use crate::model::descriptor::SegmentDescriptor;
use crate::model::error::{Error, Result};
use crate::model::ids::{AtomicOp, Rank};
use crate::net::peers::Peers;
use crate::segments::LocalSegment;
use crate::transport::completions::{self, Requests, Slot};
use crate::transport::outstanding::Outstanding;
use crate::transport::{
    Capabilities, Completion, GpuView, NetworkTransport, RemoteSegment, Transport, Via,
};
use gaspi_notify::{NotificationArea, WakeMode};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// This transport's name in `GASPI_TRANSPORT`, logs, keys and endpoints.
pub(crate) const NAME: &str = "libfabric";

/// Bytes of a notification area's header: word `i` is at `128 + 4 i`.
const WORDS_HEADER: u64 = 128;

fn fabric_error(e: FabricError) -> Error {
    Error::Libfabric(e.to_string())
}

/// Opens the libfabric transport for the registry (`transport/registry.rs`).
pub(crate) fn open(
    config: &crate::Config,
    rank: Rank,
    size: u32,
) -> Result<Arc<dyn NetworkTransport>> {
    Ok(Arc::new(FabricTransport::open(config, rank, size)?))
}

/// The address of this host's interface that reaches `to` (the route the
/// kernel picks; nothing is sent).
fn source_towards(to: std::net::SocketAddr) -> Option<String> {
    let any: std::net::SocketAddr = if to.is_ipv4() {
        "0.0.0.0:0".parse().ok()?
    } else {
        "[::]:0".parse().ok()?
    };
    let s = std::net::UdpSocket::bind(any).ok()?;
    s.connect(to).ok()?;
    let ip = s.local_addr().ok()?.ip();
    (!ip.is_unspecified()).then(|| ip.to_string())
}

/// A host segment's registration: its data and its notification words.
#[derive(Debug)]
struct Registration {
    /// `None` for a segment of 0 bytes.
    data: Option<MemoryRegion<'static>>,
    /// Kept open while the segment lives.
    _words: MemoryRegion<'static>,
    /// Takes the segment out of [`Shared::targets`] when it goes.
    _target: Option<TargetGuard>,
}

/// Notifications that arrive as remote CQ data (one write carries the
/// data and its notification, see [`DataForm`]) are set by
/// this rank when it reads the event: where each segment's words are.
#[derive(Debug)]
struct Target {
    /// Which registration made the entry (a segment id is reused after a
    /// delete).
    generation: u64,
    /// A view of the segment's notification area, valid while the entry
    /// is in the table: the segment's [`Registration`] (dropped before
    /// the memory is unmapped) takes it out under the table's lock.
    words: NotificationArea,
}

/// Removes its segment's entry from [`Shared::targets`] on drop.
#[derive(Debug)]
struct TargetGuard {
    shared: Weak<Shared>,
    seg: u8,
    generation: u64,
}

impl Drop for TargetGuard {
    fn drop(&mut self) {
        if let Some(s) = self.shared.upgrade() {
            let mut targets = s.targets.lock().unwrap_or_else(|e| e.into_inner());
            if targets.get(&self.seg).map(|t| t.generation) == Some(self.generation) {
                targets.remove(&self.seg);
            }
        }
    }
}

/// How a notification is packed into a write's remote CQ data: as
/// many bytes as the provider carries (decisions 0050, 0052).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum DataForm {
    /// 8 bytes (`tcp;ofi_rxm`): the target's segment id (8 bits), the
    /// notification id (24), the value (32).
    Wide,
    /// 4 bytes (`verbs;ofi_rxm`, `efa`): the segment id (8 bits), the
    /// notification id (16), the value (8). A notification past that (an
    /// id of 65536 or more, a value above 255) has its word written apart
    /// by the provider, so the target's waiters read the completion queue
    /// once more after they see a word ([`NetworkTransport::settle_in_waits`]):
    /// the events of earlier notifications are in the queue before a later
    /// word lands (the writes' order), and are set before the wait returns.
    Compact,
}

impl DataForm {
    /// The form for `bytes` of remote CQ data, at most `limit` of them
    /// (`GASPI_NET_CQ_DATA`); `None`: too few to carry a notification.
    fn for_bytes(bytes: usize, limit: Option<u8>) -> Option<DataForm> {
        match bytes.min(limit.map_or(8, usize::from)) {
            8.. => Some(DataForm::Wide),
            4..=7 => Some(DataForm::Compact),
            _ => None,
        }
    }

    /// The CQ data that carries notification `id` = `value` to segment
    /// `seg`; `None` where it does not fit (the word is then written apart).
    fn encode(self, seg: u8, id: u32, value: u32) -> Option<u64> {
        match self {
            DataForm::Wide => (id < 1 << 24)
                .then(|| (u64::from(seg) << 56) | (u64::from(id) << 32) | u64::from(value)),
            DataForm::Compact => (id < 1 << 16 && value < 1 << 8)
                .then(|| (u64::from(seg) << 24) | (u64::from(id) << 8) | u64::from(value)),
        }
    }

    /// The inverse of [`Self::encode`]: (segment, id, value).
    fn decode(self, data: u64) -> (u8, u32, u32) {
        match self {
            DataForm::Wide => (
                (data >> 56) as u8,
                ((data >> 32) & 0xff_ffff) as u32,
                data as u32,
            ),
            DataForm::Compact => (
                (data >> 24) as u8,
                ((data >> 8) & 0xffff) as u32,
                (data & 0xff) as u32,
            ),
        }
    }

    /// How the start-up line says it.
    fn name(self) -> &'static str {
        match self {
            DataForm::Wide => "8 bytes",
            DataForm::Compact => "4 bytes; ids past 65535 and values past 255 apart",
        }
    }
}

/// The keys of a peer's segment, as its descriptor carries them.
#[derive(Debug, Clone, Copy)]
struct Keys {
    data: RemoteMemory,
    words: RemoteMemory,
}

impl Keys {
    fn pack(&self) -> Vec<u8> {
        let mut b = self.data.to_bytes().to_vec();
        b.extend_from_slice(&self.words.to_bytes());
        b
    }

    fn unpack(desc: &SegmentDescriptor) -> Result<Option<Keys>> {
        let Some(b) = desc.key(NAME) else {
            return Ok(None);
        };
        if b.len() != 48 {
            return Err(Error::Protocol(format!(
                "a libfabric segment key of {} bytes (48 expected)",
                b.len()
            )));
        }
        let part = |i: usize| -> [u8; 24] { b[i..i + 24].try_into().expect("24 bytes") };
        Ok(Some(Keys {
            data: RemoteMemory::from_bytes(&part(0)),
            words: RemoteMemory::from_bytes(&part(24)),
        }))
    }
}

/// A registered buffer of our own: a write's staging copy, a read's
/// landing place, an atomic's scratch. 8-aligned.
#[derive(Debug)]
struct Staging {
    /// Declared first: closed before the buffer is freed.
    mr: MemoryRegion<'static>,
    buf: Box<[u64]>,
}

impl Staging {
    fn new(endpoint: &Arc<Endpoint>, len: usize) -> Result<Staging> {
        let mut buf = vec![0u64; len.max(1).div_ceil(8)].into_boxed_slice();
        // SAFETY: the box's heap memory does not move and is freed after
        // the registration (field order); it is reached through raw
        // pointers only while registered.
        let mr = unsafe {
            MemoryRegion::register_raw(endpoint, buf.as_mut_ptr().cast(), len.max(1), Access::LOCAL)
        }
        .map_err(fabric_error)?;
        Ok(Staging { mr, buf })
    }

    fn ptr(&self) -> *mut u8 {
        self.buf.as_ptr().cast_mut().cast()
    }
}

/// What a request does at its completion (keeping a staging copy).
type Then = completions::Then<Staging>;

/// A `read_notify` waiting for the reads posted before it to its owner.
#[derive(Debug)]
struct ReadNotify {
    seg: Arc<LocalSegment>,
    id: u32,
    value: u32,
    queue: Option<u32>,
}

/// Reads in flight to one owner, and the notifications waiting for them.
#[derive(Debug, Default)]
struct Reads {
    in_flight: u64,
    waiting: Vec<ReadNotify>,
}

/// The libfabric transport of this rank.
#[derive(Debug)]
pub(crate) struct FabricTransport {
    shared: Arc<Shared>,
    /// The TCP transport, for peers' segments not registered here (GPU).
    fallback: OnceLock<Arc<dyn Transport>>,
}

#[derive(Debug)]
struct Shared {
    endpoint: Arc<Endpoint>,
    av: Arc<AddressVector>,
    /// Each rank as the endpoint addresses it, once connected.
    peers: Vec<OnceLock<Peer>>,
    /// Requests in flight (ids fit a [`Token`]'s 32 bits); the extra is
    /// whether a request is a read (a later `read_notify` waits for it).
    requests: Requests<Staging, bool>,
    /// Reads in flight per owner (for `read_notify`).
    reads: Mutex<HashMap<u32, Reads>>,
    /// Whether this rank wrote to each rank since the last flush.
    wrote: Vec<AtomicBool>,
    /// Each rank's first segment attached (its system segment's words):
    /// where a flush reads from.
    flush_from: Vec<OnceLock<RemoteMemory>>,
    nic_atomics: bool,
    /// How a write_notify's notification rides on its write as remote CQ
    /// data, where it does (the provider offers 4 or 8 bytes of it and
    /// keeps writes in order or fences them): half the operations, and
    /// the target sets the word when it reads the event.
    data_form: Option<DataForm>,
    /// This rank's segments by id, for notifications arriving as data.
    targets: Mutex<HashMap<u8, Target>>,
    /// Held by the thread reading and handling completions ([`Shared::progress`]).
    reading: Mutex<()>,
    next_generation: AtomicU64,
    /// When a waiter last read the completion queue (nanoseconds since
    /// `epoch`): while waiters do, the completion thread does not sleep on
    /// the queue's descriptor, whose every wake-up would take a core from
    /// them (measured: 8 B half round trip 19-27 us with it, 12-14
    /// without, two ranks on two cores).
    waiter_read: AtomicU64,
    epoch: Instant,
}

impl NetworkTransport for FabricTransport {
    fn name(&self) -> &'static str {
        NAME
    }

    fn endpoint(&self) -> Result<Vec<u8>> {
        let provider = &self.shared.endpoint.attributes().provider;
        let address = self.shared.endpoint.address().map_err(fabric_error)?;
        let mut b = Vec::with_capacity(2 + provider.len() + address.len());
        b.extend_from_slice(&(provider.len() as u16).to_le_bytes());
        b.extend_from_slice(provider.as_bytes());
        b.extend_from_slice(&address);
        Ok(b)
    }

    fn connect(self: Arc<Self>, me: Rank, peer: Rank, theirs: &[u8]) -> Result<Arc<dyn Transport>> {
        let bad = || Error::Protocol(format!("{peer}'s libfabric endpoint is malformed"));
        let n = u16::from_le_bytes(
            theirs
                .get(..2)
                .ok_or_else(bad)?
                .try_into()
                .map_err(|_| bad())?,
        ) as usize;
        let provider =
            std::str::from_utf8(theirs.get(2..2 + n).ok_or_else(bad)?).map_err(|_| bad())?;
        let address = &theirs[2 + n..];
        let mine = &self.shared.endpoint.attributes().provider;
        if provider != mine {
            return Err(Error::NoTransport {
                rank: peer,
                reason: format!(
                    "{peer} opened the libfabric provider {provider:?} and {me} {mine:?} \
                     (set GASPI_NET_PROVIDER alike on every rank)"
                ),
            });
        }
        let slot = self
            .shared
            .peers
            .get(peer.0 as usize)
            .ok_or_else(|| Error::Protocol(format!("{peer} is beyond the job's size")))?;
        let p = self
            .shared
            .av
            .insert(address, peer.0)
            .map_err(fabric_error)?;
        let _ = slot.set(p);
        Ok(self)
    }

    fn register(&self, seg: &mut LocalSegment) -> Result<()> {
        if seg.is_gpu() {
            return Ok(());
        }
        let ep = &self.shared.endpoint;
        let words_len = WORDS_HEADER as usize + seg.notifications.count() as usize * 4;
        // SAFETY: the registration is stored in the segment, whose fields
        // drop it before the storage that maps this memory (field order in
        // LocalSegment); a bound segment's memory is kept by the user for
        // as long as the segment exists (segment_bind's contract). Peers
        // write into it, and the runtime reaches it through raw pointers
        // and atomics only.
        let data = match seg.size {
            0 => None,
            n => Some(
                unsafe { MemoryRegion::register_raw(ep, seg.data(), n, Access::ALL) }
                    .map_err(fabric_error)?,
            ),
        };
        // SAFETY: as above; the area (header and words) is mapped for the
        // segment's life.
        let words = unsafe {
            MemoryRegion::register_raw(ep, seg.notifications.base(), words_len, Access::ALL)
        }
        .map_err(fabric_error)?;
        let keys = Keys {
            data: data.as_ref().map_or(
                RemoteMemory {
                    base: 0,
                    len: 0,
                    key: 0,
                },
                |d| d.remote(),
            ),
            words: words.remote(),
        };
        seg.descriptor.set_key(NAME, keys.pack());
        let target = self.shared.data_form.is_some().then(|| {
            let s = &self.shared;
            let generation = s.next_generation.fetch_add(1, Ordering::Relaxed);
            // SAFETY: the area is mapped for the segment's life, and the
            // view leaves the table (TargetGuard, dropped with the
            // registration before the memory is unmapped) before that ends.
            let view = unsafe {
                NotificationArea::from_raw(
                    seg.notifications.base(),
                    seg.notifications.count(),
                    WakeMode::Futex,
                )
            };
            s.targets.lock().unwrap_or_else(|e| e.into_inner()).insert(
                seg.id.0,
                Target {
                    generation,
                    words: view,
                },
            );
            TargetGuard {
                shared: Arc::downgrade(s),
                seg: seg.id.0,
                generation,
            }
        });
        seg.registrations.push(Box::new(Registration {
            data,
            _words: words,
            _target: target,
        }));
        // The words are stored by the provider (or, under manual progress,
        // by the completion thread inside libfabric), a word sent apart
        // included where notifications travel as data (one that does not
        // fit the form): no futex wake.
        seg.notifications.mark_silent_writer();
        Ok(())
    }

    fn bind(
        &self,
        peers: Weak<Peers>,
        outstanding: Vec<Arc<Outstanding>>,
        fallback: Arc<dyn Transport>,
    ) -> Result<()> {
        let _ = self.fallback.set(fallback);
        let watch = peers.clone();
        self.shared.requests.bind(peers, outstanding);
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("gaspi-fabric-cq".into())
            .spawn(move || completion_thread(shared, watch))
            .map_err(|e| Error::io("starting the libfabric completion thread", e))?;
        Ok(())
    }

    fn progress(&self) {
        let s = &self.shared;
        s.waiter_read
            .store(s.epoch.elapsed().as_nanos() as u64, Ordering::Relaxed);
        s.progress();
    }

    fn progress_in_waits(&self) -> bool {
        // Notifications that arrive as data are set by whoever reads the
        // queue: a waiter does it itself rather than wait for the thread.
        self.shared.endpoint.attributes().manual_progress || self.shared.data_form.is_some()
    }

    fn settle_in_waits(&self) -> bool {
        // In the compact form some words are written by the provider while
        // earlier notifications wait in the queue as events (DataForm).
        self.shared.data_form == Some(DataForm::Compact)
    }

    /// A 4-byte read from every rank written to since the last flush,
    /// waited for: the target answers it after applying the writes before
    /// it (one ordered stream per pair under `tcp;ofi_rxm`, a queue pair's
    /// order under `verbs;ofi_rxm`; with delivery-complete writes, every
    /// write is in place when its completion is read).
    fn flush(&self, bound: Duration) {
        let s = &self.shared;
        let until = Instant::now() + bound;
        for r in 0..s.wrote.len() {
            if !s.wrote[r].swap(false, Ordering::AcqRel) {
                continue;
            }
            let Some(from) = s.flush_from[r].get().copied() else {
                continue;
            };
            let rank = Rank(r as u32);
            if let Err(e) = s.read_blocking(rank, &from, 0, 4, Some(until)) {
                tracing::debug!("flushing the libfabric writes to {rank}: {e}");
            }
        }
    }
}

impl FabricTransport {
    /// Opens the provider for this rank, sized for `size` ranks. Fails
    /// (the caller falls back to TCP or refuses, per `GASPI_TRANSPORT`)
    /// when no provider with RMA is offered or the one named is missing.
    pub fn open(config: &crate::Config, rank: Rank, size: u32) -> Result<FabricTransport> {
        let mut query = Query {
            provider: config.net_provider.clone(),
            atomics: config.net_atomics_nic,
            // GASPI_NET_DEVICE names the domain (a `:port` ignored), as
            // it names the verbs device.
            domain: net_device_entry(config.net_device.as_deref(), rank.0)
                .map(|(name, _port)| name.to_string()),
            ..Query::default()
        };
        // Socket-based providers bind to an interface: the one that
        // reaches the rendezvous (rank 0's host), as the control
        // connections do. Without a route, or where the provider serves
        // no such address, the provider chooses.
        let socket_based = query
            .provider
            .as_deref()
            .is_none_or(|p| p.starts_with("tcp") || p.starts_with("sockets"));
        if socket_based {
            query.source = config.launch.rendezvous.and_then(source_towards);
        }
        let node = match Node::open(&query, size as usize) {
            Err(FabricError::NoProvider { .. }) if query.source.is_some() => {
                query.source = None;
                Node::open(&query, size as usize)
            }
            other => other,
        }
        .map_err(fabric_error)?;
        let a = node.endpoint.attributes();
        // Under `auto`, a provider that runs over sockets itself is no
        // better than the runtime's own TCP transport: it is taken only
        // when asked for (GASPI_TRANSPORT=libfabric or GASPI_NET_PROVIDER).
        let software = ["tcp", "sockets", "udp"]
            .iter()
            .any(|p| a.provider.starts_with(p));
        if config.transport == TransportChoice::Auto && config.net_provider.is_none() && software {
            return Err(Error::Libfabric(format!(
                "only the software provider {} is offered here, no better than TCP \
                 (GASPI_TRANSPORT=libfabric or GASPI_NET_PROVIDER takes it)",
                a.provider
            )));
        }
        let data_form = DataForm::for_bytes(a.cq_data_bytes, config.net_cq_data)
            .filter(|_| a.order != NotifyOrder::DeliveryComplete);
        tracing::info!(
            rank = rank.0,
            "libfabric provider {} (domain {}, fabric {}), notifications {}{}, {}",
            a.provider,
            a.domain,
            a.fabric,
            match data_form {
                Some(f) => format!("as remote CQ data on their write ({}), ", f.name()),
                None => String::new(),
            },
            a.order.name(),
            if config.net_atomics_nic && node.endpoint.has_atomics() {
                "NIC atomics"
            } else {
                "atomics by the owner"
            }
        );
        Ok(FabricTransport {
            fallback: OnceLock::new(),
            shared: Arc::new(Shared {
                data_form,
                targets: Mutex::new(HashMap::new()),
                reading: Mutex::new(()),
                next_generation: AtomicU64::new(1),
                waiter_read: AtomicU64::new(0),
                epoch: Instant::now(),
                nic_atomics: config.net_atomics_nic && node.endpoint.has_atomics(),
                endpoint: node.endpoint,
                av: node.peers,
                peers: (0..size).map(|_| OnceLock::new()).collect(),
                requests: Requests::new(u64::from(u32::MAX)),
                reads: Mutex::new(HashMap::new()),
                wrote: (0..size).map(|_| AtomicBool::new(false)).collect(),
                flush_from: (0..size).map(|_| OnceLock::new()).collect(),
            }),
        })
    }
}

fn completion_thread(shared: Arc<Shared>, watch: Weak<Peers>) {
    while watch.strong_count() > 0 {
        let now = shared.epoch.elapsed().as_nanos() as u64;
        let since = now.saturating_sub(shared.waiter_read.load(Ordering::Relaxed));
        if since < WAITERS_READ_NS {
            // A waiter reads the queue: leave it to them, and look again
            // once none has for WAITERS_READ_NS. Not even a read of the
            // queue meanwhile: it takes the reading lock, and a thread
            // that loses its core holding it (two ranks spinning on two
            // cores) holds up the waiter that needs it for a time slice
            // (Soft-RoCE VM, 8 B: 230-540 us half round trips where
            // fi_pingpong took 75-150).
            std::thread::sleep(Duration::from_nanos(WAITERS_READ_NS - since));
            continue;
        }
        shared.progress();
        // Woken by completions (and, under manual progress, by incoming
        // data to apply); the timeout bounds what a provider whose
        // descriptor misses some of them costs.
        shared
            .endpoint
            .completion_queue()
            .wait(Duration::from_millis(2));
    }
}

/// How recently a waiter must have read the completion queue for the
/// completion thread to leave the queue's descriptor alone.
const WAITERS_READ_NS: u64 = 1_000_000;

impl Shared {
    fn peers(&self) -> Result<Arc<Peers>> {
        self.requests.peers()
    }

    /// Reads every completion there is and settles its request.
    fn progress(&self) {
        // One reader at a time, events handled before the next read:
        // notifications carried as data are set in the queue's order, so
        // one set by a later write (a barrier's) never shows before one
        // set by an earlier write. Waiting for another reader (not
        // skipping) matters too: when this returns, whatever that reader
        // took from the queue is handled, so a waiter that then finds a
        // peer gone has seen every notification the peer sent first.
        let _reading = self.reading.lock().unwrap_or_else(|e| e.into_inner());
        let mut events = Vec::new();
        if let Err(e) = self.endpoint.poll(&mut events) {
            tracing::warn!("reading the libfabric completion queue: {e}");
        }
        for e in events {
            match e {
                Event::Done(t) => self.complete(t, None),
                Event::Failed(t, err) => self.complete(t, Some(err)),
                Event::Remote(data) => self.deliver(data),
            }
        }
    }

    /// A notification that arrived as remote CQ data: its write's bytes
    /// are in place (the event comes after them), so the word is set now.
    fn deliver(&self, data: u64) {
        let Some(form) = self.data_form else {
            tracing::warn!(
                "remote CQ data {data:#x} arrived, but notifications do not travel as data"
            );
            return;
        };
        let (seg, id, value) = form.decode(data);
        let targets = self.targets.lock().unwrap_or_else(|e| e.into_inner());
        match targets.get(&seg) {
            Some(t) => {
                if let Err(e) = t.words.set(id, value) {
                    tracing::warn!("a notification for segment {seg} arrived as data: {e}");
                }
            }
            None => tracing::warn!(
                "a notification for segment {seg} arrived as data, but the segment is gone"
            ),
        }
    }

    fn complete(&self, token: Token, failed: Option<FabricError>) {
        self.requests.complete(
            u64::from(token.id),
            failed.map(|err| format!("libfabric: {err}")),
            |p, failure| {
                if p.extra {
                    self.read_done(p.rank, failure);
                }
            },
        );
    }

    /// A read to `rank` completed: once none is left in flight, the
    /// notifications that waited for them are set (or, after a failure,
    /// fail with it).
    fn read_done(&self, rank: Rank, failure: Option<&Error>) {
        let released = {
            let mut reads = self.reads.lock().unwrap_or_else(|e| e.into_inner());
            let r = reads.entry(rank.0).or_default();
            r.in_flight = r.in_flight.saturating_sub(1);
            if r.in_flight == 0 || failure.is_some() {
                std::mem::take(&mut r.waiting)
            } else {
                Vec::new()
            }
        };
        for w in released {
            let failure = match failure {
                Some(e) => Some(Error::RdmaFailed {
                    rank,
                    reason: format!("a read before it failed: {e}"),
                }),
                None => w
                    .seg
                    .notifications
                    .set(w.id, w.value)
                    .err()
                    .map(|e| Error::Protocol(format!("read notification: {e}"))),
            };
            self.requests.settle(rank, w.queue, failure);
        }
    }

    /// Posts one operation to `rank` (`op` gets the peer and the request
    /// id), counted on `via`'s queue, doing `then` at its completion.
    fn post(
        &self,
        rank: Rank,
        via: Via<'_>,
        read: bool,
        then: Then,
        op: impl FnOnce(Peer, u32) -> super::libfabric::Result<()>,
    ) -> Result<u32> {
        let peers = self.peers()?;
        peers.peer_ok(rank)?;
        let peer = *self
            .peers
            .get(rank.0 as usize)
            .and_then(|p| p.get())
            .ok_or_else(|| Error::NoTransport {
                rank,
                reason: "not connected over libfabric".into(),
            })?;
        let id = self.requests.insert(rank, via, read, then);
        if !read {
            if let Some(w) = self.wrote.get(rank.0 as usize) {
                w.store(true, Ordering::Release);
            }
        }
        if read {
            self.reads
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(rank.0)
                .or_default()
                .in_flight += 1;
        }
        // The table's mask keeps ids within 32 bits.
        let id = id as u32;
        if let Err(e) = op(peer, id) {
            // Not posted: no completion will come for it.
            let p = self.requests.unpost(u64::from(id), rank, via);
            if read {
                self.read_done(rank, None);
            }
            drop(p);
            return Err(match e {
                FabricError::Peer { .. } | FabricError::Timeout { .. } => Error::RdmaFailed {
                    rank,
                    reason: format!("libfabric: {e}"),
                },
                other => fabric_error(other),
            });
        }
        Ok(id)
    }

    /// Gives the request `id` something to do (or keep) at its completion.
    fn attach(&self, id: u32, then: Then) {
        self.requests.attach(u64::from(id), then);
    }

    /// Reads `len` bytes at `offset` of `rank`'s registration `from` into
    /// a staging buffer and waits for them (until `until`, if given).
    fn read_blocking(
        &self,
        rank: Rank,
        from: &RemoteMemory,
        offset: u64,
        len: usize,
        until: Option<Instant>,
    ) -> Result<Staging> {
        let staging = Staging::new(&self.endpoint, len)?;
        let slot = Arc::new(Slot::default());
        let slice = staging.mr.slice(0, len).map_err(fabric_error)?;
        let ep = &self.endpoint;
        let id = self.post(
            rank,
            Via::INTERNAL,
            false,
            Then::Wake(slot.clone()),
            |peer, id| ep.read(peer, slice, from, offset, id),
        )?;
        if let Err(e) = self.wait_for(rank, &slot, until) {
            // The read may still land (a peer that answered, then ended):
            // its buffer stays registered until it completes.
            self.attach(id, Then::Keep(staging));
            return Err(e);
        }
        Ok(staging)
    }

    /// Waits for the request of `slot` to `rank`, reading completions
    /// (until `until`, if given).
    fn wait_for(&self, rank: Rank, slot: &Slot, until: Option<Instant>) -> Result<()> {
        self.requests
            .wait(rank, slot, until, "a libfabric flush", || self.progress())
    }
}

impl Transport for FabricTransport {
    fn name(&self) -> &'static str {
        NAME
    }

    fn provider(&self) -> Option<&str> {
        Some(&self.shared.endpoint.attributes().provider)
    }

    fn attach(
        &self,
        owner: Rank,
        seg: u8,
        desc: &SegmentDescriptor,
        home: &Arc<OnceLock<u32>>,
    ) -> Result<Box<dyn RemoteSegment>> {
        let Some(keys) = Keys::unpack(desc)? else {
            // Not registered (a GPU segment): its owner's engine serves it
            // over the control connection.
            let tcp = self.fallback.get().ok_or_else(|| Error::NoTransport {
                rank: owner,
                reason: format!("its segment {seg} is not registered with libfabric"),
            })?;
            return tcp.attach(owner, seg, desc, home);
        };
        if let Some(f) = self.shared.flush_from.get(owner.0 as usize) {
            let _ = f.set(keys.words);
        }
        Ok(Box::new(FabricSegment {
            owner,
            seg,
            size: desc.size,
            count: desc.notification_count,
            instance: desc.instance,
            keys,
            shared: self.shared.clone(),
        }))
    }
}

/// A peer's segment reached over libfabric: its keys.
#[derive(Debug)]
struct FabricSegment {
    owner: Rank,
    /// The segment's id at its owner (for notifications sent as data).
    seg: u8,
    size: u64,
    count: u32,
    instance: u64,
    keys: Keys,
    shared: Arc<Shared>,
}

impl FabricSegment {
    /// Largest piece of one operation.
    fn piece(&self) -> usize {
        self.shared.endpoint.attributes().max_write.max(1)
    }

    /// The remote CQ data that carries notification `id` = `value`, where
    /// this provider and the id allow it (else the word is written apart).
    fn carried(&self, id: u32, value: u32) -> Option<u64> {
        self.shared
            .data_form
            .and_then(|f| f.encode(self.seg, id, value))
    }

    /// The remote CQ data that carries `notify` on the last write of
    /// `len` bytes (none for 0 bytes: [`RemoteSegment::notify`] then
    /// carries it on a write of its own).
    fn as_data(&self, notify: Option<(u32, u32)>, len: usize) -> Option<u64> {
        let (id, value) = notify.filter(|_| len > 0)?;
        self.carried(id, value)
    }

    /// Sends `notify` apart unless the last write carried it (`carried`).
    fn notify_unless_carried(
        &self,
        notify: Option<(u32, u32)>,
        carried: Option<u64>,
        via: Via<'_>,
    ) -> Result<()> {
        match notify {
            Some((id, value)) if carried.is_none() => self.notify(id, value, via),
            _ => Ok(()),
        }
    }

    /// Posts the write of `slice` at `off`: with `data` as remote CQ data
    /// when given (the notification), else a plain write.
    fn post_write(
        &self,
        via: Via<'_>,
        then: Then,
        slice: LocalSlice<'_>,
        off: u64,
        data: Option<u64>,
    ) -> Result<u32> {
        let s = &self.shared;
        let (ep, dst) = (&s.endpoint, &self.keys.data);
        s.post(self.owner, via, false, then, |peer, id| match data {
            Some(d) => ep.write_with_data(peer, slice, dst, off, d, id),
            None => ep.write(peer, slice, dst, off, id),
        })
    }

    /// Writes `len` bytes from `src` through staging copies, the last
    /// piece carrying `data` (a notification) if given.
    fn put_staged(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        via: Via<'_>,
        data: Option<u64>,
    ) -> Result<()> {
        let s = &self.shared;
        let mut at = 0usize;
        while at < len {
            let n = (len - at).min(self.piece());
            let staging = Staging::new(&s.endpoint, n)?;
            // SAFETY: the caller guarantees `src` is valid for `len` bytes;
            // at + n <= len; the staging buffer holds n bytes.
            unsafe { std::ptr::copy_nonoverlapping(src.add(at), staging.ptr(), n) };
            let slice = staging.mr.slice(0, n).map_err(fabric_error)?;
            let last = at + n == len;
            let id = self.post_write(
                via,
                Then::Nothing,
                slice,
                offset + at as u64,
                data.filter(|_| last),
            )?;
            // The staging copy stays registered until the provider is done
            // with it (the request's completion drops it).
            s.attach(id, Then::Keep(staging));
            at += n;
        }
        Ok(())
    }
}

impl RemoteSegment for FabricSegment {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            completion: Completion::Later,
            // From the registered segment where it lies: no staging copy
            // and registration per write.
            in_place_from: Some(1),
            ..Capabilities::HOST
        }
    }

    fn size(&self) -> u64 {
        self.size
    }

    fn notification_count(&self) -> u32 {
        self.count
    }

    fn instance(&self) -> u64 {
        self.instance
    }

    fn put(&self, offset: u64, src: *const u8, len: usize, via: Via<'_>) -> Result<()> {
        self.put_staged(offset, src, len, via, None)
    }

    fn put_notify(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
    ) -> Result<()> {
        let data = self.as_data(notify, len);
        self.put_staged(offset, src, len, via, data)?;
        self.notify_unless_carried(notify, data, via)
    }

    fn put_notify_in_place(
        &self,
        offset: u64,
        src: *const u8,
        len: usize,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
        keep: &crate::net::connection::Keep,
    ) -> Result<()> {
        // From where it lies only for a request `wait` completes, out of
        // a registered segment that holds the whole range; else staged.
        let seg = match (via.queue, keep.clone().downcast::<LocalSegment>()) {
            (Some(_), Ok(seg)) => seg,
            _ => return self.put_notify(offset, src, len, notify, via),
        };
        let Some(data) = seg
            .transport_registration::<Registration>()
            .and_then(|r| r.data.as_ref())
        else {
            return self.put_notify(offset, src, len, notify, via);
        };
        let (base, at) = (data.addr() as u64, src as u64);
        let inside = at >= base
            && at
                .checked_add(len as u64)
                .is_some_and(|end| end <= base + data.len() as u64);
        if !inside {
            return self.put_notify(offset, src, len, notify, via);
        }
        let cq_data = self.as_data(notify, len);
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(self.piece());
            let slice = data
                .slice((at - base) as usize + done, n)
                .map_err(fabric_error)?;
            let last = done + n == len;
            // The segment stays mapped and registered until the provider
            // is done with the write.
            self.post_write(
                via,
                Then::Hold(seg.clone()),
                slice,
                offset + done as u64,
                cq_data.filter(|_| last),
            )?;
            done += n;
        }
        self.notify_unless_carried(notify, cq_data, via)
    }

    fn notify(&self, id: u32, value: u32, via: Via<'_>) -> Result<()> {
        let s = &self.shared;
        let (ep, words) = (&s.endpoint, &self.keys.words);
        let off = WORDS_HEADER + 4 * id as u64;
        // Where write_notify's notifications travel as data, every
        // notification that fits does: the target sets them all, in order
        // (a word written by the provider could show before an earlier one
        // the target has yet to set; one that does not fit is written so,
        // and the target's waiters settle the queue when they see it).
        let data = self.carried(id, value);
        s.post(
            self.owner,
            via,
            false,
            Then::Nothing,
            |peer, rid| match data {
                Some(d) => ep.notify_with_data(peer, words, off, d, rid),
                None => ep.notify(peer, words, off, value, rid),
            },
        )
        .map(|_| ())
    }

    fn get(&self, offset: u64, dst: *mut u8, len: usize) -> Result<()> {
        let mut at = 0usize;
        while at < len {
            let n = (len - at).min(self.piece());
            let staging = self.shared.read_blocking(
                self.owner,
                &self.keys.data,
                offset + at as u64,
                n,
                None,
            )?;
            // SAFETY: the caller guarantees `dst` is valid for `len` bytes;
            // at + n <= len; the read completed into the staging buffer.
            unsafe { std::ptr::copy_nonoverlapping(staging.ptr(), dst.add(at), n) };
            at += n;
        }
        Ok(())
    }

    fn post_get(
        &self,
        offset: u64,
        into: &Arc<LocalSegment>,
        into_offset: u64,
        len: usize,
        via: Via<'_>,
    ) -> Result<()> {
        let Some(data) = into
            .transport_registration::<Registration>()
            .and_then(|r| r.data.as_ref())
        else {
            // Not registered (GPU memory): read through a staging copy now.
            // SAFETY: the caller checked the range against `into`.
            let dst = unsafe { into.data().add(into_offset as usize) };
            return self.get(offset, dst, len);
        };
        let s = &self.shared;
        let mut at = 0usize;
        while at < len {
            let n = (len - at).min(self.piece());
            let slice = data
                .slice(into_offset as usize + at, n)
                .map_err(fabric_error)?;
            let (ep, src, off) = (&s.endpoint, &self.keys.data, offset + at as u64);
            s.post(
                self.owner,
                via,
                true,
                Then::Hold(into.clone()),
                |peer, id| ep.read(peer, slice, src, off, id),
            )?;
            at += n;
        }
        Ok(())
    }

    fn post_read_notify(
        &self,
        seg: &Arc<LocalSegment>,
        id: u32,
        value: u32,
        via: Via<'_>,
    ) -> Result<()> {
        let s = &self.shared;
        {
            let mut reads = s.reads.lock().unwrap_or_else(|e| e.into_inner());
            let r = reads.entry(self.owner.0).or_default();
            if r.in_flight > 0 {
                if let Some(q) = via.queue {
                    q.outstanding.add(self.owner, 1);
                }
                r.waiting.push(ReadNotify {
                    seg: seg.clone(),
                    id,
                    value,
                    queue: via.queue.map(|q| q.index),
                });
                return Ok(());
            }
        }
        seg.notifications
            .set(id, value)
            .map_err(|e| Error::Protocol(format!("read notification: {e}")))
    }

    fn atomic(&self, offset: u64, op: AtomicOp) -> Result<Option<u64>> {
        let s = &self.shared;
        if !s.nic_atomics {
            // The owner applies it (see `atomics.rs`).
            return Ok(None);
        }
        let scratch = Staging::new(&s.endpoint, 24)?;
        let slot = Arc::new(Slot::default());
        let slice = scratch.mr.slice(0, 24).map_err(fabric_error)?;
        let (ep, target) = (&s.endpoint, &self.keys.data);
        let id = s.post(
            self.owner,
            Via::INTERNAL,
            false,
            Then::Wake(slot.clone()),
            |peer, id| match op {
                AtomicOp::FetchAdd(v) => ep.fetch_add(peer, target, offset, v, slice, id),
                AtomicOp::CompareSwap { comparator, new } => {
                    ep.compare_swap(peer, target, offset, comparator, new, slice, id)
                }
            },
        )?;
        if let Err(e) = s.wait_for(self.owner, &slot, None) {
            // The result may still land: the scratch stays until then.
            s.attach(id, Then::Keep(scratch));
            return Err(e);
        }
        // SAFETY: 24 bytes, 8-aligned; the atomic completed, so the old
        // value is in bytes 16..24 and no one writes them any more.
        let old = unsafe { scratch.ptr().add(16).cast::<u64>().read_volatile() };
        drop(scratch);
        Ok(Some(old))
    }

    fn gpu_view(&self, _home: u32) -> Result<GpuView> {
        Err(Error::NoTransport {
            rank: self.owner,
            reason: "a GPU kernel cannot reach a segment on another host directly; \
                     its requests go through the CPU"
                .into(),
        })
    }
}

#[cfg(test)]
mod data_form_tests {
    use super::DataForm;

    #[test]
    fn each_form_gives_back_what_it_packed_and_refuses_what_does_not_fit() {
        for (form, id_max, value_max) in [
            (DataForm::Wide, (1u32 << 24) - 1, u32::MAX),
            (DataForm::Compact, (1 << 16) - 1, 255),
        ] {
            for seg in [0u8, 1, 7, 255] {
                for id in [0, 1, 300, id_max] {
                    for value in [1, 2, value_max] {
                        let data = form.encode(seg, id, value).expect("fits");
                        if form == DataForm::Compact {
                            assert!(data < 1 << 32, "{data:#x} is wider than 4 bytes");
                        }
                        assert_eq!(form.decode(data), (seg, id, value), "{form:?}");
                    }
                }
            }
            assert_eq!(form.encode(3, id_max + 1, 1), None, "{form:?} id");
        }
        assert_eq!(DataForm::Compact.encode(3, 4, 256), None);
        assert_eq!(DataForm::Compact.encode(3, 4, u32::MAX), None);
    }

    #[test]
    fn the_form_follows_the_provider_and_the_limit() {
        assert_eq!(DataForm::for_bytes(8, None), Some(DataForm::Wide));
        assert_eq!(DataForm::for_bytes(16, None), Some(DataForm::Wide));
        assert_eq!(DataForm::for_bytes(4, None), Some(DataForm::Compact));
        assert_eq!(DataForm::for_bytes(4, Some(8)), Some(DataForm::Compact));
        assert_eq!(DataForm::for_bytes(8, Some(4)), Some(DataForm::Compact));
        assert_eq!(DataForm::for_bytes(8, Some(0)), None);
        assert_eq!(DataForm::for_bytes(2, None), None);
        assert_eq!(DataForm::for_bytes(0, None), None);
    }
}
