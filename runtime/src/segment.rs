//! Segments as the runtime sees them: the local ones it owns, the remote ones
//! peers registered with it, and the descriptor that travels between them.
//!
//! A local segment is data plus a notification area. For host segments both
//! live in one memfd, data first, the notification area on the next page, so
//! a peer maps a single file. Memory the user bound (`segment_bind`) cannot
//! be mapped by peers; its notification area still lives in a memfd of its
//! own, and peers copy data with cross-memory attach.

use crate::error::{Error, Result, Side};
use crate::types::{Rank, SegId};
use bytemuck::Pod;
use gaspi_notify::{NotificationArea, WakeMode};
use gaspi_segments::{MemoryDescriptor, ProcessMemory, SharedMemory};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// What a peer needs to reach a segment: its data and its notifications.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SegmentDescriptor {
    /// Bytes of data.
    pub size: u64,
    /// Where the data lives.
    pub data: MemoryDescriptor,
    /// Offset of the data within `data`.
    pub data_offset: u64,
    /// Where the notification area lives.
    pub notifications: MemoryDescriptor,
    /// Offset of the notification area within `notifications`.
    pub notifications_offset: u64,
    /// Number of notification words.
    pub notification_count: u32,
}

const PAGE: usize = 4096;

fn round_up(n: usize, to: usize) -> usize {
    n.div_ceil(to) * to
}

/// What keeps a local segment's memory alive (never read: held for Drop).
#[derive(Debug)]
#[allow(dead_code)]
enum Storage {
    /// Data and notifications in one memfd.
    Shared(SharedMemory),
    /// User memory; notifications in their own memfd; the buffer itself when
    /// the runtime owns it (`segment_bind_buffer`).
    Bound(SharedMemory, Option<Box<[u8]>>),
}

/// A segment this rank owns.
#[derive(Debug)]
pub(crate) struct LocalSegment {
    pub id: SegId,
    pub size: usize,
    data: *mut u8,
    pub notifications: NotificationArea,
    pub descriptor: SegmentDescriptor,
    _storage: Storage,
}

// SAFETY: the raw data pointer refers to memory owned by `_storage` (or to
// user memory the user promised to keep alive, `segment_bind`'s contract);
// it is only used for copies whose ranges are bounds-checked, and concurrent
// access to segment memory by several threads and processes is the nature of
// a PGAS segment (synchronised by notifications, as in C).
unsafe impl Send for LocalSegment {}
// SAFETY: see Send; no interior state other than the shared memory itself.
unsafe impl Sync for LocalSegment {}

impl LocalSegment {
    /// Allocates a host segment of `size` bytes with `notification_count` words.
    pub fn alloc_host(
        id: SegId,
        size: usize,
        notification_count: u32,
        spin: std::time::Duration,
    ) -> Result<LocalSegment> {
        if size == 0 {
            return Err(Error::ZeroSize { what: "a segment" });
        }
        let notif_at = round_up(size, PAGE);
        let total = notif_at + NotificationArea::bytes_for(notification_count);
        let shm = SharedMemory::create(&format!("seg{}", id.0), total)?;
        let desc = shm.descriptor();
        // SAFETY: notif_at + bytes_for(count) == total, the mapping's length,
        // and notif_at is page-aligned; the mapping lives in `_storage` as
        // long as the area.
        let mut notifications = unsafe {
            NotificationArea::from_raw(
                shm.as_ptr().add(notif_at),
                notification_count,
                WakeMode::Futex,
            )
        };
        notifications.set_spin(spin);
        Ok(LocalSegment {
            id,
            size,
            data: shm.as_ptr(),
            notifications,
            descriptor: SegmentDescriptor {
                size: size as u64,
                data: desc.clone(),
                data_offset: 0,
                notifications: desc,
                notifications_offset: notif_at as u64,
                notification_count,
            },
            _storage: Storage::Shared(shm),
        })
    }

    /// Wraps user memory as a segment.
    ///
    /// # Safety
    /// `data` must be valid for reads and writes of `size` bytes for as long
    /// as the segment (and any handle to it) exists, and must not be freed or
    /// moved meanwhile: peers write into it at any time.
    pub unsafe fn bind(
        id: SegId,
        data: *mut u8,
        size: usize,
        owned: Option<Box<[u8]>>,
        notification_count: u32,
        spin: std::time::Duration,
    ) -> Result<LocalSegment> {
        if size == 0 {
            return Err(Error::ZeroSize { what: "a segment" });
        }
        let shm = SharedMemory::create(
            &format!("seg{}-notify", id.0),
            NotificationArea::bytes_for(notification_count),
        )?;
        // SAFETY: the memfd holds exactly bytes_for(count) bytes and is kept
        // in `_storage` for as long as the area exists.
        let mut notifications = unsafe {
            NotificationArea::from_raw(shm.as_ptr(), notification_count, WakeMode::Futex)
        };
        notifications.set_spin(spin);
        Ok(LocalSegment {
            id,
            size,
            data,
            notifications,
            descriptor: SegmentDescriptor {
                size: size as u64,
                data: ProcessMemory::describe_own(data, size),
                data_offset: 0,
                notifications: shm.descriptor(),
                notifications_offset: 0,
                notification_count,
            },
            _storage: Storage::Bound(shm, owned),
        })
    }

