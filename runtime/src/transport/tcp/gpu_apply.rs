//! Peers' requests into this rank's GPU segments, applied on a stream so
//! that the progress engine never waits for a copy.
//!
//! The CPU cannot store into GPU memory. Before this module the TCP target
//! applied a peer's write into a GPU segment with a synchronous copy (and
//! its notification with another), so the engine stood still for every
//! copy and nothing overlapped the wire. Now each request is *enqueued*:
//!
//! - its bytes go into a ring of pinned host memory made once per device
//!   (so the copy engine reads them straight, no driver staging), the copy
//!   to the segment is queued on this rank's *apply stream* of that
//!   device, and the notification after it is a `cuStreamWriteValue32` on
//!   the same stream: the GPU writes the word after the data, whether a
//!   kernel or a CPU thread polls it (GPUDirect Async's building block);
//! - a large write is read from the socket into the ring and handed to the
//!   copy engine every [`PIPELINE_CHUNK`] bytes while the rest is still on
//!   the wire (`serve::DirectPut`): the wire, the host-to-device copy and
//!   the next chunk's arrival overlap, as in UCX's pipelined rendezvous;
//! - a read of a GPU segment is a device-to-host copy into the ring on the
//!   same stream (so it follows every write before it), answered once the
//!   stream has run it; the data of this rank's own reads coming back into
//!   a GPU segment takes the same way in.
//!
//! After each request the stream writes its sequence number into a pinned
//! completion word. Whoever reads connections (the engine, or a waiting
//! thread) calls [`GpuApply::complete`], one load when nothing is in
//! flight, which answers the requests the stream has finished (the
//! `Settled` a sender's `wait` counts, a read's data) and wakes CPU
//! waiters of the words the stream set. Requests stay answered after they
//! are applied, as before: after `wait` and a barrier, a target sees the
//! data.
//!
//! Order: everything a peer sends into a GPU segment of one device goes
//! through that device's stream once anything is in flight there (a
//! notification alone too, a fence's local notification, a read), and
//! whatever still takes a synchronous path (atomics, a request larger
//! than the ring) first waits for the stream ([`GpuApply::drain`]).

use crate::model::error::{Error, Result};
use crate::model::ids::Rank;
use crate::segments::LocalSegment;
use gaspi_segments::gpu::{self, DevicePtr, GpuStream, PinnedHostMemory};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

/// Pinned staging per device for peers' requests into GPU segments: eight
/// of the largest pieces a `Put` carries (`super::PIECE`).
pub(crate) const STAGING_BYTES: usize = 8 * super::PIECE;

/// Bytes of a large write read from the socket before they are handed to
/// the copy engine (the rest keeps arriving meanwhile).
pub(crate) const PIPELINE_CHUNK: usize = 256 << 10;

/// Largest write applied as stream memory operations (its data written as
/// 4-byte values by the stream, then its notification and completion word,
/// in one driver call) instead of a copy: 4-byte aligned and a multiple of
/// 4 bytes long.
pub(crate) const VALUES_MAX: usize = 64;

/// Whether a write of `len` bytes to device address `dst` is applied as
/// stream values ([`VALUES_MAX`]).
fn as_values(dst: DevicePtr, len: usize) -> bool {
    len != 0 && len <= VALUES_MAX && len.is_multiple_of(4) && dst.is_multiple_of(4)
}

/// What to do once the stream has run a request.
#[derive(Debug)]
pub(crate) enum Then {
    /// Answer `from`'s request posted on `queue` (if any); `wake`: the
    /// request set a notification word, whose CPU waiters are woken.
    Settle {
        from: Rank,
        queue: Option<u8>,
        wake: bool,
    },
    /// Answer `from`'s `Get` `token` with the `len` bytes staged at `at`.
    Reply {
        from: Rank,
        token: u64,
        at: usize,
        len: usize,
    },
    /// One of this rank's own reads landed (settles one request of `queue`
    /// to `owner`); with `notify`, the local notification of a
    /// `read_notify`, set once every read before it landed.
    Local {
        owner: Rank,
        queue: Option<u32>,
        notify: Option<(u32, u32)>,
    },
    /// Nothing (a direct read given up: its staging is released).
    Nothing,
}

