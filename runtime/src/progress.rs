//! The progress engine: one thread per rank serving what cannot be one-sided.
//!
//! It reads the control connections of every peer (one `epoll` through
//! `mio`), maps segments peers register, answers pings, applies the TCP
//! transport's requests, and notices peers that go away: a connection that
//! closes without a goodbye marks its rank corrupt in the error-state
//! vector, tells every connected peer (`Peers::mark_gone`) and wakes every
//! waiter, so calls that need that rank fail with an error naming it
//! instead of hanging. It blocks in `epoll_wait` when there is nothing to
//! do: no core is burnt.
//!
//! It also serves this rank's control listener: a peer that sends to this
//! rank for the first time connects there (decision 0022), and the engine
//! runs the key handshake of each such connection without blocking
//! (`net::handshake::Pending`, a deadline of its own per connection), so a
//! stranger that connects and says nothing costs nothing but a socket for a
//! few seconds. Connections this rank's own threads make reach the engine
//! through `Peers::made_connections` and its waker.

use crate::base::Base;
use crate::model::error::{Error, Result};
use crate::model::ids::{Rank, RankState};
use crate::net::connection::{ControlOut, Urgency};
use crate::net::frame::Message;
use crate::net::handshake::Pending;
use crate::net::handshake::{Step, HANDSHAKE_TIMEOUT};
use crate::net::reader::{read_available, FrameHandler, Reader};
use crate::transport::tcp::serve as tcp;
use crate::transport::tcp::serve::Connection;
use crate::waiter_progress::WaiterProgress;
use mio::unix::SourceFd;
use mio::{Events, Interest, Poll, Token, Waker};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

const WAKER: Token = Token(usize::MAX);
/// How long the engine naps between looks while waiters read the TCP
/// peers' connections themselves (`waiter_progress.rs`). Each look is a
/// wake-up that takes a core from a spinning waiter where cores are few:
/// on 2 vCPUs an 8-byte ping-pong between two namespaces measured 29-32 us
/// with 100 us naps and 16 us with 1 ms.
const QUIET_NAP: Duration = Duration::from_micros(1000);
/// How long the engine polls without sleeping after it handled something
/// (where the host has a core for it): about a network round trip.
const ENGINE_SPIN: Duration = Duration::from_micros(50);
const LISTENER: Token = Token(usize::MAX - 1);
/// Tokens of handshakes in progress start here (connections below).
const PENDING: usize = 1 << 40;
/// Handshakes the engine runs at once, as at start-up (decision 0016).
const MAX_PENDING: usize = crate::net::handshake::MAX_PENDING;
/// How long a pending handshake is safe from eviction by a newcomer: a
/// rank that connects answers the challenge at once, in microseconds to
/// milliseconds; this leaves room for a loaded host (decision 0034).
const EVICTABLE_AFTER: Duration = Duration::from_secs(1);
/// Connections the engine takes from its listener per turn of its loop,
/// so that a flood of them cannot keep it from its other work.
const ACCEPTS_PER_TURN: usize = 64;

