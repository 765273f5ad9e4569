//! The request ring: how a GPU kernel asks the CPU progress engine to do a
//! `write_notify` or `notify` it cannot do itself.
//!
//! A kernel can store directly only into memory mapped into its GPU (its own
//! segments, a same-host peer GPU opened with CUDA IPC, host-mapped memory).
//! For every other target (a rank on another host, a host segment of
//! another process) it posts a request into this ring and goes on; the
//! rank's progress engine pops it and performs the operation over the right
//! transport.
//!
//! # Shape
//!
//! A bounded ring of `capacity` (a power of two) 64-byte [`RingSlot`]s in
//! pinned host memory mapped into the GPU, behind a [`RingHeader`]. Many
//! producers (any GPU thread), one consumer (the progress engine, which
//! owns the only [`RequestRing`] of it).
//!
//! The producers' ticket counter, [`RingProducer::head`], lives in *device*
//! memory, not in the header: only GPU threads touch it, a device-scope
//! `atomicAdd` there is fast, and an atomic read-modify-write on host memory
//! over PCIe is not guaranteed to be atomic. The header keeps the
//! consumer's counters, each on its own 128-byte line so that the GPU's
//! polling of one does not contend with the CPU's writes of the other.
//!
//! # Protocol (tickets count from 0, slot = ticket mod capacity)
//!
//! Producer (GPU thread), for one request:
//! 1. `ticket = atomicAdd(&producer.head, 1)`;
//! 2. wait while `ticket - acquire(header.tail) >= capacity` (ring full:
//!    poll, never overwrite); the device code aggregates the lanes of a
//!    warp that post together (one `atomicAdd` of the lane count, one lane
//!    waiting for room for the last ticket), which is why the capacity is at
//!    least [`RING_MIN_CAPACITY`]. Waiting lanes judge room from
//!    `producer.tail_seen` (device memory); one at a time (the holder of
//!    `producer.poller`) reads `header.tail` across PCIe and raises
//!    `tail_seen` to it;
//! 3. write the request fields of the slot;
//! 4. `release-store(slot.seq, ticket + 1)`: publishes the slot.
//!
//! Consumer ([`RequestRing::try_pop`]), with `t = header.tail`:
//! 1. `acquire-load(slot(t).seq)`; unless it equals `t + 1`, the ring is
//!    empty (or the next producer has not finished writing): return `None`;
//! 2. read the fields;
//! 3. `release-store(header.tail, t + 1)`: the slot is free for ticket
//!    `t + capacity`, whose producer cannot write before it sees this store,
//!    i.e. after the reads of step 2.
//!
//! Zeroed memory is a valid empty ring: `seq == 0` never equals `t + 1`.
//! A stale `seq` of the previous lap (`t + 1 - capacity`) never does either.
//!
//! Inline requests (UCX's *inline* protocol, decision 0093). A ring may
//! carry a payload area after its slots: one payload of `inline_max`
//! bytes per slot (in the header; 0: none). A producer whose write goes
//! over a network transport (the runtime marks such table entries with
//! [`crate::SEGMENT_RING_INLINE`]) and is at most `inline_max` bytes copies
//! the source into its slot's payload between steps 2 and 4 and sets
//! [`FLAG_INLINE`] in the slot: the CPU sends straight from pinned memory,
//! with no copy out of GPU memory (about 6 us on an H200 for a few bytes)
//! and no stream work on the sending side. The consumer copies the payload
//! out before step 3 ([`RequestRing::try_pop_into`]): once the tail moves
//! on, the slot and its payload belong to the next lap. The payload has
//! no room of its own to wait for: a lane waiting for it while a lane of
//! its own warp held an earlier ticket deadlocked at the warp's
//! reconvergence point (a 512-slot ring with 256 payloads, session 3 of
//! issue 41).
//!
//! Local completion: [`RequestRing::complete_through`] advances
//! `header.completed` once the engine no longer needs the source data of the
//! requests before it; `gaspi_ring_quiet` on the device waits for that.
//!
//! The CUDA side (`cuda/gaspi_device.cuh`) mirrors these structs field for
//! field and checks sizes and offsets with `static_assert`; this file checks
//! them with `const` assertions. Change both together.

use std::cell::Cell;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};

/// Bytes of one cache line as the ring pads them (two x86 lines, one GPU L2
/// sector group), so that counters written by different agents never share.
pub const RING_LINE: usize = 128;

/// Value of [`RingHeader::magic`] once the ring is initialised ("GRNG").
pub const RING_MAGIC: u32 = 0x4752_4e47;

/// Layout version in [`RingHeader::version`] (2: the payload area and
/// [`RingSlot::flags`]).
pub const RING_VERSION: u32 = 2;

/// Largest payload per slot a ring accepts ([`RingHeader::inline_max`]).
pub const RING_INLINE_LIMIT: u32 = 64 << 10;

/// Bit of [`RingSlot::flags`]: the request's source bytes are in its
/// ticket's payload (`size` of them, at most the ring's `inline_max`).
pub const FLAG_INLINE: u32 = 1;