/// A finished request, acted on outside the lock.
#[derive(Debug)]
pub(crate) struct Finished {
    pub segment: Arc<LocalSegment>,
    pub then: Then,
    /// For [`Then::Reply`]: the staged bytes, copied out.
    pub data: Option<Vec<u8>>,
}

#[derive(Debug)]
struct Pending {
    seq: u32,
    ticket: Option<u64>,
    /// Kept alive (mapped, allocated) until the stream is done with it.
    segment: Arc<LocalSegment>,
    then: Then,
}

/// The pinned ring: reservations are released in the order they were
/// made once their requests completed.
#[derive(Debug, Default)]
struct Ring {
    head: usize,
    next_ticket: u64,
    /// (ticket, start, len, released)
    held: VecDeque<(u64, usize, usize, bool)>,
}

impl Ring {
    fn reserve(&mut self, cap: usize, len: usize) -> Option<(u64, usize)> {
        if len == 0 || len > cap {
            return None;
        }
        let start = match self.held.front() {
            None => 0,
            Some(&(_, tail, _, _)) => {
                if self.head > tail {
                    if cap - self.head >= len {
                        self.head
                    } else if tail >= len {
                        0
                    } else {
                        return None;
                    }
                } else if self.head < tail && tail - self.head >= len {
                    self.head
                } else {
                    // head == tail with reservations held: full.
                    return None;
                }
            }
        };
        let ticket = self.next_ticket;
        self.next_ticket += 1;
        self.head = start + len;
        self.held.push_back((ticket, start, len, false));
        Some((ticket, start))
    }

    fn release(&mut self, ticket: u64) {
        if let Some(h) = self.held.iter_mut().find(|h| h.0 == ticket) {
            h.3 = true;
        }
        while self.held.front().is_some_and(|h| h.3) {
            self.held.pop_front();
        }
        if self.held.is_empty() {
            self.head = 0;
        }
    }
}

/// The apply stream of one device and what it has in flight.
#[derive(Debug)]
struct DeviceApply {
    device: u32,
    stream: GpuStream,
    staging: PinnedHostMemory,
    /// Word 0: the last sequence number the stream wrote.
    done: PinnedHostMemory,
    issued: u32,
    ring: Ring,
    pending: VecDeque<Pending>,
}

impl DeviceApply {
    fn new(device: u32) -> Result<DeviceApply> {
        let stream = GpuStream::new(device)?;
        let staging = PinnedHostMemory::alloc(device, STAGING_BYTES)?;
        let done = PinnedHostMemory::alloc(device, 64)?;
        tracing::debug!(
            device,
            bytes = STAGING_BYTES,
            "pinned staging for peers' requests into GPU segments"
        );
        Ok(DeviceApply {
            device,
            stream,
            staging,
            done,
            issued: 0,
            ring: Ring::default(),
            pending: VecDeque::new(),
        })
    }

    fn done_seq(&self) -> u32 {
        self.done.as_atomic_u32s()[0].load(Ordering::Acquire)
    }

    /// A small aligned write ([`as_values`]) applied as values: the data,
    /// the notification and the completion word in one batch of stream
    /// writes.
    fn put_values(
        &mut self,
        seg: &Arc<LocalSegment>,
        dst: DevicePtr,
        data: &[u8],
        notify: Option<(u32, u32)>,
        then: Then,
        in_flight: &AtomicUsize,
    ) -> Result<()> {
        debug_assert!(as_values(dst, data.len()));
        // On the stack: this is the path of every small write.
        let mut writes = [(0 as DevicePtr, 0u32); VALUES_MAX / 4 + 2];
        let mut n = 0;
        for (i, w) in data.chunks_exact(4).enumerate() {
            writes[n] = (
                dst + 4 * i as u64,
                u32::from_ne_bytes([w[0], w[1], w[2], w[3]]),
            );
            n += 1;
        }
        if let Some((id, value)) = notify {
            writes[n] = (self.word(seg, id)?, value);
            n += 1;
        }
        let seq = self.issued.wrapping_add(1);
        writes[n] = (self.done.device_ptr(), seq);
        n += 1;
        // SAFETY: the data addresses lie in the segment (checked by the
        // caller, 4-aligned), the word in its notification area, `done`
        // is ours; the pending entry keeps the segment alive until the
        // stream ran them.
        unsafe { gpu::stream_write_u32_batch(&self.stream, &writes[..n])? };
        self.issued_as(seq, seg, None, then, in_flight);
        Ok(())
    }

