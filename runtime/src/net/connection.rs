//! The writing side of a control connection: whole frames or nothing, and
//! never a wait past the caller's deadline.
//!
//! A peer that is stopped (SIGSTOP, a debugger, a long page-in) stops
//! reading its control connection; once the kernel's socket buffers are
//! full a plain blocking write would hold the caller for as long as the
//! peer stays stopped, and a write that gives up halfway leaves half a
//! frame on the stream, which corrupts every frame after it. So each
//! connection has an *outbox*: a frame is either appended whole to the
//! bytes the socket has not taken yet, or not at all.
//!
//! - A call's frame is accepted while the outbox holds less than
//!   [`OUTBOX_MAX`] bytes (or is empty: one frame of any size always
//!   fits). When it is fuller, the caller waits for room until its own
//!   deadline, then gets [`Error::Timeout`] with nothing sent: it may retry.
//!   A slow peer is not a dead one.
//! - Replies and other frames of the progress engine, and the
//!   fire-and-forget clean-up of a call that timed out, are appended
//!   whatever the outbox holds ([`Urgency::Now`]): the engine must never
//!   wait on a peer, and those frames are small and bounded by what the
//!   peer itself asked for.
//! - Whatever the socket did not take is written by the next sender, by a
//!   waiter of this rank (`waiter_progress.rs`) or by the progress engine,
//!   which watches the socket for room (edge-triggered `EPOLLOUT`, raised
//!   only after a write found the socket full).
//! - What is held is a queue of chunks: bytes copied in (heads, answers,
//!   small frames), or a write's data left where it lies, in a segment an
//!   `Arc` keeps mapped (*lent*: GASPI's caller does not change a write's
//!   source before `wait`, decision 0027). Up to [`IOV_AT_ONCE`] chunks
//!   leave with one `sendmsg`.
//!
//! A write that fails for good (the peer's end is closed) is reported as
//! the peer's death only by the progress engine, which reads the same
//! connection and knows whether a goodbye came first: the decision that a
//! rank is gone is made in one place for every call (decision 0018).

use crate::model::error::{Error, Result};
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Bytes an outbox may hold before callers with a deadline wait for room:
/// sixteen of the largest passive messages, on top of the several MiB the
/// kernel's socket buffers take first.
pub(crate) const OUTBOX_MAX: usize = 1 << 20;

/// Whether a frame may wait for room in the outbox.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Urgency {
    /// Wait for room until the deadline (`None`: for as long as it takes,
    /// unless the peer is found gone).
    Within(Option<Instant>),
    /// Append at once, however full the outbox is (progress engine,
    /// clean-up messages).
    Now,
}

/// What happened to a frame handed to [`ControlOut::offer`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Offered {
    /// Appended; the socket took it all.
    Sent,
    /// Appended; part of the outbox waits for the socket to take it.
    Queued,
    /// Not appended: the outbox is full. Nothing was written.
    Full,
}

/// Memory that a frame's data lies in, kept mapped for as long as the
/// outbox points into it (a segment, or a buffer handed over whole).
pub(crate) type Keep = Arc<dyn std::any::Any + Send + Sync>;

/// Bytes the socket has not taken yet, in the order they are to go.
#[derive(Debug)]
enum Chunk {
    /// Copied in; `taken` of them written already.
    Owned { bytes: Vec<u8>, taken: usize },
    /// `len` bytes at `at`, left where they lie (a write's data: GASPI's
    /// caller leaves a write's source unchanged until its request
    /// completes at `wait`, which is after the target answered, so after
    /// every byte left here); `keep` keeps that memory mapped.
    Lent {
        /// Held, never read: it keeps `at` mapped.
        _keep: Keep,
        at: *const u8,
        len: usize,
        taken: usize,
    },
}

// SAFETY: `at` points into memory that `keep` (Send + Sync) keeps mapped
// for as long as the chunk lives; the outbox only reads it, under its
// mutex.
unsafe impl Send for Chunk {}