/// Largest capacity accepted (slots).
pub const RING_MAX_CAPACITY: u32 = 1 << 24;

/// Smallest capacity accepted: the lanes of a warp reserve up to 32 tickets
/// at once and wait for room for the last of them, which must belong to an
/// earlier reservation for the wait to end.
pub const RING_MIN_CAPACITY: u32 = 32;

/// Request kind in [`RingSlot::op`]: `write_notify` (data, then notification).
pub const OP_WRITE_NOTIFY: u32 = 1;
/// Request kind in [`RingSlot::op`]: `notify` alone.
pub const OP_NOTIFY: u32 = 2;
/// Request kind in [`RingSlot::op`]: `write` alone (no notification; the
/// device's `gaspi_write*`).
pub const OP_WRITE: u32 = 3;

/// The ring's header, at the start of its host-mapped memory. 384 bytes.
#[repr(C, align(128))]
#[derive(Debug)]
pub struct RingHeader {
    /// Requests taken out by the consumer. Written by the CPU (release),
    /// polled by producers (acquire) that wait for a free slot.
    pub tail: AtomicU64,
    _pad0: [u8; RING_LINE - 8],
    /// Requests whose source data the consumer no longer needs (local
    /// completion). Written by the CPU, polled by `gaspi_ring_quiet`.
    pub completed: AtomicU64,
    _pad1: [u8; RING_LINE - 8],
    /// Number of slots, a power of two. Read-only once initialised.
    pub capacity: u32,
    /// `size_of::<RingSlot>()`, a check for the device code.
    pub slot_size: u32,
    /// [`RING_MAGIC`].
    pub magic: u32,
    /// [`RING_VERSION`].
    pub version: u32,
    /// Bytes of each slot's payload after the slots (a multiple of
    /// [`RING_LINE`], at most [`RING_INLINE_LIMIT`]); 0: no payload area.
    pub inline_max: u32,
    _pad2: [u8; RING_LINE - 20],
}

/// The producers' ticket counter, in device memory (one 128-byte line),
/// with their shared view of the consumer's tail: waiting producers read
/// `tail_seen` (device memory) and only the one holding `poller` reads the
/// header's tail across PCIe, so a full ring polled by many warps does not
/// flood PCIe (which slowed the consumer's own GPU work).
#[repr(C, align(128))]
#[derive(Debug)]
pub struct RingProducer {
    /// Tickets handed out so far (`atomicAdd` by GPU threads).
    pub head: AtomicU64,
    /// The highest `header.tail` a producer has read (`atomicMax`).
    pub tail_seen: AtomicU64,
    /// 1 while one producer reads the header's tail for the others.
    pub poller: AtomicU32,
    _pad: [u8; RING_LINE - 20],
}

/// One request slot. 64 bytes; the fields are plain data written by one
/// producer before it publishes the slot through `seq`.
#[repr(C, align(64))]
#[derive(Debug)]
pub struct RingSlot {
    /// `ticket + 1` once the request of `ticket` is written (release).
    pub seq: AtomicU64,
    /// [`OP_WRITE_NOTIFY`], [`OP_NOTIFY`] or [`OP_WRITE`].
    pub op: u32,
    /// Rank to write to.
    pub target_rank: u32,
    /// Segment id of the source data (write_notify).
    pub local_segment: u32,
    /// Segment id on the target rank.
    pub remote_segment: u32,
    /// Byte offset of the source data in the local segment.
    pub local_offset: u64,
    /// Byte offset of the destination in the remote segment.
    pub remote_offset: u64,
    /// Bytes to write (0 for notify).
    pub size: u64,
    /// Notification id to set on the target.
    pub notification_id: u32,
    /// Notification value (never 0).
    pub value: u32,
    /// [`FLAG_INLINE`] or 0.
    pub flags: u32,
    /// Zero; room for a queue number.
    pub reserved: u32,
}

const _: () = {
    assert!(std::mem::size_of::<RingHeader>() == 3 * RING_LINE);
    assert!(std::mem::offset_of!(RingHeader, tail) == 0);
    assert!(std::mem::offset_of!(RingHeader, completed) == RING_LINE);
    assert!(std::mem::offset_of!(RingHeader, capacity) == 2 * RING_LINE);
    assert!(std::mem::offset_of!(RingHeader, slot_size) == 2 * RING_LINE + 4);
    assert!(std::mem::offset_of!(RingHeader, magic) == 2 * RING_LINE + 8);
    assert!(std::mem::offset_of!(RingHeader, version) == 2 * RING_LINE + 12);
    assert!(std::mem::offset_of!(RingHeader, inline_max) == 2 * RING_LINE + 16);
    assert!(std::mem::size_of::<RingProducer>() == RING_LINE);
    assert!(std::mem::offset_of!(RingProducer, tail_seen) == 8);
    assert!(std::mem::offset_of!(RingProducer, poller) == 16);
    assert!(std::mem::size_of::<RingSlot>() == 64);
    assert!(std::mem::offset_of!(RingSlot, seq) == 0);
    assert!(std::mem::offset_of!(RingSlot, op) == 8);
    assert!(std::mem::offset_of!(RingSlot, target_rank) == 12);
    assert!(std::mem::offset_of!(RingSlot, local_segment) == 16);
    assert!(std::mem::offset_of!(RingSlot, remote_segment) == 20);
    assert!(std::mem::offset_of!(RingSlot, local_offset) == 24);
    assert!(std::mem::offset_of!(RingSlot, remote_offset) == 32);
    assert!(std::mem::offset_of!(RingSlot, size) == 40);
    assert!(std::mem::offset_of!(RingSlot, notification_id) == 48);
    assert!(std::mem::offset_of!(RingSlot, value) == 52);
    assert!(std::mem::offset_of!(RingSlot, flags) == 56);
    assert!(std::mem::offset_of!(RingSlot, reserved) == 60);
};

