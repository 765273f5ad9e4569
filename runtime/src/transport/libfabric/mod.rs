//! libfabric (OpenFabrics Interfaces) RMA, for the network transport of
//! machines that do not speak verbs: HPE Slingshot (`cxi`), AWS EFA
//! (`efa`), and anywhere through `tcp;ofi_rxm` or `verbs;ofi_rxm`
//! (cargo feature `libfabric`; issue 28).
//!
//! # What is here, and what is not yet
//!
//! This is the transport's lower half: the libfabric objects and
//! operations, wrapped once, safe to use, and tested on their own
//! (`tests.rs`, two endpoints over `tcp;ofi_rxm`). The upper half,
//! `transport.rs` beside it, implements the runtime's `NetworkTransport`
//! and `RemoteSegment` over it (`GASPI_TRANSPORT=libfabric`; decision
//! 0049); it is declared in `transport/mod.rs`, since the benchmark
//! program compiles this file into itself. The section at the end says
//! how it plugs in.
//!
//! # Layers (as cudarc: raw, result, safe)
//!
//! - raw: the `gaspi-libfabric-sys` crate, bindgen's binding of the
//!   system's headers with a C shim for their `static inline` calls
//!   (docs/decisions/0045-libfabric-binding.md). Only this module uses it.
//! - result: [`error`] turns every return code into a `Result` once.
//! - safe: owning handles whose `Drop` closes the object, tied together by
//!   `Arc`s so that an object can never outlive the one it was opened from
//!   ([`Fabric`] ← [`Domain`] ← [`AddressVector`], [`CompletionQueue`] ←
//!   [`Endpoint`] ← [`MemoryRegion`]), and a [`MemoryRegion`] borrows the
//!   [`LocalMemory`] it registers (or, for memory the runtime maps itself,
//!   its owner promises to drop it first: [`MemoryRegion::register_raw`]).
//!
//! # Choosing the provider
//!
//! [`Info::query`] asks `fi_getinfo` for a reliable-datagram endpoint
//! (`FI_EP_RDM`: reliable, unconnected, one endpoint reaching every peer
//! through an address vector) with `FI_RMA`, plus `FI_ATOMIC` where
//! offered. The provider is the one `GASPI_NET_PROVIDER` names
//! ([`Query::from_env`]) or else the best offered: hardware (`cxi`,
//! `efa`, `opx`, `psm3`, `psm2`, `verbs;ofi_rxm`, `ucx`) before TCP, never
//! `shm` (the runtime has its own shared-memory transport). The domain is
//! opened `FI_THREAD_SAFE`, with `FI_AV_TABLE` and `FI_RM_ENABLED` (a full
//! endpoint answers `-FI_EAGAIN`, which the layer retries after reading
//! completions), and no modes (`FI_CONTEXT`) put on the application.
//!
//! # A notification never overtakes its data
//!
//! GASPI's notification word must not be seen at the target before the
//! data written before it to the same rank. libfabric promises that only
//! when asked, in one of three ways, chosen per provider at
//! [`Info::query`] from what it reports ([`NotifyOrder`], cheapest first):
//!
//! 1. [`NotifyOrder::InOrder`]: the transmit attributes' `msg_order` has
//!    `FI_ORDER_RMA_WAW` (or the older `FI_ORDER_WAW`), asked for in the
//!    hints: RMA writes to one peer are performed in the order posted, up
//!    to `max_order_waw_size` (writes are limited to that:
//!    [`Attributes::max_write`]). The word is then just the next write.
//!    `tcp;ofi_rxm` offers it (one TCP stream per peer pair; libfabric
//!    1.17 reports `max_order_waw_size` unlimited), and so does
//!    `verbs;ofi_rxm` (one RC queue pair per peer pair, whose WRITEs land
//!    in order; seen on Soft-RoCE: `max_order_waw_size` 8 MiB, so writes
//!    are split at 8 MiB).
//! 2. [`NotifyOrder::Fence`]: the provider has `FI_FENCE`; the word's
//!    write carries it and starts after everything before it to that peer
//!    completed. (`tcp;ofi_rxm` 1.17 does not offer `FI_FENCE`.)
//! 3. [`NotifyOrder::DeliveryComplete`]: writes carry
//!    `FI_DELIVERY_COMPLETE` (completion = in the target's memory), and
//!    the layer holds a word back until every earlier write to its peer has
//!    completed, posting it from [`Endpoint::poll`]. A round trip more per
//!    word; for providers that offer neither of the above (EFA's RDM
//!    endpoint offers no write-after-write order).
//!
//! `tcp;ofi_rxm` and `verbs;ofi_rxm` 1.17 report `max_order_waw_size` 0
//! when `FI_ATOMIC` is asked for (rxm emulates atomics over messages), so
//! by default the
//! layer takes it in order and without atomics; [`Query::atomics`] asks
//! for atomics, which then come with [`NotifyOrder::DeliveryComplete`].
//!
//! A fourth way, for providers whose target reads its completion queue
//! anyway (manual progress): the notification rides on the data's write
//! as remote CQ data ([`Endpoint::write_with_data`],
//! `FI_REMOTE_CQ_DATA`); the target's [`Endpoint::poll`] returns
//! [`Event::Remote`] once the data is in its memory, and the runtime sets
//! the word then. One operation each way instead of two (on TCP one
//! message instead of two, on a queue pair one WRITE with immediate
//! instead of two WRITEs): the runtime's choice for `write_notify` where
//! [`Attributes::cq_data_bytes`] is 4 or 8 and writes stay in order
//! (`tcp;ofi_rxm`: 8 bytes; `verbs;ofi_rxm`: 4, which hold a segment, an
//! id below 65536 and a value below 256; decision 0052).
//!
//! The tests run the ordering check with each mechanism the provider can
//! do (`tcp;ofi_rxm`: 1, 3 and remote CQ data).
//!
//! # Progress: who moves the bytes
//!
//! `tcp;ofi_rxm` and `verbs;ofi_rxm` report `FI_PROGRESS_MANUAL` for data
//! ([`Attributes::manual_progress`]): a peer's write into this process's
//! memory is applied only while this process reads its completion queue
//! ([`Endpoint::poll`]), and so is this side's own sending. The target of
//! a write does not get a completion for it; it must poll all the same.
//! (`cxi` and `efa` move data in the NIC: polling then only collects
//! completions.) So the runtime must call [`Endpoint::poll`]
//! - from its progress engine, sleeping on the completion queue's file
//!   descriptor ([`CompletionQueue::wait_fd`], after
//!   [`CompletionQueue::try_wait`]; `FI_WAIT_FD`, which `tcp;ofi_rxm`
//!   gives; a provider without one is polled) in its epoll set, and
//! - from threads that wait for a notification word or in `wait`, while
//!   they spin (as the TCP transport's waiters read their connections,
//!   decision 0026), since a sleeping engine thread adds a wake-up to
//!   every round trip.
//!
//! The same holds for the sending side: under manual progress a large
//! write that `poll` is not called for stays partly unsent. A rank that
//! blocks somewhere else (a barrier on the control connection, the end of
//! the job) while its own writes are outstanding deadlocks with a peer
//! that waits for them (seen: the benchmark's 4 MiB ping-pong, whose last
//! write never left while the writer sat in a TCP read). The engine
//! thread's polling covers it in the runtime; `gaspi_proc_term` must
//! drain before it closes the endpoint.
//!
//! `verbs;ofi_rxm` on Soft-RoCE (the VM of `tests/rdma-vm/`, run by hand:
//! bench/results/2026-11-26-i28-libfabric-layer-verbs-rxm-softroce.txt):
//! its endpoint failed to enable ("Unable to create verbs CQ",
//! `fi_enable`: EINVAL): rxm sizes its message completion queue for
//! `FI_UNIVERSE_SIZE` peers (default 256), more than Soft-RoCE's queues
//! take. `ulimit -l unlimited` alone did not help; with
//! `FI_OFI_RXM_MSG_CQ_SIZE=1024 FI_UNIVERSE_SIZE=8` (and `ulimit -l
//! unlimited`) every test here passed over it. The launcher should set
//! `FI_UNIVERSE_SIZE` to the job's size, as MPI launchers do. It also
//! needs the `rdma_ucm` module (librdmacm), which the VM did not load.
//!
//! `poll` is thread-safe (`FI_THREAD_SAFE`); any thread may drive it, and
//! events go to whichever thread read them: the runtime settles them in
//! its shared request table by [`Token`].
//!
//! # Plugging it into the transport seam (done in `transport.rs`)
//!
//! What follows was the plan; `transport.rs` follows it, except: the
//! bind address is the one that reaches the rendezvous; `write_notify`
//! is one write carrying remote CQ data where the provider allows it
//! (decisions 0050, 0052), else a data write and a word write; `read_notify`
//! is set by the CPU once the reads before it completed; progress is a
//! completion thread on the wait descriptor plus `wait`'s spin (not the
//! engine's epoll set); and shutdown flushes with a read per target.
//!
//! - At init: [`Info::query`] with [`Query::from_env`] (and the bind
//!   address the bootstrap uses as [`Query::source`] for the TCP
//!   providers); open [`Fabric`], [`Domain`], one [`CompletionQueue`],
//!   one [`AddressVector`] and one [`Endpoint`]; log
//!   [`Attributes::provider`] and the [`NotifyOrder`]; the endpoint's
//!   [`Endpoint::address`] bytes go into this rank's bootstrap record,
//!   and each peer's are inserted with [`AddressVector::insert`]
//!   (one [`Peer`] per rank).
//! - At segment creation: register the data and the notification words
//!   ([`MemoryRegion::register_raw`], `Access::ALL`) and keep the
//!   registration in the segment, dropped before its memory is unmapped;
//!   the two [`RemoteMemory`] values (24 bytes each) go into the segment's
//!   descriptor as its packed remote key.
//! - Requests: `write` = [`Endpoint::write`] from the registered source
//!   segment (an unregistered source, GPU memory, through a registered
//!   staging copy), split at [`Attributes::max_write`]; `notify` =
//!   [`Endpoint::notify`] (`write_notify` = [`Endpoint::write_with_data`]
//!   under manual progress, the engine setting the word on
//!   [`Event::Remote`]: encode segment, word and value in its 64 bits);
//!   `read` = [`Endpoint::read`]; atomics =
//!   [`Endpoint::fetch_add`] / [`Endpoint::compare_swap`] with a
//!   registered scratch slot per request, where offered (else through the
//!   owner, which is also the default for verbs: a NIC atomic is atomic
//!   only against other NIC atomics). The request's table index is the
//!   [`Token`] id; its [`Event`] settles it, and a [`FabricError::Peer`]
//!   marks the peer corrupt and fails its queue's `wait` naming the rank.
//! - Progress: the completion queue's descriptor in the engine's epoll
//!   set, and [`Endpoint::poll`] in the waiters' spin, as above.