impl Chunk {
    /// The bytes not written yet.
    fn rest(&self) -> &[u8] {
        match self {
            Chunk::Owned { bytes, taken } => &bytes[*taken..],
            // SAFETY: `at..at + len` lies in memory `keep` keeps mapped
            // (see `Chunk::Lent`) and `taken <= len`.
            Chunk::Lent { at, len, taken, .. } => unsafe {
                std::slice::from_raw_parts(at.add(*taken), len - taken)
            },
        }
    }

    /// Marks `n` more bytes written (at most [`Self::rest`]'s length).
    fn advance(&mut self, n: usize) {
        match self {
            Chunk::Owned { taken, .. } | Chunk::Lent { taken, .. } => *taken += n,
        }
    }
}

#[derive(Debug)]
struct Outbox {
    /// Shared with the progress engine, which reads the same socket.
    stream: Arc<TcpStream>,
    /// What the socket has not taken, oldest first.
    chunks: std::collections::VecDeque<Chunk>,
    /// Bytes of `chunks` not taken yet.
    held: usize,
    /// The buffer of the last owned chunk written out, kept for the next
    /// one (its allocation is reused).
    spare: Vec<u8>,
    /// The socket failed for good; every later write fails the same way.
    broken: Option<std::io::ErrorKind>,
}

/// The writing half of one control connection.
#[derive(Debug)]
pub(crate) struct ControlOut {
    fd: RawFd,
    outbox: Mutex<Outbox>,
    /// The outbox holds bytes the socket has not taken (kept with it, for
    /// readers that must not take the lock to find out).
    queued: std::sync::atomic::AtomicBool,
}