/// Handle on the running engine thread.
#[derive(Debug)]
pub(crate) struct ProgressEngine {
    waker: Arc<Waker>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

/// What the engine reads connections for and reports to: the rank's
/// context as the front implements it (`context.rs`). A type parameter,
/// so the frames of a read reach their handler with no indirect call.
pub(crate) trait EngineHost:
    FrameHandler<Direct = tcp::DirectPut, Answers = tcp::Settles> + Send + Sync + 'static
{
    /// What every service reads (peers, configuration, transports).
    fn base(&self) -> &Base;
    /// The connections that waiting threads read too.
    fn waiter_progress(&self) -> &WaiterProgress;
    /// Sends the answers waiters left owed to peers, if any.
    fn send_owed_answers(&self);
    /// Reads every network transport's completions and handles them
    /// (waiting for a thread that is doing so): called before a rank that
    /// said goodbye is marked terminated, so that the notifications it
    /// sent before its goodbye (flushed to the provider, maybe not yet
    /// handled: libfabric's notifications carried as remote CQ data) are
    /// set before anyone learns of its end.
    fn drain_network(&self);
    /// Whether peers' requests are in flight on a GPU apply stream (the
    /// engine then polls instead of sleeping).
    fn gpu_work_pending(&self) -> bool;
}

/// Everything the engine thread owns.
struct Engine<H> {
    poll: Poll,
    conns: Vec<Option<Arc<Connection>>>,
    listener: Option<TcpListener>,
    pending: Vec<Option<Pending>>,
    inner: Arc<H>,
    stop: Arc<AtomicBool>,
    /// Connections whose socket reported bytes while a waiter was reading
    /// them (`waiter_progress.rs`): tried again at once, since the
    /// waiter may have stopped reading just before those bytes came and
    /// the edge-triggered `epoll` will not report them again.
    busy: Vec<usize>,
    /// The `busy` being tried again (kept to reuse its allocation: a
    /// waiter holding a connection is the common case, not a rare one).
    retry: Vec<usize>,
    /// Ranks whose every connection ended after a goodbye while another
    /// connection was still in its handshake: that one may be theirs and
    /// hold frames sent before the goodbye. Marked terminated once no
    /// handshake is pending (see `close`).
    terminating: Vec<Rank>,
    /// The heartbeat's timing (decision 0033).
    liveness: crate::net::connection::Liveness,
    /// When the engine next looks for connections that need a heartbeat.
    next_beat: Instant,
    /// The listener may hold more connections than the last turn took.
    listener_ready: bool,
    /// Warnings about connections dropped at the control listener.
    strangers: crate::net::log_tally::Tally,
}

impl ProgressEngine {
    /// Starts the thread over the control connections made at start-up and
    /// this rank's control listener.
    pub fn start<H: EngineHost>(
        inner: Arc<H>,
        readers: Vec<(Rank, Arc<TcpStream>)>,
        listener: TcpListener,
    ) -> Result<ProgressEngine> {
        let poll = Poll::new().map_err(|e| Error::io("creating the progress engine's poll", e))?;
        let waker = Arc::new(
            Waker::new(poll.registry(), WAKER)
                .map_err(|e| Error::io("creating the progress engine's waker", e))?,
        );
        listener
            .set_nonblocking(true)
            .map_err(|e| Error::io("configuring the control listener", e))?;
        poll.registry()
            .register(
                &mut SourceFd(&listener.as_raw_fd()),
                LISTENER,
                Interest::READABLE,
            )
            .map_err(|e| Error::io("registering the control listener", e))?;
        let _ = inner.base().peers.engine_waker.set(waker.clone());
        let stop = Arc::new(AtomicBool::new(false));
        let mut engine = Engine {
            poll,
            conns: Vec::with_capacity(readers.len()),
            listener: Some(listener),
            pending: Vec::new(),
            inner: inner.clone(),
            stop: stop.clone(),
            busy: Vec::new(),
            retry: Vec::new(),
            terminating: Vec::new(),
            liveness: crate::net::connection::Liveness::new(inner.base().config.peer_timeout),
            next_beat: Instant::now(),
            listener_ready: false,
            strangers: crate::net::log_tally::Tally::new(
                "connections dropped at the control listener",
            ),
        };
        for (rank, s) in readers {
            engine.add(rank, s)?;
        }
        let thread = std::thread::Builder::new()
            .name(format!("gaspi-progress-{}", inner.base().rank.0))
            .spawn(move || {
                crate::net::peers::this_is_the_engine_thread();
                engine.run()
            })
            .map_err(|e| Error::io("starting the progress engine", e))?;
        Ok(ProgressEngine {
            waker,
            stop,
            thread: Some(thread),
        })
    }

