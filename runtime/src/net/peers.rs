//! The other ranks of the job as this rank sees them: whether each is
//! alive, the control connection to it, and requests that wait for its
//! reply.
//!
//! Every layer above asks here whether a peer may be addressed
//! ([`Peers::peer_ok`]), sends frames to it ([`Peers::send_by`]: whole
//! frames, an outbox when the socket is full, a deadline) and waits for
//! replies by token ([`Peers::request_value`]). A peer's death is recorded
//! once ([`Peers::mark`]), in the order deaths were found, so that
//! collectives name the first. What else must happen when a peer goes
//! (reads it will never answer let go, waiters woken) belongs to the layers
//! above, which say so through [`PeerEvents`]; this layer names none of
//! them.

use super::connection::{ControlOut, Offered, Urgency};
use super::frame::Message;
use super::rendezvous::{self, Endpoint};
use super::settles::SettleStash;
use crate::model::error::{Error, Result};
use crate::model::ids::{Rank, RankState};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

thread_local! {
    static ON_ENGINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Whether the calling thread is a progress engine (which must never block
/// on a peer, so never connects to one).
pub(crate) fn on_engine_thread() -> bool {
    ON_ENGINE.with(|c| c.get())
}

/// Marks the calling thread as the progress engine's (`progress.rs`).
pub(crate) fn this_is_the_engine_thread() {
    ON_ENGINE.with(|c| c.set(true));
}

/// Shortest a lookup at rank 0's directory may take before it fails (the
/// peer timeout when longer): a loaded rank 0 answers late, not never.
const LOOKUP_FOR: Duration = Duration::from_secs(30);

const HEALTHY: u8 = 0;
const TERMINATED: u8 = 1;
const CORRUPT: u8 = 2;

/// One other rank (or this one) as seen from here.
#[derive(Debug)]
pub(crate) struct Peer {
    /// Where the peer is reached: known from the start-up, or fetched from
    /// rank 0's directory on first use ([`Peers::endpoint`], decision 0065).
    endpoint: OnceLock<Endpoint>,
    state: AtomicU8,
    /// Order in which this rank was found gone, among all (`u64::MAX`:
    /// healthy). Set right after `state`: a reader may see the state first
    /// and a stale `u64::MAX` for a moment, which only ranks it last.
    failed_seq: AtomicU64,
    /// Control connection (writing side): made at start-up with rank 0,
    /// on first use with the others ([`Peers::control_to`]); never for this
    /// rank.
    pub(crate) control: OnceLock<ControlOut>,
    /// Held while this rank connects to the peer.
    connecting: Mutex<()>,
    /// Answers (`Settled`, per queue) owed to this peer for requests a
    /// waiter applied: they ride on the next frame sent to it, or the
    /// progress engine sends them (`settles.rs`).
    pub settle_stash: SettleStash,
}

impl Peer {
    /// A healthy peer reached at `endpoint` (`None`: to be looked up on
    /// first use), not connected yet.
    pub fn new(endpoint: Option<Endpoint>) -> Peer {
        Peer {
            endpoint: endpoint.map(OnceLock::from).unwrap_or_default(),
            state: AtomicU8::new(HEALTHY),
            failed_seq: AtomicU64::new(u64::MAX),
            control: OnceLock::new(),
            connecting: Mutex::new(()),
            settle_stash: SettleStash::default(),
        }
    }
}

/// Replies to requests, keyed by token, and the condition waiters sleep on.
#[derive(Debug, Default)]
struct Replies {
    done: Mutex<HashMap<u64, Option<std::result::Result<u64, String>>>>,
    cv: Condvar,
}

/// What the layers above do when this layer learns something of a peer
/// (registered once at start-up, [`Peers::set_events`]).
pub(crate) trait PeerEvents: Send + Sync {
    /// `rank` was found gone (the first news of it): let go of what waits
    /// on it and wake the threads that wait for it.
    fn gone(&self, rank: Rank);
    /// A thread is about to sleep on a reply from `rank`: make progress
    /// (read the connection) while `waiting` says the reply has not come,
    /// for as long as a waiter spins.
    fn before_reply_sleep(&self, rank: Rank, deadline: Option<Instant>, waiting: &dyn Fn() -> bool);
}

/// Every rank of the job as seen from this one (see the module docs).
pub(crate) struct Peers {
    /// This rank.
    pub rank: Rank,
    /// Ranks in the job.
    pub size: u32,
    list: Vec<Peer>,
    job_key: Vec<u8>,
    peer_timeout: Duration,
    /// Where endpoints not known from the start-up are looked up.
    directory: Option<Box<dyn rendezvous::EndpointSource>>,
    /// Serializes lookups (one connection to the directory at a time).
    looking_up: Mutex<()>,
    replies: Replies,
    tokens: AtomicU64,
    /// Ranks found gone so far (orders `Peer::failed_seq`).
    failures: AtomicU64,
    /// Connections this rank's threads made, for the progress engine to
    /// read (it takes them when woken).
    pub made_connections: Mutex<Vec<(Rank, Arc<std::net::TcpStream>)>>,
    /// Orderly ends of ranks this one has no connection to, reported by
    /// third ranks: the progress engine decides on them (a connection of
    /// theirs may still be in its handshake, holding frames sent before
    /// the end; `progress.rs`, decision 0018).
    pub relayed_ends: Mutex<Vec<Rank>>,
    /// Wakes the progress engine.
    pub engine_waker: OnceLock<Arc<mio::Waker>>,
    events: OnceLock<Box<dyn PeerEvents>>,
    /// Sweeps of every connection asked of the progress engine.
    pub sweeps: Sweeps,
}

impl std::fmt::Debug for Peers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Peers")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("list", &self.list)
            .finish_non_exhaustive()
    }
}

