//! The context a kernel receives: what the device-side GASPI calls need to
//! know, as plain `#[repr(C)]` data passed to the kernel by value.
//!
//! The kernel argument (1,216 bytes) points to the per-segment tables in
//! device memory, filled by the runtime when it builds the context, and
//! carries copies of the first few entries inline ([`INLINE_SEGMENTS`] of
//! [`INLINE_RANKS`] ranks): a kernel that declares it `__grid_constant__`
//! reads those from the constant bank, which fences and acquires leave
//! alone, so a write_notify right after a wait does not first go to L2 for
//! its descriptors (decision 0053). Both are a snapshot: a segment created
//! or a peer mapped later needs a new context (a new launch).
//!
//! `cuda/gaspi_device.cuh` declares the same structs (`gaspi_segment_desc`,
//! `gaspi_device_ctx`) and checks their layout with `static_assert`; the
//! `const` assertions below check this side.

/// Where one segment's bytes and notification words are, as seen from the
/// GPU running the kernel. 32 bytes.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SegmentDesc {
    /// Device-visible address of the segment's first byte; 0 when the GPU
    /// cannot store into it directly (then requests go through the ring).
    pub data: u64,
    /// Segment size in bytes (known even when `data` is 0, for checks).
    pub size: u64,
    /// Device-visible address of notification word 0; 0 when not directly
    /// reachable.
    pub notifications: u64,
    /// Number of notification words; 0 marks "no such segment".
    pub notification_count: u32,
    /// [`SEGMENT_RING_INLINE`] or 0.
    pub flags: u32,
}

/// Bit of [`SegmentDesc::flags`] (`GASPI_SEGMENT_RING_INLINE`): ring
/// requests to this segment cross a network transport, so a write of at
/// most [`DeviceCtx::ring_inline_max`] bytes may carry its bytes in the
/// ring (the CPU sends them from pinned memory, no copy out of the GPU;
/// decision 0093).
pub const SEGMENT_RING_INLINE: u32 = 1;

impl SegmentDesc {
    /// The same descriptor with `flags` set.
    pub const fn with_flags(self, flags: u32) -> SegmentDesc {
        SegmentDesc { flags, ..self }
    }

    /// A segment the device knows the shape of but cannot reach directly:
    /// `write_notify`/`notify` to it go through the request ring.
    pub const fn via_ring(size: u64, notification_count: u32) -> SegmentDesc {
        SegmentDesc {
            data: 0,
            size,
            notifications: 0,
            notification_count,
            flags: 0,
        }
    }

    /// A segment the device can store into directly.
    pub const fn direct(
        data: u64,
        size: u64,
        notifications: u64,
        notification_count: u32,
    ) -> SegmentDesc {
        SegmentDesc {
            data,
            size,
            notifications,
            notification_count,
            flags: 0,
        }
    }
}

/// Segment ids `0..INLINE_SEGMENTS` have their descriptors also inline in
/// [`DeviceCtx`] (`GASPI_INLINE_SEGMENTS`).
pub const INLINE_SEGMENTS: usize = 4;
/// Ranks `0..INLINE_RANKS` have their first [`INLINE_SEGMENTS`] remote
/// descriptors inline in [`DeviceCtx`] (`GASPI_INLINE_RANKS`).
pub const INLINE_RANKS: usize = 8;

/// The kernel argument `gaspi_device_ctx`. 1,216 bytes, passed by value
/// (declared `const __grid_constant__` by the kernel).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DeviceCtx {
    /// This rank.
    pub rank: u32,
    /// Number of ranks (rows of the `remote` table).
    pub nranks: u32,
    /// Segment ids `0..nsegments` have table entries.
    pub nsegments: u32,
    /// Slots of the request ring (a power of two), 0 when there is none.
    pub ring_capacity: u32,
    /// Device address of `[SegmentDesc; nsegments]`: this rank's segments,
    /// indexed by segment id (data and notification words local to the
    /// kernel: where `notify_waitsome` polls).
    pub local: u64,
    /// Device address of `[SegmentDesc; nranks * nsegments]`, entry
    /// `rank * nsegments + segment`: where `write_notify` to (rank, segment)
    /// goes. This rank's own row repeats `local`.
    pub remote: u64,
    /// Device address of the request ring (host-mapped [`RingHeader`]
    /// followed by the slots); 0 when there is none.
    ///
    /// [`RingHeader`]: crate::ring::RingHeader
    pub ring: u64,
    /// Device address of the [`RingProducer`] counter (device memory,
    /// zeroed); 0 when there is no ring.
    ///
    /// [`RingProducer`]: crate::ring::RingProducer
    pub ring_producer: u64,
    /// Copies of `local`'s entries `0..INLINE_SEGMENTS` (zero beyond
    /// `nsegments`: the device's write calls refuse such an id by its zero
    /// entry, without comparing it with `nsegments`).
    pub inline_local: [SegmentDesc; INLINE_SEGMENTS],
    /// Copies of `remote`'s entries for ranks `0..INLINE_RANKS` and
    /// segments `0..INLINE_SEGMENTS`, at `rank * INLINE_SEGMENTS +
    /// segment` (zero where the tables have none, which likewise refuses
    /// a rank beyond `nranks`).
    pub inline_remote: [SegmentDesc; INLINE_RANKS * INLINE_SEGMENTS],
    /// Device address of the ring's payload area (host-mapped, after the
    /// slots: one payload of `ring_inline_max` bytes per slot); 0 when the
    /// ring carries no bytes.
    pub ring_payload: u64,
    /// Bytes of each payload: the largest write to a
    /// [`SEGMENT_RING_INLINE`] segment that travels in the ring; 0: none.
    pub ring_inline_max: u32,
    /// Zero.
    pub reserved: u32,
}

