//! RDMA verbs transport (cargo feature `verbs`): InfiniBand and RoCE.
//!
//! The production path of a GASPI runtime between hosts: data, notification
//! words and atomics go from NIC to memory with no CPU on the target.
//!
//! - **Connections.** At init a rank opens one device and port
//!   (`GASPI_NET_DEVICE=name[:port]`, or a comma-separated list from which
//!   rank `r` takes entry `r % len`; default: the first device, port 1),
//!   reads its LID (InfiniBand) or the GID at `GASPI_NET_GID_INDEX` (RoCE;
//!   default: the first RoCE v2 GID, preferring an IPv4-mapped one), and
//!   makes one reliable-connected queue pair per peer. The QP numbers and
//!   start PSNs travel in the bootstrap's [`crate::net::rendezvous::Endpoint`]
//!   (`VerbsEndpoint`); after the exchange each rank moves its QPs to RTS
//!   towards the peers' QPs. One QP per peer, shared by every queue: a
//!   `write` then a `notify` on any queue to one rank stay in order, which
//!   is GASPI's rule and needs nothing more. (QPs per (queue, peer) would
//!   let queues progress independently; at the depths used here one QP
//!   never holds a queue back.) A QP whose peer has not reached RTS yet
//!   retries (about 1 s per try, 7 tries), so no barrier is needed.
//! - **Memory.** Every host segment (memfd mappings, the user's bound
//!   memory: memory we did not allocate) is registered when it is created
//!   ([`register`]), its data and its notification words separately; the
//!   descriptor peers get carries the addresses and rkeys
//!   ([`RdmaKeys`]). Registration lives in the segment and is dropped
//!   (deregistered) before its memory is unmapped. Areas of registered
//!   segments are marked as having silent writers: a NIC stores a
//!   notification without the futex wake, so a sleeping waiter naps and
//!   rescans instead of sleeping 10 ms.
//! - **Operations.** `write` = RDMA WRITE (inline up to the QP's inline
//!   size, else straight from the source segment's registered memory:
//!   GASPI's caller leaves a write's source unchanged until `wait`,
//!   decision 0027; a source that is not registered, GPU memory, goes
//!   through a registered staging copy); `notify` = RDMA WRITE of the
//!   4-byte value, inline, on the same QP: RC delivers WRITEs of one QP in
//!   order, so the word lands after the data; `read` = RDMA READ straight
//!   into the local segment's registered memory; `read_notify` = a 4-byte
//!   READ of the owner's constant 1 into the local word after the data
//!   READs (RC completes READs of one QP in order), as GPI-2 does, when
//!   the value is 1; other values are set by the CPU when that READ
//!   completes. Atomics go to the owner's progress engine by default
//!   (exact whatever else touches the word: a NIC atomic is only atomic
//!   against other NIC atomics, `IBV_ATOMIC_HCA`, and the owner's own
//!   atomics and same-host peers' are CPU atomics); with
//!   `GASPI_NET_ATOMICS=nic` they are `FETCH_AND_ADD` / `CMP_AND_SWP`,
//!   for jobs where every atomic on a word comes through the NIC.
//! - **Completion.** Every request is signaled; its `wr_id` keys what it
//!   belongs to (rank, queue, what to keep alive or do at completion). A
//!   request posted on a queue is counted in `transport::outstanding` and
//!   settled when its completion is polled, so `wait(queue)` waits for
//!   exactly what was posted there. Completions are polled by a thread
//!   woken through the completion channel (no core burnt while idle) and by
//!   `wait` itself while it spins ([`VerbsTransport::progress`]). A
//!   completion error marks the peer corrupt and fails the queue's next
//!   `wait` with [`Error::RdmaFailed`] naming it.
//! - **What stays on the control connection.** Segment registration,
//!   passive messages, atomics (by default) and the failure detection of
//!   decision 0018 use the TCP control connection every pair has; barriers
//!   and allreduce use put + notify, so they run over RDMA.
//! - **Not here yet.** GPU segments are not registered (GPUDirect RDMA):
//!   their descriptors carry no keys, and [`VerbsTransport::attach`] hands
//!   them to the TCP transport, so peers reach them through the owner's
//!   engine.