impl std::ops::Index<Rank> for Peers {
    type Output = Peer;
    fn index(&self, rank: Rank) -> &Peer {
        &self.list[rank.0 as usize]
    }
}

impl Peers {
    /// The job's ranks from the rendezvous table (`list[r]` is rank `r`),
    /// all healthy; `job_key` proves connections made on first use,
    /// `peer_timeout` bounds how long a silent connection is believed.
    /// `directory` answers for the peers whose endpoint `list` lacks.
    pub fn new(
        rank: Rank,
        list: Vec<Peer>,
        job_key: Vec<u8>,
        peer_timeout: Duration,
        directory: Option<Box<dyn rendezvous::EndpointSource>>,
    ) -> Peers {
        Peers {
            rank,
            size: list.len() as u32,
            list,
            job_key,
            peer_timeout,
            directory,
            looking_up: Mutex::new(()),
            replies: Replies::default(),
            tokens: AtomicU64::new(1),
            failures: AtomicU64::new(0),
            made_connections: Mutex::new(Vec::new()),
            relayed_ends: Mutex::new(Vec::new()),
            engine_waker: OnceLock::new(),
            events: OnceLock::new(),
            sweeps: Sweeps::default(),
        }
    }

    /// The endpoint of `rank`: known since the start-up, or asked of rank
    /// 0's directory now (once; decision 0065), or of PMIx under the PMIx
    /// bootstrap (decision 0084). The progress engine may ask
    /// too: a lookup is one short exchange with rank 0's directory thread,
    /// never with a progress engine.
    pub fn endpoint(&self, rank: Rank) -> Result<&Endpoint> {
        self.check_rank(rank)?;
        let peer = &self.list[rank.0 as usize];
        if let Some(e) = peer.endpoint.get() {
            return Ok(e);
        }
        let _one = self.looking_up.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = peer.endpoint.get() {
            return Ok(e);
        }
        let Some(dir) = &self.directory else {
            return Err(Error::Protocol(format!("no endpoint known for {rank}")));
        };
        // A peer known gone is named as such, whatever the lookup says.
        self.peer_ok(rank)?;
        let found = dir
            .lookup(&[rank.0], self.peer_timeout.max(LOOKUP_FOR))
            .map_err(|e| self.peer_ok(rank).err().unwrap_or(e))?;
        let ep = found.into_iter().next().expect("lookup checks the count");
        Ok(peer.endpoint.get_or_init(|| ep))
    }