    /// Start of the data.
    pub fn data(&self) -> *mut u8 {
        self.data
    }

    /// Checks that `offset..offset+len` lies in the data.
    pub fn check(&self, side: Side, rank: Rank, offset: u64, len: u64) -> Result<()> {
        check_bounds(side, rank, self.id, offset, len, self.size as u64)
    }
}

/// Checks `offset..offset+len` against a segment of `seg_size` bytes.
pub(crate) fn check_bounds(
    side: Side,
    rank: Rank,
    seg: SegId,
    offset: u64,
    len: u64,
    seg_size: u64,
) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= seg_size => Ok(()),
        _ => Err(Error::OutOfBounds {
            side,
            rank,
            seg,
            offset,
            end: offset.saturating_add(len),
            seg_size,
        }),
    }
}

/// A handle to a segment of this rank.
///
/// The memory stays valid while a handle exists, even after
/// `segment_delete`: deleting unregisters the id, dropping the last handle
/// frees the memory.
///
/// Peers write into a segment at any time, so the safe accessors copy
/// (`read`, `write`); references into the memory are `unsafe` and valid
/// only while the program's own synchronisation (notifications) rules out
/// concurrent writers.
#[derive(Debug, Clone)]
pub struct Segment {
    pub(crate) inner: Arc<LocalSegment>,
    pub(crate) rank: Rank,
}

impl Segment {
    /// The segment's id.
    pub fn id(&self) -> SegId {
        self.inner.id
    }

    /// Size in bytes.
    pub fn size(&self) -> usize {
        self.inner.size
    }

    /// Start of the segment's memory.
    pub fn as_ptr(&self) -> *mut u8 {
        self.inner.data()
    }

    fn check_typed<T>(&self, offset: usize, count: usize) -> Result<()> {
        let bytes = (count as u64).saturating_mul(std::mem::size_of::<T>() as u64);
        self.inner
            .check(Side::Local, self.rank, offset as u64, bytes)
    }

    /// Copies `values` into the segment at byte `offset`.
    ///
    /// ```no_run
    /// # fn f(seg: &gaspi::Segment) -> gaspi::Result<()> {
    /// seg.write(0, &[1.0f64, 2.0, 3.0])?;
    /// # Ok(()) }
    /// ```
    pub fn write<T: Pod>(&self, offset: usize, values: &[T]) -> Result<()> {
        self.check_typed::<T>(offset, values.len())?;
        let bytes: &[u8] = bytemuck::cast_slice(values);
        // SAFETY: the range was checked against the segment's size, and the
        // memory is valid while `self.inner` lives. The two cannot overlap:
        // a Rust slice into the segment only comes from the `unsafe`
        // `as_slice`, whose contract rules out writing while it lives.
        unsafe {
            std::ptr::copy_nonoverlapping(bytes.as_ptr(), self.as_ptr().add(offset), bytes.len());
        }
        Ok(())
    }

    /// Copies from the segment at byte `offset` into `out`.
    pub fn read<T: Pod>(&self, offset: usize, out: &mut [T]) -> Result<()> {
        self.check_typed::<T>(offset, out.len())?;
        let bytes: &mut [u8] = bytemuck::cast_slice_mut(out);
        // SAFETY: as in `write`, with the roles of the two buffers swapped.
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.as_ptr().add(offset),
                bytes.as_mut_ptr(),
                bytes.len(),
            );
        }
        Ok(())
    }

    /// Reads `count` values starting at byte `offset` into a new vector.
    pub fn read_vec<T: Pod>(&self, offset: usize, count: usize) -> Result<Vec<T>> {
        let mut v = vec![T::zeroed(); count];
        self.read(offset, &mut v)?;
        Ok(v)
    }

    /// The whole segment as a byte slice.
    ///
    /// # Safety
    /// No peer (and no other thread) may write into the segment while the
    /// slice is alive: the program's notifications must guarantee it.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: valid memory of `size` bytes (handle keeps it alive);
        // absence of concurrent writers is the caller's promise.
        unsafe { std::slice::from_raw_parts(self.as_ptr(), self.size()) }
    }

    /// The whole segment as a mutable byte slice.
    ///
    /// # Safety
    /// As for [`Segment::as_slice`], and no other reference into the
    /// segment may exist while this one lives.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [u8] {
        // SAFETY: as for as_slice, plus exclusivity promised by the caller.
        unsafe { std::slice::from_raw_parts_mut(self.as_ptr(), self.size()) }
    }
}