    /// Stops and joins the thread.
    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::Release);
        let _ = self.waker.wake();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for ProgressEngine {
    fn drop(&mut self) {
        self.stop();
    }
}

impl<H: EngineHost> Engine<H> {
    /// Starts reading a control connection to `rank`.
    fn add(&mut self, rank: Rank, stream: Arc<TcpStream>) -> Result<()> {
        stream
            .set_nonblocking(true)
            .map_err(|e| Error::io("configuring a control socket", e))?;
        let i = self.conns.len();
        self.poll
            .registry()
            .register(
                &mut SourceFd(&stream.as_raw_fd()),
                Token(i),
                Interest::READABLE | Interest::WRITABLE,
            )
            .map_err(|e| Error::io("registering a control socket", e))?;
        let conn = Arc::new(Connection::new(rank, stream));
        // A peer reached over TCP: its requests and answers are what this
        // rank's waiters wait for, so they may read it too.
        if self.inner.base().transport_name(rank) == "tcp" {
            self.inner.waiter_progress().watch(&conn);
        }
        self.conns.push(Some(conn));
        Ok(())
    }

    fn run(mut self) {
        let mut events = Events::with_capacity(64);
        // After work, poll without sleeping for a short while before
        // blocking: the next request of a conversation (a ping-pong, a
        // stream of writes) then costs no wake-up. Only where the host has
        // a core for it beside the application's threads.
        let spin = if self.inner.base().config.local_threads_fit_cores(2) {
            ENGINE_SPIN
        } else {
            Duration::ZERO
        };
        let mut spin_until = Instant::now();
        loop {
            if self.stop.load(Ordering::Acquire) {
                self.say_goodbye();
                return;
            }
            self.beat();
            let waiters = &self.inner.waiter_progress();
            // While waiters read the TCP peers' sockets themselves, do not
            // sit in `epoll`: every packet would wake this thread (on a
            // busy host, in the middle of a waiter's time slice) to find
            // its bytes already taken. Look every QUIET_NAP instead, for
            // everything else (other connections, handshakes, answers a
            // waiter left owed).
            let quiet = waiters.has_pollers();
            if quiet {
                std::thread::sleep(QUIET_NAP);
            }
            // Wake for the first handshake to expire, if any, and for the
            // next look for quiet connections.
            let now = Instant::now();
            let timeout = self
                .pending
                .iter()
                .flatten()
                .map(|p| p.until().saturating_duration_since(now) + Duration::from_millis(1))
                .chain(std::iter::once(
                    self.next_beat.saturating_duration_since(now),
                ))
                .min();
            // A waiter reading the sockets itself (`waiter_progress.rs`)
            // makes the engine's spin redundant: it would only take a core.
            // Peers' requests in flight on a GPU apply stream are answered
            // as soon as the stream ran them: look again at once.
            let timeout = if quiet
                || !self.busy.is_empty()
                || self.listener_ready
                || now < spin_until
                || self.inner.gpu_work_pending()
            {
                Some(Duration::ZERO)
            } else {
                timeout
            };
            // About to sleep: a waiter that leaves answers owed from now
            // on wakes us; what was left before, we send first.
            let asleep = timeout != Some(Duration::ZERO) && waiters.engine_sleeps();
            let timeout = if asleep {
                timeout
            } else {
                Some(Duration::ZERO)
            };
            let polled = self.poll.poll(&mut events, timeout);
            waiters.engine_wakes();
            self.inner.send_owed_answers();
            if let Err(e) = polled {
                if e.kind() == std::io::ErrorKind::Interrupted {
                    continue;
                }
                tracing::error!("progress engine: poll failed: {e}");
                return;
            }
            self.expire_handshakes();
            if self.listener_ready {
                self.accept();
            }
            std::mem::swap(&mut self.busy, &mut self.retry);
            for k in 0..self.retry.len() {
                let i = self.retry[k];
                self.serve(i, false);
            }
            self.retry.clear();
            if !events.is_empty() {
                spin_until = Instant::now() + spin;
            }
            for ev in events.iter() {
                match ev.token() {
                    WAKER => {
                        self.take_made_connections();
                        self.reap_ended();
                        self.take_relayed_ends();
                        if let Some(asked) = self.inner.base().peers.sweeps.asked() {
                            self.sweep();
                            self.inner.base().peers.sweeps.done(asked);
                        }
                    }
                    LISTENER => self.accept(),
                    Token(t) if t >= PENDING => self.advance_handshake(t - PENDING),
                    Token(i) => self.serve(i, ev.is_writable()),
                }
            }
            self.settle_terminating();
        }
    }