impl ControlOut {
    /// Wraps the writing side of a connection whose reading side the
    /// progress engine has (the same socket); it is made non-blocking.
    pub fn new(stream: Arc<TcpStream>) -> Result<ControlOut> {
        stream
            .set_nonblocking(true)
            .map_err(|e| Error::io("configuring a control socket", e))?;
        Ok(ControlOut {
            fd: stream.as_raw_fd(),
            outbox: Mutex::new(Outbox {
                stream,
                chunks: std::collections::VecDeque::new(),
                held: 0,
                spare: Vec::new(),
                broken: None,
            }),
            queued: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Whether bytes wait for the socket to take them (one load).
    pub fn has_queued(&self) -> bool {
        self.queued.load(std::sync::atomic::Ordering::Relaxed)
    }

    fn note_queued(&self, out: &Outbox) {
        let queued = out.held > 0;
        if queued != self.has_queued() {
            self.queued
                .store(queued, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Appends `frame` whole if there is room (or `now`), then writes what
    /// the socket takes. An `Err` is a connection that failed for good.
    pub fn offer(&self, frame: &[u8], now: bool) -> std::io::Result<Offered> {
        self.offer_parts(&[frame], now, None)
    }

    /// [`Self::offer`] of the bytes of `parts`, one after the other: one
    /// frame built of pieces (a write's head and its data, where the data
    /// lies), or several frames, taken whole or not at all together. With
    /// `lent`, what the socket does not take of the last part is left
    /// where it lies, in memory `lent` keeps mapped, rather than copied:
    /// the caller does not change those bytes until its request completes
    /// (a write's source; see `Chunk::Lent`).
    pub fn offer_parts(
        &self,
        parts: &[&[u8]],
        now: bool,
        lent: Option<&Keep>,
    ) -> std::io::Result<Offered> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut out = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        out.flush()?;
        let held = out.held;
        if !now && held > 0 && held + total > OUTBOX_MAX {
            return Ok(Offered::Full);
        }
        // Nothing queued: the socket takes what it can straight from the
        // parts (one system call for all of them), and only the rest is
        // kept: copied, or left where it lies when lent.
        let sent = if held == 0 {
            out.write_parts(parts)?
        } else {
            0
        };
        // The last rest is the last part's when that part is not empty.
        let rests = unsent(parts, sent).count();
        let last_lent = lent.filter(|_| parts.last().is_some_and(|p| !p.is_empty()));
        for (i, rest) in unsent(parts, sent).enumerate() {
            match last_lent {
                Some(keep) if i + 1 == rests => out.lend(keep, rest),
                _ => out.copy_in(rest),
            }
        }
        // No second try: the socket was full a moment ago (or took it
        // all). The engine writes the rest once it has room.
        self.note_queued(&out);
        Ok(if out.held == 0 {
            Offered::Sent
        } else {
            Offered::Queued
        })
    }

    /// Writes what the socket takes of the outbox (progress engine, on
    /// room). Returns the bytes still held.
    pub fn flush(&self) -> std::io::Result<usize> {
        let mut out = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        let flushed = out.flush();
        self.note_queued(&out);
        flushed?;
        Ok(out.held)
    }

    /// How long ago data was last sent on the connection (the heartbeat
    /// of [`Liveness`]); `None` where the kernel does not say.
    pub fn since_last_sent(&self) -> Option<Duration> {
        // The descriptor belongs to the outbox's stream, which lives as
        // long as `self`.
        since_last_sent(self.fd)
    }

    /// Whether this is the writing side of `stream`.
    pub fn is(&self, stream: &Arc<TcpStream>) -> bool {
        Arc::ptr_eq(
            &self.outbox.lock().unwrap_or_else(|e| e.into_inner()).stream,
            stream,
        )
    }

    /// Bytes not yet taken by the socket.
    #[cfg(test)]
    pub fn held(&self) -> usize {
        self.outbox.lock().unwrap_or_else(|e| e.into_inner()).held
    }

    /// Sleeps until the socket may take more, at most `nap`.
    pub fn wait_room(&self, nap: Duration) {
        let mut pfd = libc::pollfd {
            fd: self.fd,
            events: libc::POLLOUT,
            revents: 0,
        };
        let ms = nap.as_millis().clamp(1, i32::MAX as u128) as i32;
        // SAFETY: `pfd` is a valid pollfd for the duration of the call; the
        // descriptor belongs to `self.outbox`'s stream, which lives as long
        // as `self` (a closed descriptor would only make poll report it).
        unsafe { libc::poll(&mut pfd, 1, ms) };
    }
}

/// The bytes of `parts` after the first `sent` of them: the parts not yet
/// taken, the first one cut where the socket stopped.
fn unsent<'a>(parts: &'a [&'a [u8]], sent: usize) -> impl Iterator<Item = &'a [u8]> {
    let mut skip = sent;
    parts.iter().filter_map(move |p| {
        if skip >= p.len() {
            skip -= p.len();
            None
        } else {
            let rest = &p[skip..];
            skip = 0;
            Some(rest)
        }
    })
}

/// Slices one `sendmsg` takes at most (the rest goes in the next call).
const IOV_AT_ONCE: usize = 8;

/// `sendmsg` of the first [`IOV_AT_ONCE`] of `slices`, one after the
/// other, with `MSG_NOSIGNAL`: a peer that closed its end is an error
/// (`EPIPE`), not a SIGPIPE that would end a C program linked against us
/// (Rust programs ignore the signal; C programs do not). `writev`, which
/// `Write::write_vectored` uses, has no such flag.
fn send_slices<'a>(
    stream: &TcpStream,
    slices: impl IntoIterator<Item = &'a [u8]>,
) -> std::io::Result<usize> {
    let mut iov = [libc::iovec {
        iov_base: std::ptr::null_mut(),
        iov_len: 0,
    }; IOV_AT_ONCE];
    let mut n = 0;
    for (v, slice) in iov.iter_mut().zip(slices) {
        *v = libc::iovec {
            iov_base: slice.as_ptr() as *mut libc::c_void,
            iov_len: slice.len(),
        };
        n += 1;
    }
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_mut_ptr();
    msg.msg_iovlen = n as _;
    // SAFETY: `msg` points at the first `n` entries of `iov`, which point
    // into slices borrowed for the call; sendmsg only reads them. The
    // descriptor is the stream's, open while `stream` is borrowed.
    let sent = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if sent < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(sent as usize)
    }
}

/// How a control connection tells a peer that is gone from one that is
/// only silent (decision 0033), all derived from `GASPI_PEER_TIMEOUT_MS`
/// (`T`).
///
/// The kernel decides, since the peer's kernel answers whatever its
/// process does (a stopped rank is slow, not dead): with
/// `TCP_USER_TIMEOUT` set to [`Liveness::user_timeout`] it fails the
/// connection once data it sent stays unacknowledged that long. What it
/// measures from is the first unacknowledged byte, so the progress engine
/// keeps a byte in flight: on a connection it has sent nothing on for
/// [`Liveness::beat`] it sends a heartbeat (looking every
/// [`Liveness::check`]). After a cut the first byte left unanswered was
/// sent at most `beat + check` after it (or just before it), so the peer
/// is declared dead no earlier than `T` after the cut and no later than
/// about `1.2 T` after it, whatever the connection did before. (Keep-alive
/// alone measured from the last packet received, up to its idle time
/// before the cut: a 0.7 T partition killed idle connections.)
#[derive(Debug, Clone, Copy)]
pub(crate) struct Liveness {
    /// `T`.
    pub timeout: Duration,
    /// A connection nothing was sent on for this long gets a heartbeat.
    pub beat: Duration,
    /// How often the engine looks for such connections.
    pub check: Duration,
}

impl Liveness {
    /// The timing for a peer timeout of `timeout` (at least 1 s).
    pub fn new(timeout: Duration) -> Liveness {
        let timeout = timeout.max(Duration::from_secs(1));
        Liveness {
            timeout,
            beat: timeout / 8,
            check: timeout / 16,
        }
    }

    /// `TCP_USER_TIMEOUT`: `T` and a margin of `T / 32` for the round trip
    /// of a byte sent just before a cut, whose answer the cut took.
    pub fn user_timeout(&self) -> Duration {
        self.timeout + self.timeout / 32
    }

    /// The longest wait between two retransmissions (`TCP_RTO_MAX_MS`,
    /// Linux 6.11 and later; the kernel's floor is 1 s): once a partition
    /// heals, the next retransmission comes within this, not after an
    /// exponential backoff that may end past the user timeout (a 60 s cut
    /// would be fatal to a 90 s timeout: the retry after it comes at about
    /// 102 s).
    pub fn rto_max(&self) -> Duration {
        (self.timeout / 8).clamp(Duration::from_secs(1), Duration::from_secs(120))
    }

    /// Keep-alive, a backstop for a connection whose heartbeats stop (an
    /// engine held up): probes start only after the user timeout and a
    /// beat of silence, so they never end a connection before `T` after
    /// a cut either.
    fn keepalive_idle_s(&self) -> libc::c_int {
        secs_up(self.user_timeout() + self.beat + self.check)
    }

    /// The probe interval: one probe past the idle time, unanswered for
    /// this long (at least `T`), ends the connection. A probe answered
    /// only refreshes the last packet received every idle time, so the
    /// last one before a cut may be that old; the interval makes up for
    /// it. (With an interval of a sixth of `T`, a connection nobody sent
    /// on died as early as `T - idle` after a cut: issue 24.)
    fn keepalive_interval_s(&self) -> libc::c_int {
        secs_up(self.user_timeout())
    }
}

/// `d` in whole seconds, rounded up, at least 1.
fn secs_up(d: Duration) -> libc::c_int {
    d.as_millis().div_ceil(1000).clamp(1, i32::MAX as u128) as libc::c_int
}

/// `TCP_RTO_MAX_MS` (Linux 6.11); not in every `libc` crate yet.
const TCP_RTO_MAX_MS: libc::c_int = 44;

/// Sets the liveness options of decision 0033 on a control connection
/// (see [`Liveness`]): the peer is declared dead when what this rank sends
/// it stays unacknowledged for the user timeout; the progress engine
/// then sees the connection fail and marks the rank dead.
pub(crate) fn watch_liveness(stream: &TcpStream, timeout: Duration) -> Result<()> {
    let l = Liveness::new(timeout);
    let fd = stream.as_raw_fd();
    let set = |level: libc::c_int, name: libc::c_int, value: libc::c_int| {
        // SAFETY: `fd` is an open TCP socket (borrowed from `stream` for
        // the call); the option value is a c_int that lives across it.
        let rc = unsafe {
            libc::setsockopt(
                fd,
                level,
                name,
                (&value as *const libc::c_int).cast(),
                std::mem::size_of::<libc::c_int>() as libc::socklen_t,
            )
        };
        if rc == 0 {
            Ok(())
        } else {
            Err(std::io::Error::last_os_error())
        }
    };
    let failed = |e| Error::io("setting the liveness options of a control socket", e);
    let user_ms = l.user_timeout().as_millis().min(i32::MAX as u128) as libc::c_int;
    set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, user_ms).map_err(failed)?;
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1).map_err(failed)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, l.keepalive_idle_s()).map_err(failed)?;
    set(
        libc::IPPROTO_TCP,
        libc::TCP_KEEPINTVL,
        l.keepalive_interval_s(),
    )
    .map_err(failed)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 6).map_err(failed)?;
    let rto_ms = l.rto_max().as_millis() as libc::c_int;
    if let Err(e) = set(libc::IPPROTO_TCP, TCP_RTO_MAX_MS, rto_ms) {
        // Older kernels: the exponential backoff stays, and a partition
        // longer than about half the timeout may outlast the connection.
        tracing::debug!("TCP_RTO_MAX_MS not set ({e}): kernel before 6.11");
    }
    Ok(())
}

