//! GPU memory sent over a network transport: pinned bounce buffers made
//! once per device, and a pipeline that overlaps the device-to-host copies
//! with the wire.
//!
//! A transport between hosts (TCP today; libfabric and verbs where the
//! NIC cannot register GPU memory) sends from host memory. Before this
//! module a write from a GPU segment to a rank on another host was staged
//! through a fresh `Vec` and one synchronous copy of the whole message,
//! and only then sent: the copy and the wire took turns, and the
//! pageable buffer made the driver stage the copy once more.
//!
//! Now a write takes pinned chunks of [`CHUNK`] bytes from the device's
//! pool (a write of one chunk or less: one copy, then it is sent). Up to
//! [`DEPTH`] chunks are copied out at once on the device's
//! staging stream, each followed by a sequence number the stream writes
//! into a pinned word; the caller sends each chunk as soon as its copy is
//! done, while the next ones are still being copied (UCX's pipelined
//! protocol, NCCL's proxy). The transport sends each chunk from where it
//! lies and the chunk returns to the pool when the transport lets go of
//! it, so nothing is allocated per request once the pool is warm. The
//! notification rides on the last chunk's frame: the target applies it
//! after the data of every chunk before it (one connection, in order).
//!
//! The pool is bounded ([`POOL_MAX`] chunks per device); past that, a
//! chunk is a plain heap buffer for that one request (slower, never
//! blocking on other requests).

use crate::model::error::{Error, Result};
use crate::net::connection::Keep;
use crate::segments::LocalSegment;
use crate::transport::{RemoteSegment, Via};
use gaspi_segments::gpu::{self, GpuStream, PinnedHostMemory};
use std::collections::VecDeque;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

/// Bytes of one pipelined chunk: a 1 MiB write is four, so its copy out
/// overlaps the wire too.
pub(crate) const CHUNK: usize = 256 << 10;

/// Chunks of one write copied out ahead of the one being sent.
pub(crate) const DEPTH: usize = 8;

/// Pinned chunks a device's pool makes at most (8 MiB).
pub(crate) const POOL_MAX: usize = 32;

/// The staging of one device: its stream, its pool, its completion word.
#[derive(Debug)]
struct DeviceStaging {
    device: u32,
    stream: GpuStream,
    /// Word 0: the last sequence number the stream wrote.
    done: PinnedHostMemory,
    /// The last sequence number enqueued (under this lock, so that the
    /// numbers follow the stream's order).
    issued: Mutex<u32>,
    free: Mutex<Vec<PinnedHostMemory>>,
    made: Mutex<usize>,
}

/// A chunk lent out of a pool (back to it when dropped), or a heap buffer
/// of its own.
#[derive(Debug)]
struct Chunk {
    buffer: Buffer,
    pool: Option<Arc<DeviceStaging>>,
}

#[derive(Debug)]
enum Buffer {
    Pinned(PinnedHostMemory),
    Heap(Vec<u8>),
    Returned,
}

impl Chunk {
    fn ptr(&self) -> *mut u8 {
        match &self.buffer {
            Buffer::Pinned(p) => p.host_ptr(),
            Buffer::Heap(v) => v.as_ptr() as *mut u8,
            Buffer::Returned => std::ptr::null_mut(),
        }
    }
}

impl Drop for Chunk {
    fn drop(&mut self) {
        if let (Buffer::Pinned(_), Some(pool)) = (&self.buffer, &self.pool) {
            if let Buffer::Pinned(p) = std::mem::replace(&mut self.buffer, Buffer::Returned) {
                pool.free.lock().unwrap_or_else(|e| e.into_inner()).push(p);
            }
        }
    }
}

// SAFETY: the chunk's memory is owned by it (a pinned allocation, valid
// from any thread, or a Vec); a transport holding it as `Keep` only reads
// it, and the staging stream writes it only before the sequence number
// the owner waits for, before the chunk is shared.
unsafe impl Sync for Chunk {}

impl DeviceStaging {
    fn new(device: u32) -> Result<DeviceStaging> {
        Ok(DeviceStaging {
            device,
            stream: GpuStream::new(device)?,
            done: PinnedHostMemory::alloc(device, 64)?,
            issued: Mutex::new(0),
            free: Mutex::new(Vec::new()),
            made: Mutex::new(0),
        })
    }