    /// Ends what was enqueued so far with a sequence number; `then` runs
    /// once the stream wrote it.
    fn seal(
        &mut self,
        segment: &Arc<LocalSegment>,
        ticket: Option<u64>,
        then: Then,
        in_flight: &AtomicUsize,
    ) -> Result<()> {
        let seq = self.issued.wrapping_add(1);
        // SAFETY: `done` is pinned, device-mapped and 4-aligned, owned by
        // self, which outlives the stream's work (drop synchronises).
        unsafe { gpu::stream_write_u32(&self.stream, self.done.device_ptr(), seq)? };
        self.issued_as(seq, segment, ticket, then, in_flight);
        Ok(())
    }

    /// Records that the stream will write `seq` after the request, which
    /// `then` acts on once it has.
    fn issued_as(
        &mut self,
        seq: u32,
        segment: &Arc<LocalSegment>,
        ticket: Option<u64>,
        then: Then,
        in_flight: &AtomicUsize,
    ) {
        self.issued = seq;
        self.pending.push_back(Pending {
            seq,
            ticket,
            segment: segment.clone(),
            then,
        });
        in_flight.fetch_add(1, Ordering::AcqRel);
    }

    /// Takes the requests the stream has finished.
    fn take_finished(&mut self, out: &mut Vec<Finished>, in_flight: &AtomicUsize) {
        let done = self.done_seq();
        while let Some(p) = self.pending.front() {
            if (done.wrapping_sub(p.seq) as i32) < 0 {
                break;
            }
            let p = self.pending.pop_front().expect("front exists");
            let data = match p.then {
                Then::Reply { at, len, .. } => {
                    let mut v = vec![0u8; len];
                    // SAFETY: at + len lies in the staging ring (reserved
                    // for this request), which the stream finished writing
                    // (its sequence number is past).
                    unsafe {
                        std::ptr::copy_nonoverlapping(
                            self.staging.host_ptr().add(at),
                            v.as_mut_ptr(),
                            len,
                        )
                    };
                    Some(v)
                }
                _ => None,
            };
            if let Some(t) = p.ticket {
                self.ring.release(t);
            }
            in_flight.fetch_sub(1, Ordering::AcqRel);
            out.push(Finished {
                segment: p.segment,
                then: p.then,
                data,
            });
        }
    }

    /// Enqueues the write of notification `id` of `seg` to `value`, after
    /// everything enqueued before it (id checked by the caller).
    fn write_word(&self, seg: &LocalSegment, id: u32, value: u32) -> Result<()> {
        let word = self.word(seg, id)?;
        // SAFETY: the word lies in the segment's notification area (id
        // checked by the caller), which the pending entry sealed next
        // keeps alive until the stream ran the write.
        unsafe { gpu::stream_write_u32(&self.stream, word, value)? };
        Ok(())
    }

    /// The device address of word `id` of `seg` (checked by the caller).
    fn word(&self, seg: &LocalSegment, id: u32) -> Result<DevicePtr> {
        let (_, words) = seg.kernel_view(self.device)?;
        if seg.device_words.is_none() {
            // The stream stores into host-mapped words: sleeping waiters
            // nap and look (and `complete` wakes them).
            seg.notifications.mark_silent_writer();
        }
        Ok(words + 4 * u64::from(id))
    }
}

impl Drop for DeviceApply {
    fn drop(&mut self) {
        // The staging and the segments must outlive the copies.
        if let Err(e) = gpu::synchronize(&self.stream) {
            tracing::warn!("apply stream of GPU {}: {e}", self.device);
        }
    }
}

/// The apply streams of a rank's GPU devices (see the module docs).
#[derive(Debug, Default)]
pub(crate) struct GpuApply {
    /// Held from taking finished requests until they are answered
    /// ([`Acting`]): a fence's answer must not overtake the data of a
    /// read that another thread took as finished and has not sent yet.
    acting: Mutex<()>,
    devices: Mutex<Vec<DeviceApply>>,
    /// Requests enqueued and not yet taken as finished, on all devices.
    in_flight: AtomicUsize,
}