    /// Learns the endpoint a peer told on connecting here (kept unless
    /// known already).
    pub fn learn_endpoint(&self, ep: Endpoint) {
        if let Some(p) = self.list.get(ep.rank as usize) {
            let _ = p.endpoint.set(ep);
        }
    }

    /// Registers what the layers above do on news of a peer (once).
    pub fn set_events(&self, events: Box<dyn PeerEvents>) {
        let _ = self.events.set(events);
    }

    /// Every peer, rank by rank.
    pub fn iter(&self) -> impl Iterator<Item = (Rank, &Peer)> {
        self.list
            .iter()
            .enumerate()
            .map(|(r, p)| (Rank(r as u32), p))
    }

    /// Asks the progress engine to read every connection and decide every
    /// end it finds, and waits until it has, at most `bound`.
    pub fn sweep(&self, bound: Duration) {
        self.sweeps.sweep(self, bound);
    }

    /// Wakes threads waiting on replies.
    pub fn wake_replies(&self) {
        let _guard = self.replies.done.lock().unwrap_or_else(|e| e.into_inner());
        self.replies.cv.notify_all();
    }

    /// Fails with an error naming `rank` unless it is healthy.
    pub fn peer_ok(&self, rank: Rank) -> Result<()> {
        match self.list[rank.0 as usize].state.load(Ordering::Acquire) {
            HEALTHY => Ok(()),
            TERMINATED => Err(Error::PeerTerminated { rank }),
            _ => Err(Error::PeerDead { rank }),
        }
    }

    /// Why a collective of `members` that now waits for `needed` cannot
    /// complete, if it cannot: a member known dead (named, whichever member
    /// it is: every survivor learns of a death on its own connection, so
    /// every member fails at once, naming the same rank), else a needed
    /// rank that is gone (dead or terminated). Members that terminated in
    /// order are no failure unless needed: they may have left a collective
    /// they had completed. The one rule every collective applies.
    /// When several members are dead, the one found dead first is named:
    /// later deaths may be consequences of it (ranks that gave up).
    pub fn collective_failure(&self, members: &[Rank], needed: &[Rank]) -> Option<Error> {
        members
            .iter()
            .filter(|&&r| self.state_of(r) == RankState::Corrupt)
            .min_by_key(|&&r| self.list[r.0 as usize].failed_seq.load(Ordering::Acquire))
            .map(|&rank| Error::PeerDead { rank })
            .or_else(|| needed.iter().find_map(|&r| self.peer_ok(r).err()))
    }

    /// The error-state vector entry of `rank`.
    pub fn state_of(&self, rank: Rank) -> RankState {
        match self.list[rank.0 as usize].state.load(Ordering::Acquire) {
            HEALTHY => RankState::Healthy,
            TERMINATED => RankState::Terminated,
            _ => RankState::Corrupt,
        }
    }

    /// Records that `rank` is gone; wakes every waiter so it can notice.
    /// True when this changed its state (the first news of it).
    pub fn mark(&self, rank: Rank, state: RankState) -> bool {
        let v = match state {
            RankState::Healthy => return false,
            RankState::Terminated => TERMINATED,
            RankState::Corrupt => CORRUPT,
        };
        let changed = self.list[rank.0 as usize]
            .state
            .compare_exchange(HEALTHY, v, Ordering::AcqRel, Ordering::Acquire)
            .is_ok();
        if changed {
            let seq = self.failures.fetch_add(1, Ordering::AcqRel);
            self.list[rank.0 as usize]
                .failed_seq
                .store(seq, Ordering::Release);
            match state {
                RankState::Corrupt => tracing::warn!(
                    rank = rank.0,
                    "{rank} is dead or unreachable; marked corrupt"
                ),
                _ => tracing::debug!(rank = rank.0, "{rank} terminated"),
            }
            if let Some(events) = self.events.get() {
                events.gone(rank);
            }
            self.wake_replies();
        }
        changed
    }