mod device;

use super::NetworkTransport;
use super::{Capabilities, GpuView, RemoteSegment, Transport, Via};
use crate::model::descriptor::SegmentDescriptor;
use crate::model::error::{Error, Result};
use crate::model::ids::Rank;
use crate::net::peers::Peers;
use crate::segments::LocalSegment;
use crate::transport::completions::{self, Requests, Slot};
use crate::transport::outstanding::Outstanding;
use device::{Completion, Device, MemoryRegion, QueuePair, Remote, Work};
use serde::{Deserialize, Serialize};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

/// Largest piece of one RDMA WRITE or READ (the verbs limit is 2 GiB).
const PIECE: usize = 1 << 30;

/// Addresses and remote keys of a segment registered for RDMA: its data
/// (byte 0 at `data_addr`) and its notification area (the area's header at
/// `words_addr`, word `i` at `words_addr + 128 + 4 i`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub(crate) struct RdmaKeys {
    /// Address of data byte 0 in the owner's process.
    pub data_addr: u64,
    /// Remote key of the data.
    pub data_rkey: u32,
    /// Address of the notification area in the owner's process.
    pub words_addr: u64,
    /// Remote key of the notification area.
    pub words_rkey: u32,
}

impl RdmaKeys {
    /// Packs the keys into a descriptor's opaque key bytes.
    fn pack(&self) -> Result<Vec<u8>> {
        crate::net::frame::encode_body(self)
    }

    /// The keys packed into `desc` by the owner's verbs transport, if it
    /// registered the segment.
    fn unpack(desc: &SegmentDescriptor) -> Result<Option<RdmaKeys>> {
        desc.key(NAME)
            .map(|b| {
                crate::net::frame::decode(b).map_err(|e| Error::Protocol(format!("verbs key: {e}")))
            })
            .transpose()
    }
}

/// This transport's name in logs, keys and endpoints.
const NAME: &str = "verbs";

/// A host segment's registration: its data and its notification words.
#[derive(Debug)]
pub(crate) struct Registration {
    data: MemoryRegion,
    words: MemoryRegion,
}

impl Registration {
    fn keys(&self) -> RdmaKeys {
        RdmaKeys {
            data_addr: self.data.addr(),
            data_rkey: self.data.rkey(),
            words_addr: self.words.addr(),
            words_rkey: self.words.rkey(),
        }
    }
}

/// A registered staging copy, kept until the NIC is done with it.
type Staging = (MemoryRegion, Box<[u8]>);

/// What a request does at its completion.
type Then = completions::Then<Staging>;

/// The verbs transport of this rank.
#[derive(Debug)]
pub(crate) struct VerbsTransport {
    shared: Arc<Shared>,
    /// The TCP transport, for peers' segments not registered for RDMA.
    fallback: OnceLock<Arc<dyn Transport>>,
}

#[derive(Debug)]
struct Shared {
    device: Arc<Device>,
    /// Queue pair to each rank (this rank's own entry included, unused).
    qps: Vec<QueuePair>,
    /// Requests in flight per QP (at most its depth).
    inflight: Vec<AtomicU32>,
    /// Bytes a WRITE may carry inline.
    inline_max: usize,
    /// Requests in flight, by `wr_id`.
    requests: Requests<Staging, ()>,
    /// A registered 4-byte constant 1: the source of peers' read_notify.
    one: (MemoryRegion, Box<[u32]>),
    /// Each peer's constant 1 (address, rkey), from its endpoint.
    peer_one: Mutex<Vec<(u64, u32)>>,
    nic_atomics: bool,
}

/// Which device a rank opens, from `GASPI_NET_DEVICE`.
fn device_choice(spec: Option<&str>, rank: u32) -> Result<(Option<String>, u8)> {
    match crate::model::config::net_device_entry(spec, rank) {
        None => Ok((None, 1)),
        Some((name, None)) => Ok((Some(name.to_string()), 1)),
        Some((name, Some(port))) => {
            let port = port.parse::<u8>().map_err(|_| {
                let spec = spec.unwrap_or_default().trim();
                Error::Config(format!("GASPI_NET_DEVICE={spec:?}: bad port {port:?}"))
            })?;
            Ok((Some(name.to_string()), port))
        }
    }
}