/// Staging reserved: the lock still held, the ticket, the first byte.
type Reserved<'a> = (MutexGuard<'a, Vec<DeviceApply>>, u64, usize);

/// The right to take finished requests, and those taken: answer them
/// (`serve::act_on`) before dropping it.
#[derive(Debug)]
pub(crate) struct Acting<'a> {
    _turn: MutexGuard<'a, ()>,
    pub out: Vec<Finished>,
}

/// A large write into a GPU segment being read from the socket into the
/// staging ring (see `serve::DirectPut`).
#[derive(Debug)]
pub(crate) struct DirectGpu {
    apply: Arc<GpuApply>,
    segment: Arc<LocalSegment>,
    device: u32,
    ticket: u64,
    /// Staging bytes reserved, from its first.
    staging: *mut u8,
    /// Where the data goes.
    dst: DevicePtr,
    len: usize,
    /// Bytes already handed to the copy engine.
    queued: usize,
    sealed: bool,
}

// SAFETY: `staging` points into the apply ring's pinned memory, which the
// Arc<GpuApply> keeps allocated, reserved for this write alone; only the
// holder of the connection's read state (one thread at a time) uses it.
unsafe impl Send for DirectGpu {}

impl GpuApply {
    fn lock(&self) -> MutexGuard<'_, Vec<DeviceApply>> {
        self.devices.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The turn to take finished requests and answer them (see
    /// [`Acting`]); every call below that takes finished requests is made
    /// with one held.
    pub fn acting(&self) -> Acting<'_> {
        Acting {
            _turn: self.acting.lock().unwrap_or_else(|p| p.into_inner()),
            out: Vec::new(),
        }
    }