    /// A token no other request of this rank carries.
    pub fn next_token(&self) -> u64 {
        self.tokens.fetch_add(1, Ordering::Relaxed)
    }

    /// Wakes the progress engine: it takes the connections this rank's
    /// threads made and closes those a waiter found ended.
    pub fn wake_engine(&self) {
        if let Some(w) = self.engine_waker.get() {
            let _ = w.wake();
        }
    }

    /// Whether `rank` exists and is healthy, as a yes or no (short path).
    #[inline(always)]
    pub fn peer_healthy(&self, rank: Rank) -> bool {
        self.list
            .get(rank.0 as usize)
            .is_some_and(|p| p.state.load(Ordering::Acquire) == HEALTHY)
    }

    /// Checks a rank number.
    pub fn check_rank(&self, rank: Rank) -> Result<()> {
        if rank.0 >= self.size {
            return Err(Error::BadRank {
                rank,
                size: self.size,
            });
        }
        Ok(())
    }

    /// Sends `msg` to `rank` at once, however full its outbox is: for the
    /// progress engine's replies and for clean-up that must not wait
    /// (`net/connection.rs`).
    pub fn send(&self, rank: Rank, msg: &Message) -> Result<()> {
        self.send_by(rank, msg, Urgency::Now, "send")
    }

    /// Sends `msg` on the control connection to `rank`: the whole frame or,
    /// when the peer has not read what it was sent and `urgency` allows no
    /// more waiting, nothing and [`Error::Timeout`] naming `op`.
    pub fn send_by(
        &self,
        rank: Rank,
        msg: &Message,
        urgency: Urgency,
        op: &'static str,
    ) -> Result<()> {
        let frame = super::frame::encode(msg)?;
        self.send_frame_by(rank, &frame, urgency, op)
    }

    /// [`Peers::send_by`] of a frame already encoded.
    pub fn send_frame_by(
        &self,
        rank: Rank,
        frame: &[u8],
        urgency: Urgency,
        op: &'static str,
    ) -> Result<()> {
        self.send_parts_by(rank, &[frame], urgency, op, None)
    }

    /// [`Peers::send_frame_by`] of a frame in pieces (a write's head and
    /// its data where it lies), written with one system call where the
    /// socket takes them. With `lent`, what the socket does not take of
    /// the last part stays where it lies until it is written
    /// (`ControlOut::offer_parts`).
    pub fn send_parts_by(
        &self,
        rank: Rank,
        parts: &[&[u8]],
        urgency: Urgency,
        op: &'static str,
        lent: Option<&super::connection::Keep>,
    ) -> Result<()> {
        self.peer_ok(rank)?;
        let deadline = match urgency {
            Urgency::Now => None,
            Urgency::Within(d) => d,
        };
        let control = self.control_to(rank, deadline)?;
        let gone = || match self.peer_ok(rank) {
            Err(e) => e,
            Ok(()) => Error::PeerDead { rank },
        };
        // Answers owed to the peer go first, in the same system call (a
        // ping-pong's answer carries the settlement of the request it
        // answers). They never wait for room, whatever the frame does.
        let owed_frames = self.list[rank.0 as usize].settle_stash.take_frames();
        let owed: &[u8] = owed_frames.as_deref().unwrap_or(&[]);
        let mut owed_pending = !owed.is_empty();
        let mut joined: [&[u8]; 4] = [&[]; 4];
        if owed_pending && parts.len() >= joined.len() {
            if control.offer(owed, true).is_err() {
                return Err(gone());
            }
            owed_pending = false;
        }
        loop {
            let now = urgency == Urgency::Now;
            let offered = if owed_pending {
                joined[0] = owed;
                joined[1..=parts.len()].copy_from_slice(parts);
                control.offer_parts(&joined[..=parts.len()], now, lent)
            } else {
                control.offer_parts(parts, now, lent)
            };
            match offered {
                Ok(Offered::Sent | Offered::Queued) => return Ok(()),
                Ok(Offered::Full) => {
                    // The frame waits for room; the answers do not.
                    if owed_pending {
                        if control.offer(owed, true).is_err() {
                            return Err(gone());
                        }
                        owed_pending = false;
                    }
                }
                Err(e) => {
                    // The connection is closed: the progress engine reads
                    // it too and decides between "ended in order" and
                    // "dead" (it saw a goodbye or not); until it has, the
                    // rank is reported dead without being marked.
                    tracing::debug!("sending to {rank}: {e}");
                    return Err(gone());
                }
            }
            self.peer_ok(rank)?;
            let nap = crate::model::error::nap(deadline, Duration::from_millis(50), op)?;
            control.wait_room(nap);
        }
    }

