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
//! - Whatever the socket did not take is written by the next sender or by
//!   the progress engine, which watches the socket for room (edge-triggered
//!   `EPOLLOUT`, raised only after a write found the socket full).
//!
//! A write that fails for good (the peer's end is closed) is reported as
//! the peer's death only by the progress engine, which reads the same
//! connection and knows whether a goodbye came first: the decision that a
//! rank is gone is made in one place for every call (decision 0018).

use crate::error::{Error, Result};
use std::io::Write;
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

#[derive(Debug)]
struct Outbox {
    /// Shared with the progress engine, which reads the same socket.
    stream: Arc<TcpStream>,
    /// Bytes not yet taken by the socket start at `pending[taken..]`.
    pending: Vec<u8>,
    taken: usize,
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
                pending: Vec::new(),
                taken: 0,
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
        let queued = out.pending.len() > out.taken;
        if queued != self.has_queued() {
            self.queued
                .store(queued, std::sync::atomic::Ordering::Relaxed);
        }
    }

    /// Appends `frame` whole if there is room (or `now`), then writes what
    /// the socket takes. An `Err` is a connection that failed for good.
    pub fn offer(&self, frame: &[u8], now: bool) -> std::io::Result<Offered> {
        self.offer_parts(&[frame], now)
    }

    /// [`Self::offer`] of the bytes of `parts`, one after the other: one
    /// frame built of pieces (a write's head and its data, where the data
    /// lies), or several frames, taken whole or not at all together.
    pub fn offer_parts(&self, parts: &[&[u8]], now: bool) -> std::io::Result<Offered> {
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut out = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        out.flush()?;
        let held = out.pending.len() - out.taken;
        if !now && held > 0 && held + total > OUTBOX_MAX {
            return Ok(Offered::Full);
        }
        // Nothing queued: the socket takes what it can straight from the
        // parts (one system call for all of them), and only the rest is
        // copied into the outbox.
        let sent = if held == 0 {
            out.write_parts(parts)?
        } else {
            0
        };
        for rest in unsent(parts, sent) {
            out.pending.extend_from_slice(rest);
        }
        out.flush()?;
        self.note_queued(&out);
        Ok(if out.pending.is_empty() {
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
        Ok(out.pending.len() - out.taken)
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
        let out = self.outbox.lock().unwrap_or_else(|e| e.into_inner());
        out.pending.len() - out.taken
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

/// `sendmsg` of `iov` with `MSG_NOSIGNAL`: a peer that closed its end is
/// an error (`EPIPE`), not a SIGPIPE that would end a C program linked
/// against us (Rust programs ignore the signal; C programs do not).
/// `writev`, which `Write::write_vectored` uses, has no such flag.
fn send_vectored(stream: &TcpStream, iov: &[libc::iovec]) -> std::io::Result<usize> {
    // SAFETY: an all-zero msghdr is valid (no name, no control data).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov.as_ptr() as *mut libc::iovec;
    msg.msg_iovlen = iov.len() as _;
    // SAFETY: `msg` points at `iov`, whose entries point into slices that
    // live across the call; sendmsg only reads them. The descriptor is
    // the stream's, open while `stream` is borrowed.
    let n = unsafe { libc::sendmsg(stream.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(std::io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// Has the kernel declare the connection dead when the peer's host leaves
/// data unacknowledged, or keep-alive probes unanswered, for `timeout`:
/// the heartbeat of decision 0018. The peer's kernel answers both, so a
/// stopped process does not trip it, while a host that is powered off or
/// cut from the network does; the progress engine then sees the
/// connection fail and marks the rank dead.
pub(crate) fn watch_liveness(stream: &TcpStream, timeout: Duration) -> Result<()> {
    let ms = timeout.as_millis().clamp(1000, u32::MAX as u128) as libc::c_int;
    // Probe after a third of the time idle, then every sixth: the user
    // timeout, not the probe count, decides.
    let idle = (ms / 3000).max(1);
    let interval = (ms / 6000).max(1);
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
            Err(Error::io(
                "setting the liveness options of a control socket",
                std::io::Error::last_os_error(),
            ))
        }
    };
    set(libc::SOL_SOCKET, libc::SO_KEEPALIVE, 1)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPIDLE, idle)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPINTVL, interval)?;
    set(libc::IPPROTO_TCP, libc::TCP_KEEPCNT, 6)?;
    set(libc::IPPROTO_TCP, libc::TCP_USER_TIMEOUT, ms)
}

impl Outbox {
    /// Writes from the front of the pending bytes until the socket is full.
    fn flush(&mut self) -> std::io::Result<()> {
        if let Some(kind) = self.broken {
            return Err(kind.into());
        }
        while self.taken < self.pending.len() {
            match (&*self.stream).write(&self.pending[self.taken..]) {
                Ok(0) => return self.fail(std::io::ErrorKind::WriteZero),
                Ok(n) => self.taken += n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return self.fail(e.kind()),
            }
        }
        if self.taken == self.pending.len() {
            self.pending.clear();
            self.taken = 0;
        } else if self.taken > OUTBOX_MAX {
            self.pending.drain(..self.taken);
            self.taken = 0;
        }
        Ok(())
    }

    /// Writes what the socket takes of the bytes of `parts` now (nothing
    /// queued before); returns how many it took.
    fn write_parts(&mut self, parts: &[&[u8]]) -> std::io::Result<usize> {
        if let Some(kind) = self.broken {
            return Err(kind.into());
        }
        let total: usize = parts.iter().map(|p| p.len()).sum();
        let mut sent = 0;
        while sent < total {
            let rests = unsent(parts, sent).map(|rest| libc::iovec {
                iov_base: rest.as_ptr() as *mut libc::c_void,
                iov_len: rest.len(),
            });
            // On the stack for the usual few parts (owed answers, a
            // write's head, its data).
            let mut few = [libc::iovec {
                iov_base: std::ptr::null_mut(),
                iov_len: 0,
            }; 4];
            let many: Vec<libc::iovec>;
            let iov: &[libc::iovec] = if parts.len() <= few.len() {
                let mut n = 0;
                for v in rests {
                    few[n] = v;
                    n += 1;
                }
                &few[..n]
            } else {
                many = rests.collect();
                &many
            };
            match send_vectored(&self.stream, iov) {
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
        self.pending = Vec::new();
        self.taken = 0;
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