    /// A chunk of the pool, made if the pool may grow, else from the heap.
    fn take(self: &Arc<Self>) -> Result<Chunk> {
        if let Some(p) = self.free.lock().unwrap_or_else(|e| e.into_inner()).pop() {
            return Ok(Chunk {
                buffer: Buffer::Pinned(p),
                pool: Some(self.clone()),
            });
        }
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if *made < POOL_MAX {
            let p = PinnedHostMemory::alloc(self.device, CHUNK)?;
            *made += 1;
            return Ok(Chunk {
                buffer: Buffer::Pinned(p),
                pool: Some(self.clone()),
            });
        }
        drop(made);
        tracing::debug!(
            device = self.device,
            "GPU staging pool exhausted: a heap chunk"
        );
        Ok(Chunk {
            buffer: Buffer::Heap(vec![0u8; CHUNK]),
            pool: None,
        })
    }

    /// Enqueues the copy of `len` bytes from device address `src` into
    /// `chunk`; returns the sequence number the stream writes after it.
    fn copy_out(&self, chunk: &Chunk, src: gpu::DevicePtr, len: usize) -> Result<u32> {
        let mut issued = self.issued.lock().unwrap_or_else(|e| e.into_inner());
        // SAFETY: the chunk holds at least CHUNK >= len writable bytes and
        // is not read before the sequence number below is written (the
        // caller waits for it); `src..src + len` lies in the caller's
        // checked range of a GPU segment it keeps alive until then.
        unsafe { gpu::copy_device_to_host(&self.stream, chunk.ptr(), src, len)? };
        let seq = issued.wrapping_add(1);
        // SAFETY: `done` is pinned, device-mapped and 4-aligned, owned by
        // self, which the pool's Arc keeps alive past the stream's work.
        unsafe { gpu::stream_write_u32(&self.stream, self.done.device_ptr(), seq)? };
        *issued = seq;
        Ok(seq)
    }

    /// Waits until the stream wrote `seq` (spins, then yields); an error
    /// of the stream instead of a hang.
    fn wait(&self, seq: u32) -> Result<()> {
        let word = &self.done.as_atomic_u32s()[0];
        let mut spins = 0u32;
        loop {
            let done = word.load(Ordering::Acquire);
            if (done.wrapping_sub(seq) as i32) >= 0 {
                return Ok(());
            }
            spins = spins.wrapping_add(1);
            if spins.is_multiple_of(256) {
                if gpu::is_idle(&self.stream)? {
                    let done = word.load(Ordering::Acquire);
                    if (done.wrapping_sub(seq) as i32) >= 0 {
                        return Ok(());
                    }
                    return Err(Error::Protocol(format!(
                        "GPU {}: the staging stream is idle before copy {seq} finished",
                        self.device
                    )));
                }
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
        }
    }
}

impl Drop for DeviceStaging {
    fn drop(&mut self) {
        // The pool's chunks are freed after this: no copy may still write
        // into one.
        if let Err(e) = gpu::synchronize(&self.stream) {
            tracing::warn!("staging stream of GPU {}: {e}", self.device);
        }
    }
}

/// The staging pools of a rank's devices (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct NetworkStaging {
    devices: Mutex<Vec<Arc<DeviceStaging>>>,
}

impl NetworkStaging {
    fn device(&self, device: u32) -> Result<Arc<DeviceStaging>> {
        let mut devices = self.devices.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(d) = devices.iter().find(|d| d.device == device) {
            return Ok(d.clone());
        }
        let d = Arc::new(DeviceStaging::new(device)?);
        devices.push(d.clone());
        Ok(d)
    }