    /// Every [`Liveness::check`](crate::net::connection::Liveness): a heartbeat
    /// on each connection that nothing was sent on for a beat, so that a
    /// byte is always in flight soon after a peer's host goes silent
    /// (decision 0033): on the connection this rank sends on, through its
    /// outbox (one that holds bytes has them in flight already); on one
    /// that only carries the peer's frames, directly.
    fn beat(&mut self) {
        let now = Instant::now();
        if now < self.next_beat {
            return;
        }
        self.next_beat = now + self.liveness.check;
        self.strangers.flush_if_due();
        // A connection an earlier accept could not take (out of
        // descriptors) is tried again now.
        if self.listener.is_some() {
            self.accept();
        }
        let inner = &*self.inner;
        let Ok(frame) = crate::net::frame::encode(&Message::Heartbeat) else {
            return;
        };
        for conn in self.conns.iter().flatten() {
            let r = conn.rank;
            if !inner.base().peers.peer_healthy(r) {
                continue;
            }
            match inner.base().peers[r].control.get() {
                Some(out) if out.is(&conn.stream) => {
                    let quiet = out
                        .since_last_sent()
                        .is_some_and(|q| q >= self.liveness.beat);
                    if quiet && !out.has_queued() {
                        let _ =
                            inner
                                .base()
                                .peers
                                .send_frame_by(r, &frame, Urgency::Now, "heartbeat");
                    }
                }
                _ => {
                    crate::net::connection::beat_if_quiet(&conn.stream, self.liveness.beat, &frame)
                }
            }
        }
    }

    fn serve(&mut self, i: usize, writable: bool) {
        let inner = &*self.inner;
        let Some(conn) = self.conns.get(i).and_then(|c| c.clone()) else {
            return;
        };
        if writable {
            // Room again after a write found the socket full: send what
            // the outbox holds (`net/connection.rs`). A failure shows on the
            // reading side too, which decides what it means.
            if let Some(out) = inner.base().peers[conn.rank].control.get() {
                let _ = out.flush();
            }
        }
        // Never wait for a waiter that reads this connection: try again
        // on the next turn of the loop.
        let Some(mut state) = conn.try_lock() else {
            if !self.busy.contains(&i) {
                self.busy.push(i);
            }
            return;
        };
        if state.ended || read_available(&conn, &mut state, inner, Reader::Engine) {
            let said_goodbye = state.said_goodbye;
            drop(state);
            self.close(i, said_goodbye);
        }
    }