/// A heartbeat frame on `stream`, a connection this rank does not send
/// its frames on (the peer's, when both connected at once), if nothing
/// was sent on it for `quiet` and nothing waits in its send queue (so the
/// frame goes whole or not at all: the queue is empty, and the frame is
/// a few bytes). Only the progress engine writes such connections (this,
/// and its goodbye at the end).
pub(crate) fn beat_if_quiet(stream: &TcpStream, quiet: Duration, frame: &[u8]) {
    let fd = stream.as_raw_fd();
    if since_last_sent(fd).is_none_or(|q| q < quiet) {
        return;
    }
    let mut queued: libc::c_int = 0;
    // SAFETY: TIOCOUTQ writes one c_int, which `queued` is; the descriptor
    // is the stream's, open while it is borrowed.
    if unsafe { libc::ioctl(fd, libc::TIOCOUTQ, &mut queued) } != 0 || queued != 0 {
        return;
    }
    // SAFETY: `frame` is valid for `frame.len()` bytes across the call;
    // the descriptor is the stream's, open while it is borrowed.
    unsafe {
        libc::send(
            fd,
            frame.as_ptr().cast(),
            frame.len(),
            libc::MSG_NOSIGNAL | libc::MSG_DONTWAIT,
        )
    };
}

/// How long ago data was last sent on socket `fd` (`TCP_INFO`), `None`
/// where the kernel does not say.
fn since_last_sent(fd: RawFd) -> Option<Duration> {
    // SAFETY: an all-zero tcp_info is valid plain data.
    let mut info: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = std::mem::size_of::<libc::tcp_info>() as libc::socklen_t;
    // SAFETY: `info` has room for `len` bytes and lives across the call;
    // a descriptor closed meanwhile only makes the call fail.
    let rc = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            (&mut info as *mut libc::tcp_info).cast(),
            &mut len,
        )
    };
    (rc == 0 && len as usize >= std::mem::offset_of!(libc::tcp_info, tcpi_last_ack_sent))
        .then(|| Duration::from_millis(u64::from(info.tcpi_last_data_sent)))
}