    /// Writes `size` bytes at `local_offset` of GPU segment `local` to
    /// `remote_offset` of `r` (a segment reached over a network
    /// transport), then notification `notify`: chunk by chunk, each sent
    /// once copied out while the next ones are copied (see the module
    /// docs). Ranges checked by the caller. Returns once every chunk is
    /// handed to the transport; on an error (a dead peer, named by the
    /// transport) the chunks still in flight return to the pool once the
    /// stream is done with them.
    #[allow(clippy::too_many_arguments)]
    pub fn put(
        &self,
        local: &LocalSegment,
        local_offset: u64,
        r: &dyn RemoteSegment,
        remote_offset: u64,
        size: u64,
        notify: Option<(u32, u32)>,
        via: Via<'_>,
    ) -> Result<()> {
        self.stage(local, local_offset, remote_offset, size, notify)?
            .send(r, via)
    }

    /// Phase one of [`Self::put`] for a server of many requests (the ring):
    /// the first [`DEPTH`] chunks of the write are copied out now and the
    /// call returns at once; [`StagedPut::send`] waits for them, sends
    /// them and the rest. Ranges checked by the caller.
    pub fn stage(
        &self,
        local: &LocalSegment,
        local_offset: u64,
        remote_offset: u64,
        size: u64,
        notify: Option<(u32, u32)>,
    ) -> Result<StagedPut> {
        let size = usize::try_from(size)
            .map_err(|_| Error::Protocol(format!("a write of {size} bytes")))?;
        let device = local
            .device()
            .ok_or_else(|| Error::Protocol(format!("{} is not in GPU memory", local.id)))?;
        let src = local.gpu_address(local_offset, size)?;
        let mut staged = StagedPut {
            staging: self.device(device)?,
            src,
            size,
            remote_offset,
            notify,
            in_flight: VecDeque::new(),
            next: 0,
        };
        if let Err(e) = staged.fill() {
            // Copies already enqueued write chunks going back to the
            // pool: let them end first.
            let _ = gpu::synchronize(&staged.staging.stream);
            return Err(e);
        }
        Ok(staged)
    }
}

/// A write from GPU memory whose first chunks are being copied out
/// ([`NetworkStaging::stage`]); [`Self::send`] finishes it.
#[derive(Debug)]
pub(crate) struct StagedPut {
    staging: Arc<DeviceStaging>,
    src: gpu::DevicePtr,
    size: usize,
    remote_offset: u64,
    notify: Option<(u32, u32)>,
    /// (sequence number, chunk, first byte, length)
    in_flight: VecDeque<(u32, Chunk, usize, usize)>,
    /// Chunks enqueued so far.
    next: usize,
}

impl StagedPut {
    /// Enqueues chunk copies until [`DEPTH`] are in flight or none is left.
    fn fill(&mut self) -> Result<()> {
        let chunks = self.size.div_ceil(CHUNK);
        while self.in_flight.len() < DEPTH && self.next < chunks {
            let at = self.next * CHUNK;
            let len = CHUNK.min(self.size - at);
            let chunk = self.staging.take()?;
            let seq = self.staging.copy_out(&chunk, self.src + at as u64, len)?;
            self.in_flight.push_back((seq, chunk, at, len));
            self.next += 1;
        }
        Ok(())
    }

    /// Sends the write to `r` (a segment reached over a network
    /// transport), chunk by chunk as each is copied out, the notification
    /// on the last; on an error the copies in flight end before it
    /// returns.
    pub fn send(mut self, r: &dyn RemoteSegment, via: Via<'_>) -> Result<()> {
        if self.size == 0 {
            // No chunk: the notification alone (a write of no bytes).
            return r.put_notify(self.remote_offset, std::ptr::null(), 0, self.notify, via);
        }
        let sent = self.send_rest(r, via);
        if sent.is_err() {
            let _ = gpu::synchronize(&self.staging.stream);
        }
        sent
    }

    fn send_rest(&mut self, r: &dyn RemoteSegment, via: Via<'_>) -> Result<()> {
        while let Some((seq, chunk, at, len)) = self.in_flight.pop_front() {
            self.staging.wait(seq)?;
            // The next copies run while this chunk goes out.
            self.fill()?;
            let last = at + len == self.size;
            let ptr = chunk.ptr();
            let keep: Keep = Arc::new(chunk);
            r.put_notify_lent(
                self.remote_offset + at as u64,
                ptr,
                len,
                self.notify.filter(|_| last),
                via,
                &keep,
            )?;
        }
        Ok(())
    }
}