/// What a request asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestOp {
    /// Write `size` bytes, then set the notification.
    WriteNotify,
    /// Set the notification only.
    Notify,
    /// Write `size` bytes, no notification (`notification_id` and `value`
    /// mean nothing).
    Write,
    /// A code this version does not know (a device-code bug); the engine
    /// reports and drops it.
    Unknown(u32),
}

/// One request, as popped from the ring. The engine must still check it
/// (rank, segments, bounds, value): it comes from user kernels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// Position in the ring's total order (0, 1, 2, ...).
    pub ticket: u64,
    /// The operation.
    pub op: RequestOp,
    /// Rank to write to.
    pub target_rank: u32,
    /// Segment id of the source data.
    pub local_segment: u32,
    /// Byte offset of the source data.
    pub local_offset: u64,
    /// Segment id on the target rank.
    pub remote_segment: u32,
    /// Byte offset on the target.
    pub remote_offset: u64,
    /// Bytes to write.
    pub size: u64,
    /// Notification id.
    pub notification_id: u32,
    /// Notification value.
    pub value: u32,
    /// The slot's flags ([`FLAG_INLINE`]).
    pub flags: u32,
    /// Where the request's source bytes start in the buffer given to
    /// [`RequestRing::try_pop_into`], when it carried them in the ring.
    /// `None` with [`FLAG_INLINE`] set: the request claimed more bytes
    /// than the ring carries (or the ring has no payload area), and must
    /// be refused.
    pub inline_at: Option<usize>,
}

impl Request {
    /// Whether the request says its bytes travelled in the ring.
    pub fn claims_inline(&self) -> bool {
        self.flags & FLAG_INLINE != 0
    }
}

/// Errors of attaching to ring memory.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RingError {
    /// Capacity not a power of two in `RING_MIN_CAPACITY..=RING_MAX_CAPACITY`.
    #[error(
        "ring capacity {0} is not a power of two between {RING_MIN_CAPACITY} and {RING_MAX_CAPACITY}"
    )]
    BadCapacity(u32),
    /// The memory is not 128-byte aligned.
    #[error("ring memory at {0:#x} is not 128-byte aligned")]
    Misaligned(usize),
    /// A payload size that is not a multiple of [`RING_LINE`] up to
    /// [`RING_INLINE_LIMIT`].
    #[error("ring payload of {0} bytes per slot is not a multiple of {RING_LINE} up to {RING_INLINE_LIMIT}")]
    BadInline(u32),
    /// The header does not describe a ring of this layout and capacity.
    #[error("ring header mismatch: magic {magic:#x}, version {version}, capacity {capacity}, slot size {slot_size}")]
    BadHeader {
        /// magic found
        magic: u32,
        /// version found
        version: u32,
        /// capacity found
        capacity: u32,
        /// slot size found
        slot_size: u32,
    },
}

/// The consumer end of a request ring, over memory it does not own.
///
/// Exactly one `RequestRing` may exist per ring: it is `Send` (the progress
/// engine thread takes it) but not `Sync`, so the single-consumer rule holds
/// within a process; [`RequestRing::from_raw`]'s contract covers the rest.
#[derive(Debug)]
pub struct RequestRing {
    header: *const RingHeader,
    slots: *const RingSlot,
    /// The payload area (after the slots); meaningful when `inline_max > 0`.
    payload: *const u8,
    inline_max: u32,
    mask: u64,
    /// not Sync: one consumer
    _single_consumer: PhantomData<Cell<()>>,
}

// SAFETY: the ring memory is shared with the GPU (and the producers) through
// atomics only; moving the single consumer to another thread is fine.
unsafe impl Send for RequestRing {}

impl RequestRing {
    /// Bytes of host-mapped memory a ring of `capacity` slots needs (header
    /// followed by the slots).
    pub const fn bytes_for(capacity: u32) -> usize {
        Self::bytes_with_payload(capacity, 0)
    }