impl Outbox {
    /// Keeps a copy of `bytes` to write after everything held.
    fn copy_in(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match self.chunks.back_mut() {
            Some(Chunk::Owned { bytes: last, .. }) => last.extend_from_slice(bytes),
            _ => {
                let mut buf = std::mem::take(&mut self.spare);
                buf.extend_from_slice(bytes);
                self.chunks.push_back(Chunk::Owned {
                    bytes: buf,
                    taken: 0,
                });
            }
        }
        self.held += bytes.len();
    }

    /// Keeps `bytes`, in memory `keep` keeps mapped, to write after
    /// everything held, from where they lie.
    fn lend(&mut self, keep: &Keep, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        self.chunks.push_back(Chunk::Lent {
            _keep: keep.clone(),
            at: bytes.as_ptr(),
            len: bytes.len(),
            taken: 0,
        });
        self.held += bytes.len();
    }

    /// Writes from the front of the held bytes until the socket is full.
    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(kind) = self.broken {
            return Err(kind.into());
        }
        while self.held > 0 {
            match send_slices(&self.stream, self.chunks.iter().map(Chunk::rest)) {
                Ok(0) => return self.fail(std::io::ErrorKind::WriteZero),
                Ok(k) => self.advance(k),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(e.kind()),
            }
        }
        Ok(())
    }

    /// Drops `n` written bytes from the front of the held ones.
    fn advance(&mut self, mut n: usize) {
        self.held -= n;
        while n > 0 {
            let Some(front) = self.chunks.front_mut() else {
                return;
            };
            let left = front.rest().len();
            if n < left {
                front.advance(n);
                // Frames appended behind a slow socket grow the chunk at
                // its end while its front is written: drop the written
                // part now and then, or it would only ever grow.
                if let Chunk::Owned { bytes, taken } = front {
                    if *taken > OUTBOX_MAX {
                        bytes.drain(..*taken);
                        *taken = 0;
                    }
                }
                return;
            }
            n -= left;
            if let Some(Chunk::Owned { mut bytes, .. }) = self.chunks.pop_front() {
                // Reuse the larger allocation; a huge one is let go.
                if bytes.capacity() > self.spare.capacity() && bytes.capacity() <= 2 * OUTBOX_MAX {
                    bytes.clear();
                    self.spare = bytes;
                }
            }
        }
    }

    /// Writes what the socket takes of the bytes of `parts` now (nothing
    /// held before); returns how many it took.
    fn write_parts(&mut self, parts: &[&[u8]]) -> std::io::Result<usize> {
        if let Some(kind) = self.broken {
            return Err(kind.into());
        }
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut sent = 0;
        while sent < total {
            match send_slices(&self.stream, unsent(parts, sent)) {
                Ok(0) => return self.fail(std::io::ErrorKind::WriteZero).map(|()| sent),
                Ok(n) => sent += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(e.kind()).map(|()| sent),
            }
        }
        Ok(sent)
    }

    fn fail(&mut self, kind: std::io::ErrorKind) -> std::io::Result<()> {
        self.broken = Some(kind);
        self.chunks.clear();
        self.held = 0;
        self.spare = Vec::new();
        Err(kind.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;
    use std::net::TcpListener;

    fn pair() -> (ControlOut, TcpStream) {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let a = TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (b, _) = l.accept().unwrap();
        (ControlOut::new(Arc::new(a)).unwrap(), b)
    }

    /// A buffer the test changes through a raw pointer after lending it,
    /// to tell bytes sent from where they lie from bytes copied.
    struct Shared(std::cell::UnsafeCell<Vec<u8>>);
    // SAFETY: only the test's thread writes, and only while the outbox is
    // not writing (it writes under its lock, inside `flush`).
    unsafe impl Sync for Shared {}

    #[test]
    fn a_lent_part_is_sent_from_where_it_lies_in_order_and_let_go_once_written() {
        let (out, mut reader) = pair();
        let filler = vec![1u8; 1 << 16];
        // Nobody reads: fill the socket until it takes nothing more.
        let mut fillers = 1;
        while out.offer(&filler, true).unwrap() == Offered::Sent {
            fillers += 1;
        }
        let before = out.held();
        let len = 1 << 20;
        let shared = Arc::new(Shared(std::cell::UnsafeCell::new(vec![2u8; len])));
        let keep: Keep = shared.clone();
        // SAFETY: the Vec lives in `shared`; nothing else touches it now
        // (the reference ends with the statement).
        let base: *mut u8 = unsafe { (&mut *shared.0.get()).as_mut_ptr() };
        // SAFETY: `base` points at `len` initialised bytes, kept by `shared`;
        // this slice is last used before the write below.
        let lent = unsafe { std::slice::from_raw_parts(base, len) };
        assert_eq!(
            out.offer_parts(&[b"head", lent], false, Some(&keep))
                .unwrap(),
            Offered::Full,
            "the outbox was not full of the filler"
        );
        // With room again (urgent), the head is copied, the data lent ...
        assert_eq!(
            out.offer_parts(&[b"head", lent], true, Some(&keep))
                .unwrap(),
            Offered::Queued
        );
        assert_eq!(out.held(), before + 4 + len);
        assert_eq!(Arc::strong_count(&shared), 3, "the outbox holds the memory");
        out.offer(b"tail", true).unwrap();
        // ... so a change made now is what the reader gets: nothing was
        // copied. (A caller may not do this before `wait`; the test does,
        // to see where the bytes come from.)
        // SAFETY: the outbox only reads the buffer inside `flush`, which
        // nobody calls until the reader thread below starts.
        unsafe { *base.add(len - 1) = 7 };
        let expect = fillers * filler.len() + 4 + len + 4;
        let t = std::thread::spawn(move || {
            let mut got = vec![0u8; expect];
            reader.read_exact(&mut got).unwrap();
            got
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while out.flush().unwrap() > 0 {
            assert!(Instant::now() < deadline, "the outbox never drained");
            out.wait_room(Duration::from_millis(10));
        }
        let got = t.join().unwrap();
        let at = expect - 4 - len - 4;
        assert!(got[..at].iter().all(|&b| b == 1), "the filler came first");
        assert_eq!(&got[at..at + 4], b"head");
        assert!(got[at + 4..at + 4 + len - 1].iter().all(|&b| b == 2));
        assert_eq!(got[at + 4 + len - 1], 7, "the lent bytes were copied");
        assert_eq!(
            &got[expect - 4..],
            b"tail",
            "a later frame overtook the lent bytes"
        );
        assert_eq!(
            Arc::strong_count(&shared),
            2,
            "written, the memory was not let go"
        );
    }

    #[test]
    fn a_reader_that_stops_fills_the_outbox_then_frames_are_refused_whole() {
        let (out, mut reader) = pair();
        let frame: Vec<u8> = (0..65_536u32).map(|i| (i % 251) as u8).collect();
        let mut accepted = 0usize;
        // Nobody reads: the socket buffers fill, then the outbox.
        while out.offer(&frame, false).unwrap() != Offered::Full {
            accepted += 1;
            assert!(accepted < 100_000, "the outbox never filled");
        }
        assert!(out.held() > 0 && out.held() <= OUTBOX_MAX + frame.len());
        // An urgent frame goes in regardless.
        assert_ne!(out.offer(b"urgent", true).unwrap(), Offered::Full);
        // The reader resumes: every accepted frame arrives whole, in order.
        let t = std::thread::spawn(move || {
            let mut got = vec![0u8; accepted * frame.len() + 6];
            reader.read_exact(&mut got).unwrap();
            for chunk in got[..accepted * frame.len()].chunks(frame.len()) {
                assert_eq!(chunk, &frame[..]);
            }
            assert_eq!(&got[accepted * frame.len()..], b"urgent");
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        while out.flush().unwrap() > 0 {
            assert!(Instant::now() < deadline, "the outbox never drained");
            out.wait_room(Duration::from_millis(10));
        }
        t.join().unwrap();
    }

    #[test]
    fn a_closed_peer_is_a_lasting_error() {
        let (out, reader) = pair();
        drop(reader);
        let frame = vec![7u8; 1 << 16];
        let deadline = Instant::now() + Duration::from_secs(10);
        let err = loop {
            match out.offer(&frame, true) {
                Ok(_) => assert!(
                    Instant::now() < deadline,
                    "writes to a closed peer kept working"
                ),
                Err(e) => break e,
            }
        };
        assert!(
            out.offer(b"x", true).is_err(),
            "after {err}, a write worked"
        );
    }
}