/// What peers need to connect to this rank over RDMA, published at
/// start-up (packed by [`NetworkTransport::endpoint`]): its address and
/// its queue pairs, one per rank of the job (entry `j` is the QP that rank
/// `j` connects to).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub(crate) struct VerbsEndpoint {
    /// Device name, for logs.
    pub device: String,
    /// InfiniBand LID (0 on RoCE).
    pub lid: u16,
    /// The GID peers address (RoCE; the port GID on InfiniBand).
    pub gid: [u8; 16],
    /// QP number for each rank.
    pub qpns: Vec<u32>,
    /// Start PSN of each of those QPs.
    pub psns: Vec<u32>,
    /// A registered constant 1 (u32): the source of read_notify's READ.
    pub one_addr: u64,
    /// Remote key of that constant.
    pub one_rkey: u32,
}

/// Opens the verbs transport for the registry (`transport/registry.rs`).
pub(crate) fn open(
    config: &crate::Config,
    rank: Rank,
    size: u32,
) -> Result<Arc<dyn NetworkTransport>> {
    Ok(Arc::new(VerbsTransport::open(config, rank, size)?))
}

impl NetworkTransport for VerbsTransport {
    fn name(&self) -> &'static str {
        NAME
    }

    fn endpoint(&self) -> Result<Vec<u8>> {
        crate::net::frame::encode_body(&VerbsTransport::endpoint(self))
            .map_err(|e| Error::Protocol(format!("packing the verbs endpoint: {e}")))
    }

    fn connect(self: Arc<Self>, me: Rank, peer: Rank, theirs: &[u8]) -> Result<Arc<dyn Transport>> {
        let ep: VerbsEndpoint = crate::net::frame::decode(theirs)
            .map_err(|e| Error::Protocol(format!("{peer}'s verbs endpoint: {e}")))?;
        VerbsTransport::connect(&self, me, peer, &ep)?;
        Ok(self)
    }

    fn register(&self, seg: &mut LocalSegment) -> Result<()> {
        VerbsTransport::register(self, seg)
    }

    fn bind(
        &self,
        peers: Weak<Peers>,
        outstanding: Vec<Arc<Outstanding>>,
        fallback: Arc<dyn Transport>,
    ) -> Result<()> {
        VerbsTransport::bind(self, peers, outstanding, fallback)
    }

    fn progress(&self) {
        VerbsTransport::progress(self)
    }
}

impl VerbsTransport {
    /// Opens the device for this rank and makes a QP for each of `size`
    /// ranks. Fails (the caller falls back to TCP or refuses, per
    /// `GASPI_TRANSPORT`) when there is no usable device.
    pub fn open(config: &crate::Config, rank: Rank, size: u32) -> Result<VerbsTransport> {
        let (name, port) = device_choice(config.net_device.as_deref(), rank.0)?;
        if name.is_none() && device::device_names().is_empty() {
            return Err(Error::Verbs("no RDMA device on this host".into()));
        }
        let device = Arc::new(Device::open(name.as_deref(), port, config.net_gid_index)?);
        let p = &device.port;
        tracing::info!(
            "RDMA device {} port {} ({}, {}), MTU enum {}, up to {} RDMA reads in flight",
            p.device,
            p.port,
            if p.ethernet { "RoCE" } else { "InfiniBand" },
            if p.ethernet {
                format!(
                    "GID index {} {}",
                    p.gid_index,
                    std::net::Ipv6Addr::from(p.gid)
                )
            } else {
                format!("LID {}", p.lid)
            },
            p.mtu,
            p.max_rd_atomic,
        );
        let depth = config.queue_size_max.saturating_mul(2).clamp(64, 4096);
        let seed = rand::random::<u32>();
        let qps = (0..size)
            .map(|r| QueuePair::new(&device, depth, seed.wrapping_add(r * 7919)))
            .collect::<Result<Vec<_>>>()?;
        let mut one = vec![1u32].into_boxed_slice();
        // SAFETY: the box is kept with the region in `Shared` and dropped
        // after it (tuple fields drop in order: region first).
        let one_mr = unsafe { MemoryRegion::register(&device, one.as_mut_ptr().cast(), 4)? };
        Ok(VerbsTransport {
            fallback: OnceLock::new(),
            shared: Arc::new(Shared {
                inflight: (0..size).map(|_| AtomicU32::new(0)).collect(),
                inline_max: qps.iter().map(|q| q.inline).min().unwrap_or(0) as usize,
                requests: Requests::new(u64::MAX),
                one: (one_mr, one),
                peer_one: Mutex::new(vec![(0, 0); size as usize]),
                nic_atomics: config.net_atomics_nic,
                qps,
                device,
            }),
        })
    }