    /// The control connection to `rank`, made now if this is the first
    /// use (decision 0022): connected to the peer's control listener and
    /// authenticated within `deadline` (`None`: while the peer lives), then
    /// handed to the progress engine for reading. The engine itself never
    /// connects (it must not block): its answers go to peers that reached
    /// it, whose connection it keeps.
    pub fn control_to(&self, rank: Rank, deadline: Option<Instant>) -> Result<&ControlOut> {
        let peer = &self.list[rank.0 as usize];
        if let Some(c) = peer.control.get() {
            return Ok(c);
        }
        if rank == self.rank || on_engine_thread() {
            return Err(Error::Protocol(format!("no control connection to {rank}")));
        }
        let _one = peer.connecting.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = peer.control.get() {
            return Ok(c);
        }
        let endpoint = self.endpoint(rank)?;
        let stream = rendezvous::connect_peer(
            self.endpoint(self.rank)?,
            endpoint,
            &self.job_key,
            deadline,
            self.peer_timeout,
            || self.peer_ok(rank),
        )
        .map_err(|e| match e {
            // Nobody listens there any more: the process is gone (or left
            // in order, which the survivors' gossip tells soon after).
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::ConnectionRefused => {
                self.peer_ok(rank).err().unwrap_or(Error::PeerDead { rank })
            }
            e => e,
        })?;
        super::connection::watch_liveness(&stream, self.peer_timeout)?;
        let stream = Arc::new(stream);
        // The engine may have taken a connection from the peer meanwhile:
        // then that one carries our frames and this one only the peer's.
        let _ = peer.control.set(ControlOut::new(stream.clone())?);
        self.made_connections
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((rank, stream));
        self.wake_engine();
        tracing::debug!("connected to {rank} on first use");
        Ok(peer.control.get().expect("set just above or by the engine"))
    }

    /// Whether this rank has a control connection to `rank` (it has sent
    /// to it, or `rank` to it, or `rank` is rank 0 or this is).
    pub fn connected(&self, rank: Rank) -> bool {
        self.list[rank.0 as usize].control.get().is_some()
    }

    /// Records that `rank` is gone, on this rank's own evidence or a
    /// peer's report, and tells every peer connected to this rank, so that
    /// news of a death reaches ranks that never talked to the dead one
    /// (through rank 0, which every rank is connected to). Each rank
    /// forwards a death once, the first time it learns of it.
    pub fn mark_gone(&self, rank: Rank, state: RankState) {
        if !self.mark(rank, state) {
            return;
        }
        let msg = Message::PeerGone {
            rank: rank.0,
            terminated: state == RankState::Terminated,
        };
        for (r, p) in self.list.iter().enumerate() {
            if r as u32 != rank.0 && p.control.get().is_some() && self.peer_healthy(Rank(r as u32))
            {
                let _ = self.send(Rank(r as u32), &msg);
            }
        }
    }

    /// Waits up to `bound` for every control connection to hand its queued
    /// frames to the kernel (termination: a goodbye must not be lost).
    pub fn flush_all(&self, bound: Duration) {
        let end = Instant::now() + bound;
        for p in &self.list {
            let Some(c) = p.control.get() else { continue };
            while matches!(c.flush(), Ok(n) if n > 0) && Instant::now() < end {
                c.wait_room(Duration::from_millis(10));
            }
        }
    }