    /// Bytes of host-mapped memory a ring of `capacity` slots with
    /// payloads of `inline_max` bytes needs (header, slots, payloads).
    pub const fn bytes_with_payload(capacity: u32, inline_max: u32) -> usize {
        std::mem::size_of::<RingHeader>()
            + capacity as usize * (std::mem::size_of::<RingSlot>() + inline_max as usize)
    }

    /// Bytes of device memory for the producers' counter ([`RingProducer`]);
    /// it must be zeroed before the first kernel posts.
    pub const PRODUCER_BYTES: usize = std::mem::size_of::<RingProducer>();

    fn check(base: *mut u8, capacity: u32, inline_max: u32) -> Result<(), RingError> {
        if !capacity.is_power_of_two()
            || !(RING_MIN_CAPACITY..=RING_MAX_CAPACITY).contains(&capacity)
        {
            return Err(RingError::BadCapacity(capacity));
        }
        if inline_max > RING_INLINE_LIMIT || !(inline_max as usize).is_multiple_of(RING_LINE) {
            return Err(RingError::BadInline(inline_max));
        }
        if base as usize & (RING_LINE - 1) != 0 {
            return Err(RingError::Misaligned(base as usize));
        }
        Ok(())
    }

    /// Initialises ring memory (an empty ring of `capacity` slots) and
    /// becomes its consumer. Call before any kernel can post to it, with the
    /// producers' counter zeroed at the same time.
    ///
    /// # Safety
    /// `base` must be valid for reads and writes of
    /// [`bytes_for`](Self::bytes_for)`(capacity)` bytes and stay so for the
    /// lifetime of the returned value; no producer may be using the memory
    /// during this call; no other `RequestRing` may exist for it. Producers
    /// (GPU threads) may access it afterwards, following the ring protocol.
    pub unsafe fn init(base: *mut u8, capacity: u32) -> Result<RequestRing, RingError> {
        // SAFETY: the same contract, with no payload area.
        unsafe { Self::init_with_payload(base, capacity, 0) }
    }

    /// [`init`](Self::init) of a ring with `inline_max` payload bytes per
    /// slot (a multiple of [`RING_LINE`] up to [`RING_INLINE_LIMIT`]).
    ///
    /// # Safety
    /// As for [`init`](Self::init), with
    /// [`bytes_with_payload`](Self::bytes_with_payload)`(capacity,
    /// inline_max)` bytes at `base`.
    pub unsafe fn init_with_payload(
        base: *mut u8,
        capacity: u32,
        inline_max: u32,
    ) -> Result<RequestRing, RingError> {
        Self::check(base, capacity, inline_max)?;
        // SAFETY: the caller grants exclusive access to
        // bytes_with_payload(capacity, inline_max) bytes at `base` for this
        // call; the header and slots are their first bytes_for(capacity).
        unsafe { std::ptr::write_bytes(base, 0, Self::bytes_for(capacity)) };
        let header = base as *mut RingHeader;
        // SAFETY: `header` is aligned (checked) and within the region; the
        // config fields are plain data nobody else reads yet.
        unsafe {
            (*header).capacity = capacity;
            (*header).slot_size = std::mem::size_of::<RingSlot>() as u32;
            (*header).magic = RING_MAGIC;
            (*header).version = RING_VERSION;
            (*header).inline_max = inline_max;
        }
        // SAFETY: same contract as ours.
        unsafe { Self::from_raw(base, capacity) }
    }

    /// Becomes the consumer of an initialised ring at `base`.
    ///
    /// # Safety
    /// `base` must point to
    /// [`bytes_with_payload`](Self::bytes_with_payload)`(capacity,
    /// inline_max)` bytes (`inline_max` as the header says) initialised by
    /// [`init_with_payload`](Self::init_with_payload) (or its equivalent), valid for
    /// reads and writes for the lifetime of the returned value. Producers may
    /// access the memory concurrently only as the ring protocol says. No
    /// other `RequestRing` (in any process) may consume the same ring.
    pub unsafe fn from_raw(base: *mut u8, capacity: u32) -> Result<RequestRing, RingError> {
        Self::check(base, capacity, 0)?;
        let header = base as *const RingHeader;
        // SAFETY: aligned and within the region (contract); the config line
        // is written once before producers start and read-only afterwards.
        let (magic, version, found, slot_size, inline_max) = unsafe {
            (
                (*header).magic,
                (*header).version,
                (*header).capacity,
                (*header).slot_size,
                (*header).inline_max,
            )
        };
        if magic != RING_MAGIC
            || version != RING_VERSION
            || found != capacity
            || slot_size as usize != std::mem::size_of::<RingSlot>()
        {
            return Err(RingError::BadHeader {
                magic,
                version,
                capacity: found,
                slot_size,
            });
        }
        Self::check(base, capacity, inline_max)?;
        Ok(RequestRing {
            header,
            // SAFETY: the slots follow the header inside the region.
            slots: unsafe { base.add(std::mem::size_of::<RingHeader>()) } as *const RingSlot,
            // SAFETY: the payload area follows the slots inside the region
            // (one past its end when inline_max is 0, never read then).
            payload: unsafe { base.add(Self::bytes_for(capacity)) },
            inline_max,
            mask: capacity as u64 - 1,
            _single_consumer: PhantomData,
        })
    }