    /// What peers need to connect to this rank, for the bootstrap.
    pub fn endpoint(&self) -> VerbsEndpoint {
        let s = &self.shared;
        VerbsEndpoint {
            device: s.device.port.device.clone(),
            lid: s.device.port.lid,
            gid: s.device.port.gid,
            qpns: s.qps.iter().map(|q| q.qpn()).collect(),
            psns: s.qps.iter().map(|q| q.psn).collect(),
            one_addr: s.one.0.addr(),
            one_rkey: s.one.0.rkey(),
        }
    }

    /// Connects this rank's QP for `peer` to the peer's QP for this rank.
    pub fn connect(&self, me: Rank, peer: Rank, ep: &VerbsEndpoint) -> Result<()> {
        let s = &self.shared;
        let (Some(&qpn), Some(&psn)) = (ep.qpns.get(me.0 as usize), ep.psns.get(me.0 as usize))
        else {
            return Err(Error::Protocol(format!(
                "{peer}'s verbs endpoint has no queue pair for {me}"
            )));
        };
        s.qps[peer.0 as usize].connect(&Remote {
            qpn,
            psn,
            lid: ep.lid,
            gid: ep.gid,
        })?;
        s.peer_one.lock().unwrap_or_else(|e| e.into_inner())[peer.0 as usize] =
            (ep.one_addr, ep.one_rkey);
        Ok(())
    }

    /// Gives the transport the rank's peers, each queue's count of
    /// outstanding requests and the TCP transport (for segments not
    /// registered for RDMA), and starts the completion thread.
    pub fn bind(
        &self,
        peers: Weak<Peers>,
        outstanding: Vec<Arc<Outstanding>>,
        tcp: Arc<dyn Transport>,
    ) -> Result<()> {
        let _ = self.fallback.set(tcp);
        let inner = peers.clone();
        self.shared.requests.bind(peers, outstanding);
        let shared = self.shared.clone();
        std::thread::Builder::new()
            .name("gaspi-verbs-cq".into())
            .spawn(move || completion_thread(shared, inner))
            .map_err(|e| Error::io("starting the verbs completion thread", e))?;
        Ok(())
    }

    /// Polls every completion queue once and settles what completed.
    pub fn progress(&self) {
        self.shared.progress();
    }

    /// Registers a host segment's data and notification words and puts
    /// their keys in its descriptor. GPU segments are left unregistered.
    pub fn register(&self, seg: &mut LocalSegment) -> Result<()> {
        if seg.is_gpu() {
            return Ok(());
        }
        let dev = &self.shared.device;
        let words_len = 128 + seg.notifications.count() as usize * 4;
        // SAFETY: the registration is stored in the segment, whose fields
        // drop it before the storage that maps this memory (field order in
        // LocalSegment); a bound segment's memory is kept by the user for
        // as long as the segment exists (segment_bind's contract).
        let data = unsafe { MemoryRegion::register(dev, seg.data(), seg.size)? };
        // SAFETY: as above; the area's region (header and words) is mapped
        // for the segment's life.
        let words = unsafe { MemoryRegion::register(dev, seg.notifications.base(), words_len)? };
        let reg = Registration { data, words };
        seg.descriptor.set_key(NAME, reg.keys().pack()?);
        seg.registrations.push(Box::new(reg));
        seg.notifications.mark_silent_writer();
        Ok(())
    }
}