    /// Sends a request built around a fresh token and waits for its reply.
    pub fn request(
        &self,
        rank: Rank,
        make: impl FnOnce(u64) -> Message,
        deadline: Option<Instant>,
        op: &'static str,
    ) -> Result<()> {
        self.request_value(rank, make, deadline, op).map(|_| ())
    }

    /// [`Peers::request`] for requests whose reply carries a value.
    pub fn request_value(
        &self,
        rank: Rank,
        make: impl FnOnce(u64) -> Message,
        deadline: Option<Instant>,
        op: &'static str,
    ) -> Result<u64> {
        let token = self.next_token();
        self.expect_reply(token);
        let sent = self.send_by(rank, &make(token), Urgency::Within(deadline), op);
        let result = sent.and_then(|_| self.await_reply(rank, token, deadline, op));
        self.forget_reply(token);
        result
    }

    /// Waits until `deadline` for the reply to request `token` to `rank`
    /// (sent, its room made with [`Peers::expect_reply`]), leaving its
    /// room in place.
    pub(crate) fn await_reply(
        &self,
        rank: Rank,
        token: u64,
        deadline: Option<Instant>,
        op: &'static str,
    ) -> Result<u64> {
        // A TCP peer's answer (an atomic's old value, say): read its
        // connection here for the spin budget before sleeping
        // (`waiter_progress.rs`).
        if let Some(events) = self.events.get() {
            events.before_reply_sleep(rank, deadline, &|| {
                let done = self.replies.done.lock().unwrap_or_else(|e| e.into_inner());
                matches!(done.get(&token), Some(None))
            });
        }
        let mut done = self.replies.done.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            if let Some(Some(r)) = done.get(&token) {
                return r.clone().map_err(|reason| Error::Refused { rank, reason });
            }
            self.peer_ok(rank)?;
            let nap = crate::model::error::nap(deadline, Duration::from_millis(50), op)?;
            done = self
                .replies
                .cv
                .wait_timeout(done, nap)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// Makes room for the reply to request `token` (before it is sent).
    pub fn expect_reply(&self, token: u64) {
        self.replies
            .done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(token, None);
    }

    /// Forgets request `token`: a reply that comes later is dropped.
    pub fn forget_reply(&self, token: u64) {
        self.replies
            .done
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&token);
    }

    /// Records a reply (progress engine).
    pub fn complete(&self, token: u64, result: std::result::Result<u64, String>) {
        let mut done = self.replies.done.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(slot) = done.get_mut(&token) {
            *slot = Some(result);
            self.replies.cv.notify_all();
        }
    }
}

/// Sweeps of every connection asked of the engine (`Engine::sweep`), and
/// those done: the asker waits for its own.
#[derive(Debug, Default)]
pub(crate) struct Sweeps {
    /// (asked, done), counts.
    state: Mutex<(u64, u64)>,
    done: std::sync::Condvar,
}

impl Sweeps {
    /// Asks the engine for a sweep and waits until it has made one, at
    /// most `bound` (an engine that has stopped makes none).
    pub fn sweep(&self, peers: &Peers, bound: Duration) {
        let until = Instant::now() + bound;
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.0 += 1;
        let want = st.0;
        peers.wake_engine();
        while st.1 < want {
            let left = until.saturating_duration_since(Instant::now());
            if left.is_zero() {
                tracing::debug!("the progress engine made no sweep within {bound:?}");
                return;
            }
            st = self
                .done
                .wait_timeout(st, left)
                .unwrap_or_else(|e| e.into_inner())
                .0;
        }
    }

    /// The sweep asked last, if it is not done (engine).
    pub(crate) fn asked(&self) -> Option<u64> {
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        (st.0 > st.1).then_some(st.0)
    }

    /// Sweeps up to `asked` are done (engine).
    pub(crate) fn done(&self, asked: u64) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        st.1 = st.1.max(asked);
        self.done.notify_all();
    }
}