    /// [`Self::acting`] unless another thread has the turn.
    pub fn try_acting(&self) -> Option<Acting<'_>> {
        Some(Acting {
            _turn: self.acting.try_lock().ok()?,
            out: Vec::new(),
        })
    }

    /// Whether requests are in flight (the engine then does not sleep).
    #[inline]
    pub fn pending(&self) -> bool {
        self.in_flight.load(Ordering::Acquire) != 0
    }

    fn device_of(seg: &LocalSegment) -> Result<u32> {
        seg.device()
            .ok_or_else(|| Error::Protocol(format!("{} is not in GPU memory", seg.id)))
    }

    /// The device's apply state, made on first use.
    fn state(devices: &mut Vec<DeviceApply>, device: u32) -> Result<&mut DeviceApply> {
        let i = match devices.iter().position(|d| d.device == device) {
            Some(i) => i,
            None => {
                devices.push(DeviceApply::new(device)?);
                devices.len() - 1
            }
        };
        Ok(&mut devices[i])
    }

    /// Takes finished requests of every device (under the lock).
    fn take_all(&self, devices: &mut [DeviceApply], out: &mut Vec<Finished>) {
        for d in devices.iter_mut() {
            d.take_finished(out, &self.in_flight);
        }
    }

    /// Reserves `len` staging bytes on `device`, taking finished requests
    /// (into `out`) to make room; `None` when `len` never fits (the caller
    /// takes the synchronous path after [`Self::drain`]), or when what
    /// holds the ring is not in flight on the stream (direct reads still
    /// arriving). Waits for the stream meanwhile, never for anything else.
    fn reserve<'a>(
        &'a self,
        mut devices: MutexGuard<'a, Vec<DeviceApply>>,
        device: u32,
        len: usize,
        out: &mut Vec<Finished>,
    ) -> Result<Option<Reserved<'a>>> {
        if len > STAGING_BYTES / 2 {
            return Ok(None);
        }
        let mut spins = 0u32;
        loop {
            let d = Self::state(&mut devices, device)?;
            if let Some((ticket, at)) = d.ring.reserve(STAGING_BYTES, len) {
                return Ok(Some((devices, ticket, at)));
            }
            d.take_finished(out, &self.in_flight);
            if let Some((ticket, at)) = d.ring.reserve(STAGING_BYTES, len) {
                return Ok(Some((devices, ticket, at)));
            }
            spins += 1;
            if spins.is_multiple_of(64) && d.pending.is_empty() {
                // Held by direct reads still arriving (this thread's to
                // finish): the caller takes the synchronous path.
                return Ok(None);
            }
            std::hint::spin_loop();
            if spins.is_multiple_of(16) {
                drop(devices);
                std::thread::yield_now();
                devices = self.lock();
            }
        }
    }

    /// A peer's write of `data` to `offset` of `seg` (a GPU segment of
    /// this rank, range and notification checked), then the notification:
    /// enqueued, `then` once the stream ran it. `Ok(false)`: too large for
    /// the ring; the stream was drained, the caller copies synchronously.
    pub fn put(
        &self,
        seg: &Arc<LocalSegment>,
        offset: u64,
        data: &[u8],
        notify: Option<(u32, u32)>,
        then: Then,
        out: &mut Vec<Finished>,
    ) -> Result<bool> {
        let device = Self::device_of(seg)?;
        let dst = seg.gpu_address(offset, data.len())?;
        let mut devices = self.lock();
        if as_values(dst, data.len()) {
            // Stream values carry no copy-engine latency and need no
            // staging.
            let d = Self::state(&mut devices, device)?;
            d.take_finished(out, &self.in_flight);
            d.put_values(seg, dst, data, notify, then, &self.in_flight)?;
            return Ok(true);
        }
        self.put_copy(devices, seg, device, dst, data, notify, then, out)
    }

    #[allow(clippy::too_many_arguments)]
    fn put_copy(
        &self,
        devices: MutexGuard<'_, Vec<DeviceApply>>,
        seg: &Arc<LocalSegment>,
        device: u32,
        dst: DevicePtr,
        data: &[u8],
        notify: Option<(u32, u32)>,
        then: Then,
        out: &mut Vec<Finished>,
    ) -> Result<bool> {
        let (mut devices, ticket) = if data.is_empty() {
            (devices, None)
        } else {
            match self.reserve(devices, device, data.len(), out)? {
                Some((mut devices, ticket, at)) => {
                    let d = Self::state(&mut devices, device)?;
                    // SAFETY: `at..at + len` is reserved in the ring for
                    // this request alone; the stream reads it only after
                    // this copy (enqueued below).
                    let src = unsafe { d.staging.host_ptr().add(at) };
                    // SAFETY: as just said; `data` is another buffer.
                    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), src, data.len()) };
                    // SAFETY: the destination lies in the segment
                    // (gpu_address checked it), kept allocated by the
                    // pending entry until the stream ran the copy; the
                    // source is pinned and reserved until then too.
                    if let Err(e) =
                        unsafe { gpu::copy_host_to_device(&d.stream, dst, src, data.len()) }
                    {
                        d.ring.release(ticket);
                        return Err(e.into());
                    }
                    (devices, Some(ticket))
                }
                None => {
                    self.drain_locked(self.lock(), device, out)?;
                    return Ok(false);
                }
            }
        };
        let d = Self::state(&mut devices, device)?;
        if let Some((id, value)) = notify {
            d.write_word(seg, id, value)?;
        }
        d.seal(seg, ticket, then, &self.in_flight)?;
        Ok(true)
    }

    /// A notification of `seg` alone: on the stream when it has requests
    /// in flight (it must not overtake them), `Ok(false)` when the stream
    /// is idle and the caller may store it at once.
    pub fn notify(
        &self,
        seg: &Arc<LocalSegment>,
        id: u32,
        value: u32,
        then: Then,
        out: &mut Vec<Finished>,
    ) -> Result<bool> {
        let mut devices = self.lock();
        let Some(d) = self.busy(&mut devices, seg, out)? else {
            return Ok(false);
        };
        d.write_word(seg, id, value)?;
        d.seal(seg, None, then, &self.in_flight)?;
        Ok(true)
    }

    /// `seg`'s device's apply state when it has requests in flight (after
    /// taking those that finished into `out`), else `None`.
    fn busy<'d>(
        &self,
        devices: &'d mut [DeviceApply],
        seg: &LocalSegment,
        out: &mut Vec<Finished>,
    ) -> Result<Option<&'d mut DeviceApply>> {
        let device = Self::device_of(seg)?;
        let Some(d) = devices.iter_mut().find(|d| d.device == device) else {
            return Ok(None);
        };
        d.take_finished(out, &self.in_flight);
        Ok((!d.pending.is_empty()).then_some(d))
    }

    /// `then` once every request in flight on `seg`'s device ran;
    /// `Ok(false)` when none is (the caller acts at once).
    pub fn after(
        &self,
        seg: &Arc<LocalSegment>,
        then: Then,
        out: &mut Vec<Finished>,
    ) -> Result<bool> {
        let mut devices = self.lock();
        let Some(d) = self.busy(&mut devices, seg, out)? else {
            return Ok(false);
        };
        d.seal(seg, None, then, &self.in_flight)?;
        Ok(true)
    }

    /// A peer's read of `len` bytes at `offset` of `seg`: copied into the
    /// ring after every write before it, answered by `complete` (a
    /// [`Then::Reply`] with its staging). `Ok(false)`: too large for the
    /// ring; drained, the caller reads synchronously.
    pub fn get(
        &self,
        seg: &Arc<LocalSegment>,
        offset: u64,
        len: usize,
        from: Rank,
        token: u64,
        out: &mut Vec<Finished>,
    ) -> Result<bool> {
        let device = Self::device_of(seg)?;
        let src = seg.gpu_address(offset, len)?;
        let devices = self.lock();
        let Some((mut devices, ticket, at)) = self.reserve(devices, device, len, out)? else {
            self.drain_locked(self.lock(), device, out)?;
            return Ok(false);
        };
        let d = Self::state(&mut devices, device)?;
        // SAFETY: the staging range is reserved for this read until its
        // answer is taken; the source lies in the segment (checked), which
        // the pending entry keeps allocated.
        let dst = unsafe { d.staging.host_ptr().add(at) };
        // SAFETY: as just said.
        if let Err(e) = unsafe { gpu::copy_device_to_host(&d.stream, dst, src, len) } {
            d.ring.release(ticket);
            return Err(e.into());
        }
        d.seal(
            seg,
            Some(ticket),
            Then::Reply {
                from,
                token,
                at,
                len,
            },
            &self.in_flight,
        )?;
        Ok(true)
    }

    /// Waits until `device`'s stream ran everything enqueued (for a
    /// request that takes a synchronous path and must not overtake them).
    pub fn drain(&self, device: u32, out: &mut Vec<Finished>) -> Result<()> {
        self.drain_locked(self.lock(), device, out)
    }

    /// [`Self::drain`] of every device (a fence must follow every read
    /// in flight, whatever device it reads).
    pub fn drain_all(&self, out: &mut Vec<Finished>) -> Result<()> {
        let mut devices = self.lock();
        let mut result = Ok(());
        for d in devices.iter_mut() {
            if !d.pending.is_empty() {
                if let Err(e) = gpu::synchronize(&d.stream) {
                    result = Err(e.into());
                }
            }
            d.take_finished(out, &self.in_flight);
        }
        result
    }

    fn drain_locked(
        &self,
        mut devices: MutexGuard<'_, Vec<DeviceApply>>,
        device: u32,
        out: &mut Vec<Finished>,
    ) -> Result<()> {
        if let Some(d) = devices.iter_mut().find(|d| d.device == device) {
            if !d.pending.is_empty() {
                gpu::synchronize(&d.stream)?;
            }
            d.take_finished(out, &self.in_flight);
        }
        Ok(())
    }

    /// Takes every request the streams finished (one load when none is in
    /// flight); the caller acts on them.
    pub fn finished(&self, out: &mut Vec<Finished>) {
        if !self.pending() {
            return;
        }
        let Ok(mut devices) = self.devices.try_lock() else {
            return; // another thread is at it
        };
        self.take_all(&mut devices, out);
    }

    /// Starts a direct read of a large write of `len` bytes to `offset` of
    /// `seg` (checked) into the ring; `None` when it does not fit (the
    /// write then goes the buffered way).
    pub fn start_direct(
        self: &Arc<Self>,
        seg: &Arc<LocalSegment>,
        offset: u64,
        len: usize,
        out: &mut Vec<Finished>,
    ) -> Option<DirectGpu> {
        let device = Self::device_of(seg).ok()?;
        let dst = seg.gpu_address(offset, len).ok()?;
        let (mut devices, ticket, at) = self.reserve(self.lock(), device, len, out).ok()??;
        let d = Self::state(&mut devices, device).ok()?;
        // SAFETY: at + len lies in the ring (reserved above).
        let staging = unsafe { d.staging.host_ptr().add(at) };
        Some(DirectGpu {
            apply: self.clone(),
            segment: seg.clone(),
            device,
            ticket,
            staging,
            dst,
            len,
            queued: 0,
            sealed: false,
        })
    }
}