fn completion_thread(shared: Arc<Shared>, inner: Weak<Peers>) {
    let fd = shared.device.channel_fd();
    loop {
        if inner.strong_count() == 0 {
            return;
        }
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd; a timeout, so the end of the rank is seen.
        unsafe { libc::poll(&mut pfd, 1, 100) };
        while shared.device.take_event() {}
        // Events are re-armed before polling: a completion that arrives
        // after this poll raises a new event.
        shared.progress();
    }
}

impl Shared {
    fn inner(&self) -> Result<Arc<Peers>> {
        self.requests.peers()
    }

    fn progress(&self) {
        let mut wcs = [Completion::default(); 16];
        for (r, qp) in self.qps.iter().enumerate() {
            if self.inflight[r].load(Ordering::Acquire) == 0 {
                continue;
            }
            loop {
                let n = qp.poll(&mut wcs);
                for wc in &wcs[..n] {
                    self.complete(wc);
                }
                if n < wcs.len() {
                    break;
                }
            }
        }
    }

    fn complete(&self, wc: &Completion) {
        let failed = (!wc.ok).then(|| device::status_str(wc.status).to_string());
        self.requests.complete(wc.wr_id, failed, |p, _| {
            self.inflight[p.rank.0 as usize].fetch_sub(1, Ordering::AcqRel);
        });
    }

    /// Posts `work` to `rank`, counted on `via`'s queue, doing `then` at
    /// its completion.
    fn post(&self, rank: Rank, work: Work, via: Via<'_>, then: Then) -> Result<()> {
        let inner = self.inner()?;
        inner.peer_ok(rank)?;
        let r = rank.0 as usize;
        let qp = &self.qps[r];
        // Room on the QP: completions free it.
        let mut spins = 0u32;
        while self.inflight[r].load(Ordering::Acquire) >= qp.depth {
            self.progress();
            inner.peer_ok(rank)?;
            spins += 1;
            if spins > 64 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::thread::yield_now();
            }
        }
        let id = self.requests.insert(rank, via, (), then);
        self.inflight[r].fetch_add(1, Ordering::AcqRel);
        if let Err(e) = qp.post(id, work) {
            self.requests.unpost(id, rank, via);
            self.inflight[r].fetch_sub(1, Ordering::AcqRel);
            return Err(e);
        }
        Ok(())
    }

    /// A registered copy of `bytes`.
    fn stage(&self, bytes: &[u8]) -> Result<(MemoryRegion, Box<[u8]>)> {
        let mut buf: Box<[u8]> = bytes.into();
        // SAFETY: the box moves with the region into `Then::Keep` (its heap
        // memory does not move) and is dropped after it.
        let mr = unsafe { MemoryRegion::register(&self.device, buf.as_mut_ptr(), buf.len())? };
        Ok((mr, buf))
    }

    /// Posts `work` (built from the address of a staging buffer of `len`
    /// bytes) and waits for it; returns the buffer's bytes.
    fn blocking(
        &self,
        rank: Rank,
        len: usize,
        work: impl FnOnce(u64, u32) -> Work,
    ) -> Result<Box<[u8]>> {
        let (mr, buf) = self.stage(&vec![0u8; len])?;
        let slot = Arc::new(Slot::default());
        self.post(
            rank,
            work(buf.as_ptr() as u64, mr.lkey()),
            Via::INTERNAL,
            Then::Wake(slot.clone()),
        )?;
        self.requests
            .wait(rank, &slot, None, "a verbs request", || self.progress())?;
        drop(mr);
        Ok(buf)
    }
}

impl Transport for VerbsTransport {
    fn name(&self) -> &'static str {
        "verbs"
    }

    fn attach(
        &self,
        owner: Rank,
        seg: u8,
        desc: &SegmentDescriptor,
        home: &Arc<OnceLock<u32>>,
    ) -> Result<Box<dyn RemoteSegment>> {
        let Some(keys) = RdmaKeys::unpack(desc)? else {
            // Not registered for RDMA (a GPU segment): its owner's engine
            // serves it over the control connection, as TCP does.
            let tcp = self.fallback.get().ok_or_else(|| Error::NoTransport {
                rank: owner,
                reason: format!("its segment {seg} is not registered for RDMA (a GPU segment)"),
            })?;
            return tcp.attach(owner, seg, desc, home);
        };
        Ok(Box::new(VerbsSegment {
            owner,
            size: desc.size,
            count: desc.notification_count,
            instance: desc.instance,
            keys,
            shared: self.shared.clone(),
        }))
    }
}