// Parts of the layer serve only its own tests and the benchmark program,
// which compiles these sources into itself (`bench/src/fabric.rs`):
// remote CQ data, `LocalMemory`, the mechanisms' names.
#![allow(dead_code, unused_imports)]

mod error;
mod info;
mod memory;
mod objects;
mod ops;
#[cfg(test)]
mod tests;

pub(crate) use error::{FabricError, Result};
pub(crate) use info::{Attributes, Info, NotifyOrder, Query};
pub(crate) use memory::{Access, LocalMemory, LocalSlice, MemoryRegion, RemoteMemory};
pub(crate) use objects::{
    AddressVector, CompletionQueue, Domain, Endpoint, Event, Fabric, Peer, Token,
};
pub(crate) use ops::MAX_RANK;

/// Everything one process opens to talk over a provider: its fabric,
/// domain, completion queue, address vector and endpoint.
#[derive(Debug, Clone)]
pub(crate) struct Node {
    /// The endpoint (it holds the rest).
    pub endpoint: std::sync::Arc<Endpoint>,
    /// Its address vector, for inserting peers.
    pub peers: std::sync::Arc<AddressVector>,
}

impl Node {
    /// Opens the provider `query` finds, sized for `ranks` peers.
    pub(crate) fn open(query: &Query, ranks: usize) -> Result<Node> {
        let info = Info::query(query)?;
        let fabric = Fabric::open(info)?;
        let domain = Domain::open(&fabric)?;
        let cq = CompletionQueue::open(&domain, 0)?;
        let peers = AddressVector::open(&domain, ranks)?;
        let endpoint = Endpoint::open(&domain, &cq, &peers)?;
        let a = endpoint.attributes();
        tracing::info!(
            provider = %a.provider,
            domain = %a.domain,
            order = a.order.name(),
            atomics = endpoint.has_atomics(),
            manual_progress = a.manual_progress,
            mr_mode = format_args!("{:#x}", a.mr_mode),
            "libfabric endpoint open"
        );
        Ok(Node { endpoint, peers })
    }
}