impl DirectGpu {
    /// Where the socket's bytes go: the staging reserved for the write.
    pub fn staging(&self) -> *mut u8 {
        self.staging
    }

    /// `arrived` bytes of the write are in the staging: hands the next
    /// chunk to the copy engine when a whole one is there (or the rest,
    /// once all arrived).
    pub fn arrived(&mut self, arrived: usize) -> Result<()> {
        let ready = arrived - self.queued;
        if ready == 0 || (ready < PIPELINE_CHUNK && arrived < self.len) {
            return Ok(());
        }
        let mut devices = self.apply.lock();
        let d = GpuApply::state(&mut devices, self.device)?;
        // SAFETY: both ranges lie in what was reserved and checked at the
        // start; the staging bytes do not change again (the socket writes
        // only past `arrived`), and the ring entry and segment live until
        // the stream ran the copy (released at the seal's completion).
        unsafe {
            gpu::copy_host_to_device(
                &d.stream,
                self.dst + self.queued as u64,
                self.staging.add(self.queued),
                ready,
            )?
        };
        self.queued = arrived;
        Ok(())
    }

    /// All the data arrived (and was handed on): the notification after
    /// it, then `then`.
    pub fn finish(mut self, notify: Option<(u32, u32)>, then: Then) -> Result<()> {
        self.arrived(self.len)?;
        self.sealed = true;
        let mut devices = self.apply.lock();
        let d = GpuApply::state(&mut devices, self.device)?;
        if let Some((id, value)) = notify {
            d.write_word(&self.segment, id, value)?;
        }
        d.seal(
            &self.segment,
            Some(self.ticket),
            then,
            &self.apply.in_flight,
        )
    }
}

