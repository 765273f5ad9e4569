//! Accepting the other ranks at start-up without letting any connection
//! hold up the others.
//!
//! A listener of a starting job (rank 0's rendezvous, every rank's control
//! port) can be reached by anyone who can reach the port. Each connection
//! it accepts is challenged ([`super::auth`]) with a deadline of its own,
//! [`HANDSHAKE_TIMEOUT`], and all pending handshakes advance together on
//! non-blocking sockets under one `poll`: a connection that sends nothing,
//! sends garbage or cannot prove the job key is dropped with a warning,
//! and acceptance goes on meanwhile.

use super::auth;
use crate::model::error::{Error, Result};
use serde::de::DeserializeOwned;
use std::io::{ErrorKind, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How long one connection may take to answer the challenge. A rank that
/// connects answers at once (it is waiting for the challenge); this only
/// bounds what a stranger can cost: a socket, for this long.
pub(crate) const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(5);

/// Handshakes pending at once; a new connection beyond them evicts the
/// oldest (which, given the deadline, is the likeliest to be a stranger).
pub(crate) const MAX_PENDING: usize = 64;

/// The largest answer accepted before the key is proved: an endpoint is a
/// few hundred bytes.
const MAX_ANSWER: usize = 64 << 10;

/// One accepted connection that has not yet proved the key. The progress
/// engine advances these for connections made on first use, the way
/// [`accept_authenticated`] does at start-up.
pub(crate) struct Pending {
    stream: TcpStream,
    peer: String,
    nonce: [u8; 32],
    /// The challenge frame, and how much of it is sent.
    out: Vec<u8>,
    sent: usize,
    /// The answer frame so far (read exactly, never past its end: what the
    /// peer sends after it belongs to whoever takes the connection over).
    buf: Vec<u8>,
    until: Instant,
}

/// What a handshake step came to.
pub(crate) enum Step {
    /// Waiting for the peer.
    Wait,
    /// The answer frame's body.
    Answered(Vec<u8>),
    /// Not a rank of this job (the reason).
    Drop(String),
}

impl Pending {
    /// Starts the handshake of an accepted connection, to end by `until`.
    pub(crate) fn new(stream: TcpStream, until: Instant) -> Result<Pending> {
        stream
            .set_nonblocking(true)
            .and_then(|_| stream.set_nodelay(true))
            .map_err(|e| Error::io("configuring an accepted connection", e))?;
        let peer = stream
            .peer_addr()
            .map(|a| a.to_string())
            .unwrap_or_else(|_| "?".into());
        let nonce = auth::new_nonce();
        let out = crate::net::frame::encode(&nonce.to_vec())?;
        Ok(Pending {
            stream,
            peer,
            nonce,
            out,
            sent: 0,
            buf: Vec::with_capacity(256),
            until,
        })
    }

    /// What to poll the connection for (the challenge to send, or the answer).
    pub(crate) fn events(&self) -> libc::c_short {
        if self.sent < self.out.len() {
            libc::POLLOUT
        } else {
            libc::POLLIN
        }
    }

    /// How many more bytes the answer frame needs.
    fn need(&self) -> std::result::Result<usize, String> {
        if self.buf.len() < 4 {
            return Ok(4 - self.buf.len());
        }
        let len = u32::from_le_bytes([self.buf[0], self.buf[1], self.buf[2], self.buf[3]]) as usize;
        if len > MAX_ANSWER {
            return Err(format!("announced an answer of {len} bytes"));
        }
        Ok(4 + len - self.buf.len())
    }

    /// Sends the challenge and reads the answer as far as the socket allows.
    pub(crate) fn advance(&mut self) -> Step {
        while self.sent < self.out.len() {
            match self.stream.write(&self.out[self.sent..]) {
                Ok(0) => return Step::Drop("closed the connection".into()),
                Ok(n) => self.sent += n,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Step::Drop(format!("sending the challenge: {e}")),
            }
        }
        let mut chunk = [0u8; 4096];
        loop {
            let need = match self.need() {
                Ok(0) => return Step::Answered(self.buf.split_off(4)),
                Ok(n) => n.min(chunk.len()),
                Err(why) => return Step::Drop(why),
            };
            match self.stream.read(&mut chunk[..need]) {
                Ok(0) => return Step::Drop("closed the connection without answering".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return Step::Wait,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Step::Drop(format!("reading the answer: {e}")),
            }
        }
    }
}

impl Pending {
    /// When the handshake must have ended.
    pub(crate) fn until(&self) -> Instant {
        self.until
    }

    /// The socket.
    pub(crate) fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// The peer's address, for logs.
    pub(crate) fn peer(&self) -> &str {
        &self.peer
    }

    /// Checks the answer `body` and returns the connection (non-blocking)
    /// with the peer's authenticated payload.
    pub(crate) fn finish<T: DeserializeOwned>(
        self,
        body: &[u8],
        key: &[u8],
        purpose: &str,
    ) -> Result<(TcpStream, T)> {
        let v = auth::verify::<T>(key, purpose, &self.nonce, body, &self.peer)?;
        Ok((self.stream, v))
    }
}

/// Accepts connections on `listener` until `want` of them have proved the
/// job key for `purpose`, each answering with a payload that `admit` takes
/// (an error of `admit` ends the start-up: it comes from a key holder).
/// Puts them in `done` in the order they completed, streams still
/// non-blocking; on an error (the deadline passed) `done` holds those
/// accepted so far, for the caller to tell why the start-up ends.
///
/// At most `max_pending` handshakes are pending at once (at least
/// [`MAX_PENDING`]); a connection beyond them evicts the oldest. Rank 0's
/// rendezvous passes the number of ranks still to come: every rank of a
/// large job may be at its door at once (1,023 within a second under
/// `srun`), and evicting ranks the job is waiting for fails them.
#[allow(clippy::too_many_arguments)]
pub(crate) fn accept_authenticated<T: DeserializeOwned>(
    listener: &TcpListener,
    key: &[u8],
    purpose: &str,
    want: usize,
    max_pending: usize,
    deadline: Instant,
    what: &str,
    mut admit: impl FnMut(&T) -> Result<()>,
    done: &mut Vec<(TcpStream, T)>,
) -> Result<()> {
    listener
        .set_nonblocking(true)
        .map_err(|e| Error::io("configuring a listener", e))?;
    let max_pending = max_pending.max(MAX_PENDING);
    let mut pending: Vec<Pending> = Vec::new();
    // A flood of strangers costs a few lines and a count (decision 0034).
    let mut dropped =
        crate::net::log_tally::Tally::new("connections dropped at a start-up listener");
    while done.len() < want {
        let now = Instant::now();
        if now >= deadline {
            return Err(Error::Bootstrap(format!("timed out waiting for {what}")));
        }
        pending.retain(|p| {
            if now >= p.until {
                dropped.warn(format_args!(
                    "{what}: a connection from {} did not answer the challenge within {:?}; dropped",
                    p.peer, HANDSHAKE_TIMEOUT
                ));
            }
            now < p.until
        });
        let wake = pending.iter().map(|p| p.until).fold(deadline, Instant::min);
        let mut fds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .chain(pending.iter().map(|p| libc::pollfd {
                fd: p.stream.as_raw_fd(),
                events: p.events(),
                revents: 0,
            }))
            .collect();
        let ms = wake
            .saturating_duration_since(now)
            .as_micros()
            .div_ceil(1000)
            .min(i32::MAX as u128) as i32;
        // SAFETY: `fds` is a valid array of `fds.len()` pollfds, alive across
        // the call; its descriptors belong to `listener` and `pending`.
        let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ms) };
        if n <= 0 {
            // Timeout (expiry is handled above) or EINTR.
            continue;
        }
        // Handshakes in progress, back to front so that removal keeps the
        // indices of those still to visit.
        for i in (0..pending.len()).rev() {
            if fds[i + 1].revents == 0 {
                continue;
            }
            match pending[i].advance() {
                Step::Wait => {}
                Step::Drop(why) => {
                    let p = pending.remove(i);
                    dropped.warn(format_args!(
                        "{what}: a connection from {} {why}; dropped",
                        p.peer
                    ));
                }
                Step::Answered(body) => {
                    let p = pending.remove(i);
                    match auth::verify::<T>(key, purpose, &p.nonce, &body, &p.peer) {
                        Ok(v) => {
                            admit(&v)?;
                            done.push((p.stream, v));
                        }
                        Err(e) => dropped.warn(format_args!("{what}: {e}")),
                    }
                }
            }
        }
        if fds[0].revents == 0 {
            continue;
        }
        loop {
            match listener.accept() {
                Ok((s, _)) => {
                    if pending.len() >= max_pending {
                        let old = pending.remove(0);
                        dropped.warn(format_args!(
                            "{what}: {max_pending} handshakes pending; dropped the oldest, from {}",
                            old.peer
                        ));
                    }
                    // The challenge goes out when poll finds the socket
                    // writable, at once.
                    let until = (Instant::now() + HANDSHAKE_TIMEOUT).min(deadline);
                    pending.push(Pending::new(s, until)?);
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                Err(e)
                    if matches!(
                        e.kind(),
                        ErrorKind::Interrupted
                            | ErrorKind::ConnectionAborted
                            | ErrorKind::ConnectionReset
                    ) => {}
                Err(e) => return Err(Error::io(format!("accepting {what}"), e)),
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Barrier};

    /// More ranks than [`MAX_PENDING`] at the door at once (as under
    /// `srun`, which starts every task within a second), none answering
    /// its challenge until all have connected: with a cap as large as the
    /// burst, every one is admitted and none is evicted.
    #[test]
    fn a_burst_of_more_than_max_pending_is_admitted_whole_under_a_cap_as_large() {
        let n = MAX_PENDING + 36;
        let listener = TcpListener::bind("127.0.0.1:0").expect("binding");
        let addr = listener.local_addr().expect("its address");
        let key = vec![7u8; 32];
        let connected = Arc::new(Barrier::new(n));
        let clients: Vec<_> = (0..n as u32)
            .map(|i| {
                let (key, connected) = (key.clone(), connected.clone());
                std::thread::spawn(move || -> Result<()> {
                    let mut s = TcpStream::connect(addr).map_err(|e| Error::io("connecting", e))?;
                    connected.wait();
                    auth::answer(&mut s, &key, "burst", &i)
                })
            })
            .collect();
        let mut done: Vec<(TcpStream, u32)> = Vec::new();
        let mut seen = vec![false; n];
        accept_authenticated(
            &listener,
            &key,
            "burst",
            n,
            n,
            Instant::now() + Duration::from_secs(60),
            "the burst",
            |&i: &u32| {
                assert!(!seen[i as usize], "{i} admitted twice");
                seen[i as usize] = true;
                Ok(())
            },
            &mut done,
        )
        .expect("every client of the burst proves the key");
        assert_eq!(done.len(), n);
        for c in clients {
            c.join().expect("client thread").expect("client answered");
        }
    }
}