impl DeviceCtx {
    /// Fills the inline copies from the tables as uploaded: `tables` holds
    /// `nsegments` local descriptors, then `nranks` rows of `nsegments`
    /// remote ones (what `local` and `remote` point to).
    ///
    /// ```
    /// use gaspi_gpu_kernels::{DeviceCtx, SegmentDesc, INLINE_SEGMENTS};
    /// let tables: Vec<SegmentDesc> = (0..3 * 5).map(|i| SegmentDesc::via_ring(i, 1)).collect();
    /// let mut ctx = DeviceCtx { nranks: 2, nsegments: 5, ..DeviceCtx::default() };
    /// ctx.fill_inline(&tables);
    /// assert_eq!(ctx.inline_local[3].size, 3);
    /// assert_eq!(ctx.inline_remote[INLINE_SEGMENTS + 2].size, 5 + 5 + 2); // rank 1, segment 2
    /// assert_eq!(ctx.inline_remote[2 * INLINE_SEGMENTS], SegmentDesc::default()); // no rank 2
    /// ```
    pub fn fill_inline(&mut self, tables: &[SegmentDesc]) {
        let nseg = self.nsegments as usize;
        let segs = nseg.min(INLINE_SEGMENTS);
        self.inline_local = [SegmentDesc::default(); INLINE_SEGMENTS];
        self.inline_remote = [SegmentDesc::default(); INLINE_RANKS * INLINE_SEGMENTS];
        for seg in 0..segs {
            if let Some(d) = tables.get(seg) {
                self.inline_local[seg] = *d;
            }
        }
        for rank in 0..(self.nranks as usize).min(INLINE_RANKS) {
            for seg in 0..segs {
                if let Some(d) = tables.get((1 + rank) * nseg + seg) {
                    self.inline_remote[rank * INLINE_SEGMENTS + seg] = *d;
                }
            }
        }
    }
}

const _: () = {
    assert!(std::mem::size_of::<SegmentDesc>() == 32);
    assert!(std::mem::offset_of!(SegmentDesc, size) == 8);
    assert!(std::mem::offset_of!(SegmentDesc, notifications) == 16);
    assert!(std::mem::offset_of!(SegmentDesc, notification_count) == 24);
    assert!(std::mem::size_of::<DeviceCtx>() == 1216);
    assert!(std::mem::offset_of!(DeviceCtx, ring_payload) == 1200);
    assert!(std::mem::offset_of!(DeviceCtx, ring_inline_max) == 1208);
    assert!(std::mem::offset_of!(DeviceCtx, inline_local) == 48);
    assert!(std::mem::offset_of!(DeviceCtx, inline_remote) == 176);
    assert!(std::mem::offset_of!(DeviceCtx, local) == 16);
    assert!(std::mem::offset_of!(DeviceCtx, remote) == 24);
    assert!(std::mem::offset_of!(DeviceCtx, ring) == 32);
    assert!(std::mem::offset_of!(DeviceCtx, ring_producer) == 40);
};

// SAFETY: DeviceCtx is `#[repr(C)]` plain data (integers only) whose layout
// matches `gaspi_device_ctx` in gaspi_device.cuh (asserted on both sides),
// so passing a pointer to it as a kernel parameter copies exactly the
// struct the kernel declares.
unsafe impl cudarc::driver::DeviceRepr for DeviceCtx {}

/// The value that stops the example kernels (`echo`, `matvec_persistent`)
/// when stored into the notification word they wait on.
pub const STOP_VALUE: u32 = 0xffff_ffff;