impl Drop for DirectGpu {
    fn drop(&mut self) {
        if self.sealed {
            return;
        }
        // Given up (the connection ended mid-write): its staging is
        // released once the copies already handed on ran.
        let mut devices = self.apply.lock();
        if let Ok(d) = GpuApply::state(&mut devices, self.device) {
            if d.seal(
                &self.segment,
                Some(self.ticket),
                Then::Nothing,
                &self.apply.in_flight,
            )
            .is_err()
            {
                // The stream failed: nothing more runs on it.
                d.ring.release(self.ticket);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Ring;

    #[test]
    fn ring_reserves_in_order_wraps_and_refuses_when_full() {
        let mut r = Ring::default();
        let (a, at) = r.reserve(100, 40).unwrap();
        assert_eq!(at, 0);
        let (b, bt) = r.reserve(100, 40).unwrap();
        assert_eq!(bt, 40);
        // 20 left at the end, none at the front: refused.
        assert!(r.reserve(100, 30).is_none());
        assert!(r.reserve(100, 0).is_none());
        assert!(r.reserve(100, 101).is_none());
        // Released out of order: the space comes back only in order.
        r.release(b);
        assert!(r.reserve(100, 30).is_none());
        r.release(a);
        // Empty again: starts over at 0.
        let (c, ct) = r.reserve(100, 100).unwrap();
        assert_eq!(ct, 0);
        assert!(r.reserve(100, 1).is_none());
        r.release(c);
        let (d, dt) = r.reserve(100, 60).unwrap();
        assert_eq!(dt, 0);
        let (e, et) = r.reserve(100, 30).unwrap();
        assert_eq!(et, 60);
        r.release(d);
        // Tail now at 60, head at 90: 10 at the end, 60 at the front.
        let (_f, ft) = r.reserve(100, 50).unwrap();
        assert_eq!(ft, 0);
        // head 50 < tail 60: 10 free.
        assert!(r.reserve(100, 11).is_none());
        let (_g, gt) = r.reserve(100, 10).unwrap();
        assert_eq!(gt, 50);
        // head == tail with reservations: full.
        assert!(r.reserve(100, 1).is_none());
        r.release(e);
    }
}