    /// Stops reading connection `i`, which ended; its rank is gone.
    fn close(&mut self, i: usize, said_goodbye: bool) {
        let Some(conn) = self.conns.get_mut(i).and_then(Option::take) else {
            return;
        };
        self.inner.waiter_progress().unwatch(&conn);
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&conn.stream.as_raw_fd()));
        // Two ranks that connected to each other at once keep two
        // connections, each carrying one direction's frames (and both a
        // goodbye at the end). A rank that ended in order is marked so only
        // once the last of its connections has ended: the other may still
        // hold frames it sent before its goodbye (a barrier's last signal),
        // which survivors must see before they learn it is gone. An end
        // without a goodbye is a death, reported at once.
        // The other may also be one that this rank's threads made and the
        // engine has not taken yet, or one still in its handshake here.
        if said_goodbye {
            self.take_made_connections();
            // Deaths first: a rank that ended in order may have ended
            // because of a death this rank can already see (its end
            // overtook the dead rank's closing, or the news of it). Marked
            // first, that death is what collectives name (decision 0018).
            self.decide_deaths_first(i);
        }
        let others_open = self.conns.iter().flatten().any(|c| c.rank == conn.rank);
        if said_goodbye && others_open {
            tracing::debug!(
                "{}: one of its connections ended after a goodbye; waiting for the other",
                conn.rank
            );
            return;
        }
        if said_goodbye && self.pending.iter().any(Option::is_some) {
            tracing::debug!(
                "{}: its connections ended after a goodbye; waiting for the handshakes in progress",
                conn.rank
            );
            if !self.terminating.contains(&conn.rank) {
                self.terminating.push(conn.rank);
            }
            return;
        }
        let state = if said_goodbye {
            self.inner.drain_network();
            RankState::Terminated
        } else {
            RankState::Corrupt
        };
        self.inner.base().peers.mark_gone(conn.rank, state);
    }

    /// Takes the orderly ends other ranks reported of ranks not connected
    /// here when the news came; decided with those `close` left waiting.
    fn take_relayed_ends(&mut self) {
        for rank in take_all(&self.inner.base().peers.relayed_ends) {
            if self.inner.base().peers[rank].control.get().is_some() {
                tracing::debug!("{rank}: reported terminated; its own connection will say");
            } else if !self.terminating.contains(&rank) {
                self.terminating.push(rank);
            }
        }
    }

    /// Marks terminated the ranks `close` (or a third rank's report) left
    /// waiting for handshakes, once none is pending: a handshake that was
    /// theirs made a connection of theirs, whose own end decides (then
    /// they are dropped here).
    fn settle_terminating(&mut self) {
        if self.terminating.is_empty() || self.pending.iter().any(Option::is_some) {
            return;
        }
        self.decide_deaths_first(usize::MAX);
        self.inner.drain_network();
        for rank in std::mem::take(&mut self.terminating) {
            if !self.conns.iter().flatten().any(|c| c.rank == rank) {
                self.inner
                    .base()
                    .peers
                    .mark_gone(rank, RankState::Terminated);
            }
        }
    }

    /// Reads every connection but `except` and marks dead the ranks whose
    /// connection is found ended without a goodbye; one that ended after
    /// a goodbye is closed on the next turn. Waits for a waiter that reads
    /// a connection (it holds it for one non-blocking read).
    fn decide_deaths_first(&mut self, except: usize) {
        for j in 0..self.conns.len() {
            if j == except {
                continue;
            }
            let Some(conn) = self.conns[j].clone() else {
                continue;
            };
            let mut st = conn.lock();
            if !(st.ended || read_available(&conn, &mut st, &*self.inner, Reader::Engine)) {
                continue;
            }
            st.ended = true;
            let said_goodbye = st.said_goodbye;
            drop(st);
            if !said_goodbye {
                self.close(j, false);
            } else if !self.busy.contains(&j) {
                self.busy.push(j);
            }
        }
    }

    /// What `Gaspi::term` asks before it says goodbye: every connection
    /// read and every end found decided, so that the deaths this rank can
    /// see are marked, and passed on to its peers, ahead of its goodbye
    /// (a survivor that ends because a call named a dead rank must not
    /// leave its peers to take its own orderly end for the first failure).
    fn sweep(&mut self) {
        self.take_made_connections();
        self.reap_ended();
        self.decide_deaths_first(usize::MAX);
        for j in std::mem::take(&mut self.busy) {
            self.serve(j, false);
        }
        self.settle_terminating();
    }

    /// Closes the connections a waiter found ended (it wakes the engine).
    fn reap_ended(&mut self) {
        for i in 0..self.conns.len() {
            let ended = self.conns[i].as_ref().map(|c| {
                let st = c.lock();
                (st.ended, st.said_goodbye)
            });
            if let Some((true, said_goodbye)) = ended {
                self.close(i, said_goodbye);
            }
        }
    }

    /// Registers the connections this rank's threads made.
    fn take_made_connections(&mut self) {
        for (rank, stream) in take_all(&self.inner.base().peers.made_connections) {
            if let Err(e) = self.add(rank, stream) {
                tracing::warn!("cannot read the connection to {rank}: {e}");
            }
        }
    }

    /// Accepts waiting connections (at most [`ACCEPTS_PER_TURN`]; more
    /// on the next turn) and starts their handshakes, at most
    /// [`MAX_PENDING`] at once (decision 0034).
    fn accept(&mut self) {
        self.listener_ready = false;
        for _ in 0..ACCEPTS_PER_TURN {
            let Some(listener) = &self.listener else {
                return;
            };
            match listener.accept() {
                Ok((s, addr)) => self.admit(s, addr),
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => return,
                Err(e)
                    if matches!(
                        e.kind(),
                        std::io::ErrorKind::Interrupted
                            | std::io::ErrorKind::ConnectionAborted
                            | std::io::ErrorKind::ConnectionReset
                    ) => {}
                Err(e) => {
                    // Out of descriptors, most likely: the connection
                    // waits in the backlog; tried again at the next beat.
                    self.strangers
                        .warn(format_args!("control listener: accepting: {e}"));
                    return;
                }
            }
        }
        self.listener_ready = true;
    }

    /// Starts the handshake of an accepted connection. With
    /// [`MAX_PENDING`] handshakes pending, one makes room: the oldest of
    /// the address that holds the most of them when the newcomer comes
    /// from another address (a flood from one place cannot lock others
    /// out), else the oldest of all if it has had [`EVICTABLE_AFTER`] to
    /// answer (a rank answers at once); otherwise the newcomer is closed at
    /// once (a rank tries again, `bootstrap::connect_peer`). A stranger
    /// thus holds at most `MAX_PENDING` descriptors, each for at most the
    /// handshake deadline (decision 0034).
    fn admit(&mut self, s: TcpStream, addr: std::net::SocketAddr) {
        if self.pending.iter().flatten().count() >= MAX_PENDING {
            let Some(slot) = self.room_for(addr.ip()) else {
                self.strangers.warn(format_args!(
                    "control listener: {MAX_PENDING} handshakes pending; a connection from {addr} closed at once"
                ));
                return;
            };
            // It may have answered since it was last looked at.
            self.advance_handshake(slot);
            if let Some(p) = self.drop_pending(slot) {
                self.strangers.warn(format_args!(
                    "control listener: {MAX_PENDING} handshakes pending; dropped one from {} for one from {addr}",
                    p.peer()
                ));
            }
        }
        let until = Instant::now() + HANDSHAKE_TIMEOUT;
        let p = match Pending::new(s, until) {
            Ok(p) => p,
            Err(e) => {
                self.strangers.warn(format_args!("control listener: {e}"));
                return;
            }
        };
        let slot = match self.pending.iter().position(Option::is_none) {
            Some(k) => k,
            None => {
                self.pending.push(None);
                self.pending.len() - 1
            }
        };
        let registered = self.poll.registry().register(
            &mut SourceFd(&p.stream().as_raw_fd()),
            Token(PENDING + slot),
            Interest::READABLE | Interest::WRITABLE,
        );
        if let Err(e) = registered {
            self.strangers.warn(format_args!(
                "control listener: registering a connection: {e}"
            ));
            return;
        }
        self.pending[slot] = Some(p);
        self.advance_handshake(slot);
    }

    /// The pending handshake to drop for a newcomer from `from` (see
    /// [`Self::admit`]), if any may be.
    fn room_for(&self, from: std::net::IpAddr) -> Option<usize> {
        let ip_of = |p: &Pending| {
            p.peer()
                .parse::<std::net::SocketAddr>()
                .ok()
                .map(|a| a.ip())
        };
        let live: Vec<(usize, Option<std::net::IpAddr>, Instant)> = (0..self.pending.len())
            .filter_map(|k| {
                let p = self.pending[k].as_ref()?;
                Some((k, ip_of(p), p.until()))
            })
            .collect();
        let mut busiest: Option<(Option<std::net::IpAddr>, usize)> = None;
        for &(_, ip, _) in &live {
            let n = live.iter().filter(|e| e.1 == ip).count();
            if busiest.is_none_or(|(_, m)| n > m) {
                busiest = Some((ip, n));
            }
        }
        let oldest_of = |ip: Option<Option<std::net::IpAddr>>| {
            live.iter()
                .filter(|e| ip.is_none_or(|ip| e.1 == ip))
                .min_by_key(|e| e.2)
                .copied()
        };
        match busiest {
            Some((ip, n)) if n > 1 && ip != Some(from) => oldest_of(Some(ip)).map(|e| e.0),
            _ => oldest_of(None)
                .filter(|e| {
                    let started = e.2.checked_sub(HANDSHAKE_TIMEOUT).unwrap_or(e.2);
                    started.elapsed() >= EVICTABLE_AFTER
                })
                .map(|e| e.0),
        }
    }

    fn drop_pending(&mut self, slot: usize) -> Option<Pending> {
        let p = self.pending.get_mut(slot)?.take()?;
        let _ = self
            .poll
            .registry()
            .deregister(&mut SourceFd(&p.stream().as_raw_fd()));
        Some(p)
    }

    fn expire_handshakes(&mut self) {
        let now = Instant::now();
        for slot in 0..self.pending.len() {
            if self.pending[slot]
                .as_ref()
                .is_some_and(|p| now >= p.until())
            {
                if let Some(p) = self.drop_pending(slot) {
                    self.strangers.warn(format_args!(
                        "control listener: a connection from {} did not answer the challenge within {:?}; dropped",
                        p.peer(),
                        HANDSHAKE_TIMEOUT
                    ));
                }
            }
        }
    }

    /// Moves the handshake in `slot` on; a connection that proves the key
    /// becomes a control connection of the rank it names.
    fn advance_handshake(&mut self, slot: usize) {
        let Some(p) = self.pending.get_mut(slot).and_then(|p| p.as_mut()) else {
            return;
        };
        let body = match p.advance() {
            Step::Wait => return,
            Step::Drop(why) => {
                if let Some(p) = self.drop_pending(slot) {
                    self.strangers.warn(format_args!(
                        "control listener: a connection from {} {why}; dropped",
                        p.peer()
                    ));
                }
                return;
            }
            Step::Answered(body) => body,
        };
        let Some(p) = self.drop_pending(slot) else {
            return;
        };
        let inner = &*self.inner;
        let key = &inner.base().config.launch.job_key;
        let (stream, (from, to, endpoint)) = match p.finish::<crate::net::rendezvous::MeshHello>(
            &body,
            key,
            crate::net::rendezvous::MESH_PURPOSE,
        ) {
            Ok(v) => v,
            Err(e) => {
                self.strangers.warn(format_args!("control listener: {e}"));
                return;
            }
        };
        if to != inner.base().rank.0 || from >= inner.base().size || from == inner.base().rank.0 {
            self.strangers.warn(format_args!(
                "control listener: a connection for {from} -> {to} is not for this rank; dropped"
            ));
            return;
        }
        let rank = Rank(from);
        if let Some(ep) = endpoint.filter(|e| e.rank == from) {
            inner.base().peers.learn_endpoint(ep);
        }
        if let Err(e) =
            crate::net::connection::watch_liveness(&stream, inner.base().config.peer_timeout)
        {
            tracing::warn!("{e}");
        }
        let stream = Arc::new(stream);
        // The first connection between the two carries this rank's frames
        // too; a later one (both connected at once) only the peer's.
        if inner.base().peers[Rank(from)].control.get().is_none() {
            match ControlOut::new(stream.clone()) {
                Ok(out) => {
                    let _ = inner.base().peers[Rank(from)].control.set(out);
                }
                Err(e) => tracing::warn!("{e}"),
            }
        }
        if let Err(e) = self.add(rank, stream) {
            tracing::warn!("cannot read the connection from {rank}: {e}");
        }
    }

    /// At stop: a goodbye on every connection this rank does not send on
    /// (`Gaspi::term` said it, in order, on those it does), so that no peer
    /// takes its closing for a death.
    fn say_goodbye(&mut self) {
        let Ok(frame) = crate::net::frame::encode(&Message::Goodbye) else {
            return;
        };
        for conn in self.conns.iter().flatten() {
            let sends_here = self.inner.base().peers[conn.rank]
                .control
                .get()
                .is_some_and(|c| c.is(&conn.stream));
            if !sends_here {
                let _ = (&*conn.stream).write_all(&frame);
            }
        }
    }
}

/// Everything `list` holds, taken (what other threads left for the engine).
fn take_all<T>(list: &Mutex<Vec<T>>) -> Vec<T> {
    std::mem::take(&mut *list.lock().unwrap_or_else(|e| e.into_inner()))
}