    fn header(&self) -> &RingHeader {
        // SAFETY: valid for our lifetime (contract of from_raw); the fields
        // shared with producers are atomics, the rest read-only.
        unsafe { &*self.header }
    }

    /// Number of slots.
    pub fn capacity(&self) -> u32 {
        self.mask as u32 + 1
    }

    /// Requests popped so far.
    pub fn consumed(&self) -> u64 {
        // Only this consumer writes `tail`.
        self.header().tail.load(Ordering::Relaxed)
    }

    /// Payload bytes per slot (0: the ring carries none).
    pub fn inline_max(&self) -> u32 {
        self.inline_max
    }

    /// Takes the next request if one has been published; never blocks.
    /// An inline request's bytes are dropped (see
    /// [`try_pop_into`](Self::try_pop_into)).
    pub fn try_pop(&self) -> Option<Request> {
        self.try_pop_into(&mut Vec::new())
    }

    /// Takes the next request if one has been published; never blocks. The
    /// bytes of an inline request ([`FLAG_INLINE`], a write of at most
    /// [`inline_max`](Self::inline_max) bytes) are appended to `payload`,
    /// at [`Request::inline_at`], before the slot is handed back.
    pub fn try_pop_into(&self, payload: &mut Vec<u8>) -> Option<Request> {
        let header = self.header();
        let ticket = header.tail.load(Ordering::Relaxed);
        // SAFETY: (ticket & mask) < capacity, so the slot lies in the region.
        let slot = unsafe { self.slots.add((ticket & self.mask) as usize) };
        // SAFETY: `seq` is an aligned AtomicU64 inside a live slot; producers
        // only access it atomically.
        let seq = unsafe { &(*slot).seq };
        // Acquire: pairs with the producer's release store of `seq`, so the
        // field writes that came before it are visible to the reads below.
        if seq.load(Ordering::Acquire) != ticket.wrapping_add(1) {
            return None;
        }
        // SAFETY: the slot is published for `ticket` and no producer writes
        // it again before it sees `tail > ticket` (stored below, after these
        // reads). Volatile: the writer is a device outside Rust's view.
        let mut request = unsafe {
            let op = std::ptr::addr_of!((*slot).op).read_volatile();
            Request {
                ticket,
                op: match op {
                    OP_WRITE_NOTIFY => RequestOp::WriteNotify,
                    OP_NOTIFY => RequestOp::Notify,
                    OP_WRITE => RequestOp::Write,
                    other => RequestOp::Unknown(other),
                },
                target_rank: std::ptr::addr_of!((*slot).target_rank).read_volatile(),
                local_segment: std::ptr::addr_of!((*slot).local_segment).read_volatile(),
                local_offset: std::ptr::addr_of!((*slot).local_offset).read_volatile(),
                remote_segment: std::ptr::addr_of!((*slot).remote_segment).read_volatile(),
                remote_offset: std::ptr::addr_of!((*slot).remote_offset).read_volatile(),
                size: std::ptr::addr_of!((*slot).size).read_volatile(),
                notification_id: std::ptr::addr_of!((*slot).notification_id).read_volatile(),
                value: std::ptr::addr_of!((*slot).value).read_volatile(),
                flags: std::ptr::addr_of!((*slot).flags).read_volatile(),
                inline_at: None,
            }
        };
        if request.claims_inline()
            && matches!(request.op, RequestOp::WriteNotify | RequestOp::Write)
            && request.size <= self.inline_max as u64
        {
            let at = payload.len();
            let len = request.size as usize;
            let index = (ticket & self.mask) as usize;
            payload.reserve(len);
            // SAFETY: the payload of slot `index` is inline_max >= len bytes
            // inside the region; the producer wrote it before publishing
            // `seq` (acquired above) and the next lap's producer writes it
            // only after the tail passes this ticket (stored below, after
            // this copy).
            // `payload` has room for len more bytes (reserved), which the
            // copy initialises before set_len.
            unsafe {
                let src = self.payload.add(index * self.inline_max as usize);
                std::ptr::copy_nonoverlapping(src, payload.as_mut_ptr().add(at), len);
                payload.set_len(at + len);
            }
            request.inline_at = Some(at);
        }
        // Release: our reads of the slot happen before any producer that
        // acquires the new tail reuses it.
        header.tail.store(ticket + 1, Ordering::Release);
        Some(request)
    }