/// A peer's segment reached over RDMA: its addresses and keys.
#[derive(Debug)]
struct VerbsSegment {
    owner: Rank,
    size: u64,
    count: u32,
    instance: u64,
    keys: RdmaKeys,
    shared: Arc<Shared>,
}

impl VerbsSegment {
    fn word_addr(&self, id: u32) -> u64 {
        self.keys.words_addr + 128 + 4 * id as u64
    }
}

impl RemoteSegment for VerbsSegment {
    fn capabilities(&self) -> Capabilities {
        Capabilities {
            completion: super::Completion::Later,
            // Anything not inline: a WRITE straight from the registered
            // segment saves a registration and a copy per write.
            in_place_from: Some(self.shared.inline_max as u64 + 1),
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
        let s = &self.shared;
        if len <= s.inline_max {
            return s.post(
                self.owner,
                Work::Write {
                    addr: src as u64,
                    len: len as u32,
                    lkey: None,
                    remote: self.keys.data_addr + offset,
                    rkey: self.keys.data_rkey,
                },
                via,
                Then::Nothing,
            );
        }
        // SAFETY: the caller guarantees `src` is valid for `len` bytes.
        let bytes = unsafe { std::slice::from_raw_parts(src, len) };
        let mut at = 0usize;
        for piece in bytes.chunks(PIECE) {
            let (mr, buf) = s.stage(piece)?;
            let work = Work::Write {
                addr: buf.as_ptr() as u64,
                len: buf.len() as u32,
                lkey: Some(mr.lkey()),
                remote: self.keys.data_addr + offset + at as u64,
                rkey: self.keys.data_rkey,
            };
            s.post(self.owner, work, via, Then::Keep((mr, buf)))?;
            at += piece.len();
        }
        Ok(())
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
        let Some(reg) = seg.transport_registration::<Registration>() else {
            return self.put_notify(offset, src, len, notify, via);
        };
        let (base, at) = (reg.data.addr(), src as u64);
        let inside = at >= base
            && at
                .checked_add(len as u64)
                .is_some_and(|end| end <= base + reg.data.len());
        if !inside {
            return self.put_notify(offset, src, len, notify, via);
        }
        let mut done = 0usize;
        while done < len {
            let n = (len - done).min(PIECE);
            let work = Work::Write {
                addr: at + done as u64,
                len: n as u32,
                lkey: Some(reg.data.lkey()),
                remote: self.keys.data_addr + offset + done as u64,
                rkey: self.keys.data_rkey,
            };
            // The segment stays mapped (and registered) until the NIC is
            // done with the WRITE.
            self.shared
                .post(self.owner, work, via, Then::Hold(seg.clone()))?;
            done += n;
        }
        match notify {
            Some((id, value)) => self.notify(id, value, via),
            None => Ok(()),
        }
    }

    fn notify(&self, id: u32, value: u32, via: Via<'_>) -> Result<()> {
        let s = &self.shared;
        let word = value.to_ne_bytes();
        let remote = self.word_addr(id);
        let rkey = self.keys.words_rkey;
        if s.inline_max >= 4 {
            // Inline: the 4 bytes are copied into the request at post.
            return s.post(
                self.owner,
                Work::Write {
                    addr: word.as_ptr() as u64,
                    len: 4,
                    lkey: None,
                    remote,
                    rkey,
                },
                via,
                Then::Nothing,
            );
        }
        let (mr, buf) = s.stage(&word)?;
        let work = Work::Write {
            addr: buf.as_ptr() as u64,
            len: 4,
            lkey: Some(mr.lkey()),
            remote,
            rkey,
        };
        s.post(self.owner, work, via, Then::Keep((mr, buf)))
    }

    fn get(&self, offset: u64, dst: *mut u8, len: usize) -> Result<()> {
        let mut at = 0usize;
        while at < len {
            let n = (len - at).min(PIECE);
            let remote = self.keys.data_addr + offset + at as u64;
            let rkey = self.keys.data_rkey;
            let buf = self
                .shared
                .blocking(self.owner, n, |addr, lkey| Work::Read {
                    addr,
                    len: n as u32,
                    lkey,
                    remote,
                    rkey,
                })?;
            // SAFETY: the caller guarantees `dst` is valid for `len` bytes;
            // at + n <= len and buf holds n bytes.
            unsafe { std::ptr::copy_nonoverlapping(buf.as_ptr(), dst.add(at), n) };
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
        let Some(reg) = into.transport_registration::<Registration>() else {
            // Not registered (GPU memory): read through a staging copy now.
            // SAFETY: the caller checked the range against `into`.
            let dst = unsafe { into.data().add(into_offset as usize) };
            return self.get(offset, dst, len);
        };
        let mut at = 0usize;
        while at < len {
            let n = (len - at).min(PIECE);
            let work = Work::Read {
                addr: reg.data.addr() + into_offset + at as u64,
                len: n as u32,
                lkey: reg.data.lkey(),
                remote: self.keys.data_addr + offset + at as u64,
                rkey: self.keys.data_rkey,
            };
            self.shared
                .post(self.owner, work, via, Then::Hold(into.clone()))?;
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
        let (one_addr, one_rkey) =
            s.peer_one.lock().unwrap_or_else(|e| e.into_inner())[self.owner.0 as usize];
        match seg.transport_registration::<Registration>() {
            // GPI-2's way: the NIC reads the owner's constant 1 into the
            // local word, after the data READs before it on this QP.
            Some(reg) if value == 1 => {
                let work = Work::Read {
                    addr: reg.words.addr() + 128 + 4 * id as u64,
                    len: 4,
                    lkey: reg.words.lkey(),
                    remote: one_addr,
                    rkey: one_rkey,
                };
                s.post(self.owner, work, via, Then::Hold(seg.clone()))
            }
            // Any other value: the same READ into a staging word, and the
            // CPU sets the notification when it completes.
            _ => {
                let (mr, buf) = s.stage(&[0u8; 4])?;
                let work = Work::Read {
                    addr: buf.as_ptr() as u64,
                    len: 4,
                    lkey: mr.lkey(),
                    remote: one_addr,
                    rkey: one_rkey,
                };
                s.post(
                    self.owner,
                    work,
                    via,
                    Then::SetNotify {
                        seg: seg.clone(),
                        id,
                        value,
                        _keep: (mr, buf),
                    },
                )
            }
        }
    }

    fn atomic(&self, offset: u64, op: crate::model::ids::AtomicOp) -> Result<Option<u64>> {
        if !self.shared.nic_atomics {
            // The owner applies it (`Message::Atomic`, see `atomics.rs`).
            return Ok(None);
        }
        let remote = self.keys.data_addr + offset;
        let rkey = self.keys.data_rkey;
        let (compare_add, swap) = match op {
            crate::model::ids::AtomicOp::FetchAdd(v) => (v, None),
            crate::model::ids::AtomicOp::CompareSwap { comparator, new } => (comparator, Some(new)),
        };
        let buf = self
            .shared
            .blocking(self.owner, 8, |addr, lkey| Work::Atomic {
                addr,
                lkey,
                remote,
                rkey,
                compare_add,
                swap,
            })?;
        let mut old = [0u8; 8];
        old.copy_from_slice(&buf);
        Ok(Some(u64::from_ne_bytes(old)))
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
mod tests {
    use super::*;

    #[test]
    fn net_device_names_a_device_and_port_per_rank() {
        assert_eq!(device_choice(None, 3).unwrap(), (None, 1));
        assert_eq!(
            device_choice(Some("mlx5_0:2"), 0).unwrap(),
            (Some("mlx5_0".into()), 2)
        );
        assert_eq!(
            device_choice(Some("rxe0,rxe1"), 3).unwrap(),
            (Some("rxe1".into()), 1)
        );
        assert!(device_choice(Some("mlx5_0:x"), 0).is_err());
    }
}