    /// Declares that the source data of all requests with ticket `< count`
    /// has been read (or sent), so kernels waiting in `gaspi_ring_quiet` may
    /// reuse their buffers. Never moves backwards.
    pub fn complete_through(&self, count: u64) {
        // Release: the engine's reads of the source data happen before a
        // kernel that acquires `completed` overwrites it.
        self.header().completed.fetch_max(count, Ordering::Release);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::alloc::{alloc_zeroed, dealloc, Layout};
    use std::sync::Arc;

    /// Ring memory from the Rust allocator, standing in for pinned memory.
    struct Memory {
        ptr: *mut u8,
        layout: Layout,
    }
    // SAFETY: test memory accessed only per the ring protocol.
    unsafe impl Send for Memory {}
    // SAFETY: as above.
    unsafe impl Sync for Memory {}

    impl Memory {
        fn new(capacity: u32) -> Memory {
            Memory::with_payload(capacity, 0)
        }

        fn with_payload(capacity: u32, inline_max: u32) -> Memory {
            let bytes = RequestRing::bytes_with_payload(capacity, inline_max);
            let layout = Layout::from_size_align(bytes, 128).unwrap();
            // SAFETY: non-zero size.
            let ptr = unsafe { alloc_zeroed(layout) };
            assert!(!ptr.is_null());
            Memory { ptr, layout }
        }
    }

    impl Drop for Memory {
        fn drop(&mut self) {
            // SAFETY: allocated with this layout.
            unsafe { dealloc(self.ptr, self.layout) }
        }
    }

    /// The GPU producer protocol, in Rust, over the same memory.
    struct Producer {
        memory: Arc<Memory>,
        head: Arc<AtomicU64>,
        capacity: u64,
    }

    impl Producer {
        fn header(&self) -> &RingHeader {
            // SAFETY: the header is at the start of live test memory.
            unsafe { &*(self.memory.ptr as *const RingHeader) }
        }

        fn slot(&self, ticket: u64) -> *mut RingSlot {
            let index = (ticket % self.capacity) as usize;
            // SAFETY: index < capacity: inside the memory.
            unsafe {
                (self.memory.ptr.add(std::mem::size_of::<RingHeader>()) as *mut RingSlot).add(index)
            }
        }

        /// Posts a request, polling while the ring is full (as the kernel does).
        fn post(&self, target_rank: u32, notification_id: u32, value: u32) -> u64 {
            let ticket = self.head.fetch_add(1, Ordering::Relaxed);
            while ticket - self.header().tail.load(Ordering::Acquire) >= self.capacity {
                std::thread::yield_now();
            }
            self.write(ticket, target_rank, notification_id, value);
            ticket
        }

        /// Posts a write_notify carrying `bytes` in its ticket's payload
        /// (as the device code does for a network route), claiming `size`
        /// bytes; waits while the ring is full.
        fn post_inline(&self, bytes: &[u8], size: u64, inline_max: u32) -> u64 {
            let ticket = self.head.fetch_add(1, Ordering::Relaxed);
            while ticket - self.header().tail.load(Ordering::Acquire) >= self.capacity {
                std::thread::yield_now();
            }
            let index = (ticket % self.capacity) as usize;
            let slot = self.slot(ticket);
            // SAFETY: this producer owns the slot and its payload for
            // `ticket` until it publishes it; the payload lies after the
            // slots, inline_max bytes per slot, inside the memory.
            unsafe {
                let payload = self
                    .memory
                    .ptr
                    .add(RequestRing::bytes_for(self.capacity as u32))
                    .add(index * inline_max as usize);
                std::ptr::copy_nonoverlapping(bytes.as_ptr(), payload, bytes.len());
                std::ptr::addr_of_mut!((*slot).op).write_volatile(OP_WRITE_NOTIFY);
                std::ptr::addr_of_mut!((*slot).size).write_volatile(size);
                std::ptr::addr_of_mut!((*slot).value).write_volatile(ticket as u32 + 1);
                std::ptr::addr_of_mut!((*slot).flags).write_volatile(FLAG_INLINE);
                (*slot).seq.store(ticket + 1, Ordering::Release);
            }
            ticket
        }

        /// Posts only if a slot is free now; false when the ring is full.
        fn try_post(&self, value: u32) -> bool {
            let ticket = self.head.load(Ordering::Relaxed);
            if ticket - self.header().tail.load(Ordering::Acquire) >= self.capacity {
                return false;
            }
            self.head.store(ticket + 1, Ordering::Relaxed);
            self.write(ticket, 3, 9, value);
            true
        }

        fn write(&self, ticket: u64, target_rank: u32, notification_id: u32, value: u32) {
            let slot = self.slot(ticket);
            // SAFETY: this producer owns the slot for `ticket` until it
            // publishes it (tail says the consumer is done with it).
            unsafe {
                std::ptr::addr_of_mut!((*slot).op).write_volatile(OP_WRITE_NOTIFY);
                std::ptr::addr_of_mut!((*slot).target_rank).write_volatile(target_rank);
                std::ptr::addr_of_mut!((*slot).local_segment).write_volatile(1);
                std::ptr::addr_of_mut!((*slot).local_offset).write_volatile(ticket * 8);
                std::ptr::addr_of_mut!((*slot).remote_segment).write_volatile(2);
                std::ptr::addr_of_mut!((*slot).remote_offset).write_volatile(ticket * 16);
                std::ptr::addr_of_mut!((*slot).size).write_volatile(64);
                std::ptr::addr_of_mut!((*slot).notification_id).write_volatile(notification_id);
                std::ptr::addr_of_mut!((*slot).value).write_volatile(value);
                (*slot).seq.store(ticket + 1, Ordering::Release);
            }
        }
    }

    fn ring(capacity: u32) -> (Arc<Memory>, RequestRing, Producer) {
        let memory = Arc::new(Memory::new(capacity));
        // SAFETY: fresh memory of the right size, owned by the test for
        // longer than the ring; one consumer.
        let ring = unsafe { RequestRing::init(memory.ptr, capacity) }.unwrap();
        let producer = Producer {
            memory: memory.clone(),
            head: Arc::new(AtomicU64::new(0)),
            capacity: capacity as u64,
        };
        (memory, ring, producer)
    }

    #[test]
    fn an_empty_ring_pops_nothing() {
        let (_memory, ring, _producer) = ring(32);
        assert_eq!(ring.try_pop(), None);
        assert_eq!(ring.consumed(), 0);
    }

    #[test]
    fn a_posted_request_pops_with_all_its_fields() {
        let (_memory, ring, producer) = ring(32);
        producer.post(5, 7, 42);
        let request = ring.try_pop().unwrap();
        assert_eq!(
            request,
            Request {
                ticket: 0,
                op: RequestOp::WriteNotify,
                target_rank: 5,
                local_segment: 1,
                local_offset: 0,
                remote_segment: 2,
                remote_offset: 0,
                size: 64,
                notification_id: 7,
                value: 42,
                flags: 0,
                inline_at: None,
            }
        );
        assert_eq!(ring.try_pop(), None);
        assert_eq!(ring.consumed(), 1);
    }

    #[test]
    fn each_operation_code_pops_as_its_kind() {
        let (_memory, ring, producer) = ring(32);
        let codes = [OP_WRITE_NOTIFY, OP_NOTIFY, OP_WRITE, 77];
        for (ticket, &code) in codes.iter().enumerate() {
            producer.post(1, 0, 1);
            let slot = producer.slot(ticket as u64);
            // SAFETY: the slot was published and not yet popped; the
            // consumer reads `op` only after `seq`, which this test (the
            // only producer, one thread) does not touch again before the pop.
            unsafe { std::ptr::addr_of_mut!((*slot).op).write_volatile(code) };
        }
        let kinds: Vec<RequestOp> = std::iter::from_fn(|| ring.try_pop())
            .map(|r| r.op)
            .collect();
        assert_eq!(
            kinds,
            [
                RequestOp::WriteNotify,
                RequestOp::Notify,
                RequestOp::Write,
                RequestOp::Unknown(77)
            ]
        );
    }

    #[test]
    fn a_full_ring_refuses_producers_until_the_consumer_pops() {
        let (_memory, ring, producer) = ring(32);
        for value in 1..=32 {
            assert!(producer.try_post(value), "slot {value} should be free");
        }
        assert!(
            !producer.try_post(33),
            "a full ring must not be overwritten"
        );
        assert_eq!(ring.try_pop().unwrap().value, 1);
        assert!(producer.try_post(33));
        assert!(!producer.try_post(34));
        let values: Vec<u32> = std::iter::from_fn(|| ring.try_pop())
            .map(|r| r.value)
            .collect();
        assert_eq!(values, (2..=33).collect::<Vec<u32>>());
    }

    #[test]
    fn requests_keep_their_order_across_many_wraparounds() {
        let (_memory, ring, producer) = ring(32);
        let mut expected = 0u64;
        for lap in 0..50u32 {
            for i in 0..23 {
                producer.post(lap, i, lap * 23 + i + 1);
            }
            while let Some(request) = ring.try_pop() {
                assert_eq!(request.ticket, expected);
                assert_eq!(request.value as u64, expected + 1);
                assert_eq!(request.local_offset, expected * 8);
                expected += 1;
            }
        }
        assert_eq!(expected, 50 * 23);
    }

    #[test]
    fn many_concurrent_producers_lose_and_duplicate_nothing() {
        const PRODUCERS: u32 = 4;
        const EACH: u32 = 20_000;
        let (_memory, ring, producer) = ring(32);
        let producer = Arc::new(producer);
        let threads: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let producer = Arc::clone(&producer);
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        producer.post(p, i, p * EACH + i + 1);
                    }
                })
            })
            .collect();
        let mut next_per_producer = [0u32; PRODUCERS as usize];
        let mut popped = 0u64;
        while popped < (PRODUCERS * EACH) as u64 {
            match ring.try_pop() {
                Some(request) => {
                    assert_eq!(request.ticket, popped, "tickets are consumed in order");
                    let p = request.target_rank as usize;
                    assert_eq!(
                        request.notification_id, next_per_producer[p],
                        "each producer's requests arrive once and in order"
                    );
                    assert_eq!(
                        request.value,
                        request.target_rank * EACH + request.notification_id + 1
                    );
                    next_per_producer[p] += 1;
                    popped += 1;
                    ring.complete_through(popped);
                }
                None => std::thread::yield_now(),
            }
        }
        for thread in threads {
            thread.join().unwrap();
        }
        assert_eq!(ring.try_pop(), None);
        assert_eq!(next_per_producer, [EACH; PRODUCERS as usize]);
        assert_eq!(producer.header().completed.load(Ordering::Acquire), popped);
    }

    #[test]
    fn inline_bytes_pop_with_their_request_and_survive_the_next_lap() {
        // Whole laps, and laps of 200 through 512 slots (the payloads go
        // round with their slots).
        for (capacity, per_lap) in [(32u32, 32u32), (512, 200)] {
            let inline_max = 256;
            let memory = Arc::new(Memory::with_payload(capacity, inline_max));
            // SAFETY: fresh memory of bytes_with_payload(capacity, 256)
            // bytes, owned by the test for longer than the ring; one consumer.
            let ring = unsafe { RequestRing::init_with_payload(memory.ptr, capacity, inline_max) }
                .unwrap();
            assert_eq!(ring.inline_max(), inline_max);
            let producer = Producer {
                memory: memory.clone(),
                head: Arc::new(AtomicU64::new(0)),
                capacity: capacity as u64,
            };
            let mut payload = Vec::new();
            let mut expected = Vec::new();
            // Three laps: every payload is written again after its first
            // request was popped.
            for lap in 0..3u32 {
                for i in 0..per_lap {
                    let size = (i as usize * 8) % (inline_max as usize + 1);
                    let bytes: Vec<u8> = (0..size)
                        .map(|b| (b as u32 ^ i ^ (lap << 5)) as u8)
                        .collect();
                    producer.post_inline(&bytes, size as u64, inline_max);
                    expected.push(bytes);
                }
                while let Some(r) = ring.try_pop_into(&mut payload) {
                    assert!(r.claims_inline());
                    let at = r.inline_at.expect("an inline request within inline_max");
                    let want = &expected[r.ticket as usize];
                    assert_eq!(r.size as usize, want.len());
                    assert_eq!(
                        &payload[at..at + want.len()],
                        &want[..],
                        "ticket {}",
                        r.ticket
                    );
                }
            }
            assert_eq!(ring.consumed(), 3 * per_lap as u64);
        }
    }

    #[test]
    fn an_inline_claim_beyond_the_payload_is_marked_for_refusal() {
        let memory = Arc::new(Memory::with_payload(32, 128));
        // SAFETY: as in the test above.
        let small = unsafe { RequestRing::init_with_payload(memory.ptr, 32, 128) }.unwrap();
        let producer = Producer {
            memory: memory.clone(),
            head: Arc::new(AtomicU64::new(0)),
            capacity: 32,
        };
        producer.post_inline(&[7; 128], 129, 128);
        let mut payload = Vec::new();
        let r = small.try_pop_into(&mut payload).unwrap();
        assert!(r.claims_inline());
        assert_eq!(r.inline_at, None, "129 bytes cannot have travelled in 128");
        assert!(payload.is_empty());
        // A ring without a payload area never hands out inline bytes.
        let (_memory, plain, producer) = ring(32);
        producer.post(1, 0, 1);
        let slot = producer.slot(0);
        // SAFETY: published and not yet popped; one producer thread.
        unsafe { std::ptr::addr_of_mut!((*slot).flags).write_volatile(FLAG_INLINE) };
        let r = plain.try_pop_into(&mut payload).unwrap();
        assert!(r.claims_inline() && r.inline_at.is_none());
    }

    #[test]
    fn bad_memory_is_refused() {
        let memory = Memory::new(64);
        // SAFETY: the memory is valid for 64 slots; only the arguments are wrong.
        unsafe {
            assert_eq!(
                RequestRing::init(memory.ptr, 48).unwrap_err(),
                RingError::BadCapacity(48)
            );
            assert_eq!(
                RequestRing::init(memory.ptr, 16).unwrap_err(),
                RingError::BadCapacity(16),
                "fewer slots than a warp has lanes"
            );
            assert!(matches!(
                RequestRing::init(memory.ptr.add(8), 32),
                Err(RingError::Misaligned(_))
            ));
            assert_eq!(
                RequestRing::init_with_payload(memory.ptr, 32, 100).unwrap_err(),
                RingError::BadInline(100),
                "a payload that is not whole lines"
            );
            assert_eq!(
                RequestRing::init_with_payload(memory.ptr, 32, RING_INLINE_LIMIT + 128)
                    .unwrap_err(),
                RingError::BadInline(RING_INLINE_LIMIT + 128)
            );
            // zeroed memory was never initialised
            assert!(matches!(
                RequestRing::from_raw(memory.ptr, 64),
                Err(RingError::BadHeader { magic: 0, .. })
            ));
            // a consumer that has gone again
            let _ = RequestRing::init(memory.ptr, 64).unwrap();
            assert!(matches!(
                RequestRing::from_raw(memory.ptr, 32),
                Err(RingError::BadHeader { capacity: 64, .. })
            ));
        }
    }
}
