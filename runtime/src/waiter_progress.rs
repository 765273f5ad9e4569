//! Progress made by the threads that wait: a thread spinning in
//! `notify_waitsome`, `wait` or a collective reads the connections of the
//! peers it waits for, instead of waiting for the progress engine to do it.
//!
//! Why. Over TCP every request is applied by the target's progress engine
//! (`transport/tcp/`). Left to the engine, a message costs a hand-off
//! between threads on each end: the engine is woken by the kernel (or spins
//! on `epoll`), reads, applies, sets the word, and only then does the
//! waiter, spinning on that word, see it. A thread that spins for a
//! notification has nothing better to do than to read the socket that will
//! carry it, as MPI libraries progress their network from the calling
//! thread. The raw socket ping-pong that the TCP transport is measured
//! against does exactly that.
//!
//! How. Every control connection to a peer reached over TCP is, besides the
//! engine's edge-triggered `epoll`, in one level-triggered `epoll` set of
//! this rank's waiters ([`WaiterProgress`]). A spinning waiter asks that set,
//! without blocking, which connections have bytes, takes a connection's
//! read state only if nobody holds it (`try_lock`: a waiter never waits for
//! the engine or for another waiter), and reads it exactly as the engine
//! does (`net::reader::read_available`): until the socket would block, every
//! whole frame handled once and in order, whichever thread read it. The
//! engine takes the same lock when its own `epoll` reports the socket, and
//! finds nothing left or the rest. Nothing changes for the peer.
//!
//! Ends. A waiter that sees a connection end (or fail, or carry something
//! that is not a frame) marks it `ended`, drops it from the set and wakes
//! the engine, which alone decides what it means for the rank (decision
//! 0018): the evidence of death stays in one place.
//!
//! Cost. One `epoll_wait` with a zero timeout every few dozen polls of a
//! spinning waiter, only on a rank that has TCP peers
//! ([`WaiterProgress::poll`] is one load when it has none). While a waiter
//! polls, the engine does not spin after work (`progress.rs`): two threads
//! spinning for the same socket would only take each other's core.

use crate::net::peers::Peers;
use crate::net::reader::ReadState;
use crate::transport::tcp::serve::Connection;
use crate::transport::tcp::serve::DirectPut;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// A waiter that polled this recently counts as polling.
const POLLING: Duration = Duration::from_micros(50);

/// A waiter's polls between two stamps of [`WaiterProgress::last_poll`]
/// (a poll takes well under a microsecond: the stamp stays far within
/// [`POLLING`]).
const STAMP_EVERY: u32 = 16;

thread_local! {
    /// This thread's polls, for [`STAMP_EVERY`].
    static POLLS: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// What waiting threads read connections for: the rank's context as the
/// front implements it (`context.rs`). One indirect call per connection
/// read, none per frame: the read itself is monomorphic behind it.
pub(crate) trait WaiterHost: Send + Sync {
    /// The other ranks.
    fn peers(&self) -> &Peers;
    /// Sends the answers waiters left owed to peers, if any.
    fn send_owed_answers(&self);
    /// Reads `conn` until it would block, handling its frames as a waiting
    /// thread does; true when the connection ended.
    fn read_as_waiter(&self, conn: &Connection, state: &mut ReadState<DirectPut>) -> bool;
}

/// The connections waiters may read, and the `epoll` set that says which
/// of them have bytes.
#[derive(Debug)]
pub(crate) struct WaiterProgress {
    /// Level-triggered; `None` where it could not be made (then waiters
    /// leave everything to the engine, as before).
    epoll: Option<OwnedFd>,
    /// Connections by the slot their `epoll` entry carries.
    conns: Mutex<Vec<Option<Arc<Connection>>>>,
    /// Connections in the set: a waiter with none to read returns at once.
    watched: AtomicUsize,
    /// When a waiter last polled, in nanoseconds since `epoch` (the engine
    /// does not spin while waiters poll).
    last_poll: AtomicU64,
    epoch: std::time::Instant,
    inner: OnceLock<Weak<dyn WaiterHost>>,
    /// The engine blocks in `epoll` (answers left owed must wake it).
    engine_asleep: AtomicBool,
    /// Some peer's `SettleStash` holds answers.
    owed: AtomicBool,
}

impl Default for WaiterProgress {
    fn default() -> Self {
        // SAFETY: epoll_create1 takes no pointers; a non-negative result is
        // a new descriptor that nothing else owns.
        let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        let epoll = if fd >= 0 {
            // SAFETY: `fd` was just created and is owned by nobody else.
            Some(unsafe { OwnedFd::from_raw_fd(fd) })
        } else {
            tracing::warn!(
                "no epoll set for waiters ({}): the progress engine alone reads TCP peers",
                std::io::Error::last_os_error()
            );
            None
        };
        WaiterProgress {
            epoll,
            conns: Mutex::new(Vec::new()),
            watched: AtomicUsize::new(0),
            last_poll: AtomicU64::new(0),
            epoch: std::time::Instant::now(),
            inner: OnceLock::new(),
            engine_asleep: AtomicBool::new(false),
            owed: AtomicBool::new(false),
        }
    }
}

impl WaiterProgress {
    /// Gives the waiters the rank's state, through which frames are handled.
    pub fn bind(&self, inner: Weak<dyn WaiterHost>) {
        let _ = self.inner.set(inner);
    }

    /// Lets waiters read `conn` (the engine reads it too).
    pub fn watch(&self, conn: &Arc<Connection>) {
        let Some(epoll) = &self.epoll else {
            return;
        };
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let slot = match conns.iter().position(Option::is_none) {
            Some(k) => k,
            None => {
                conns.push(None);
                conns.len() - 1
            }
        };
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: slot as u64,
        };
        // SAFETY: both descriptors are open (the connection's stream lives
        // in `conn`, which the set keeps until `unwatch` removes the entry);
        // `ev` is a valid event for the call.
        let rc = unsafe {
            libc::epoll_ctl(
                epoll.as_raw_fd(),
                libc::EPOLL_CTL_ADD,
                conn.stream.as_raw_fd(),
                &mut ev,
            )
        };
        if rc != 0 {
            tracing::debug!(
                "{}: waiters will not read this connection: {}",
                conn.rank,
                std::io::Error::last_os_error()
            );
            return;
        }
        conns[slot] = Some(conn.clone());
        self.watched.fetch_add(1, Ordering::Release);
    }

    /// Stops waiters reading `conn` (it ended); a no-op if they did not.
    pub fn unwatch(&self, conn: &Arc<Connection>) {
        let Some(epoll) = &self.epoll else {
            return;
        };
        let mut conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let Some(slot) = conns
            .iter()
            .position(|c| c.as_ref().is_some_and(|c| Arc::ptr_eq(c, conn)))
        else {
            return;
        };
        // SAFETY: the stream is still open: the set holds `conn` until the
        // slot is cleared below. A null event is allowed for EPOLL_CTL_DEL.
        unsafe {
            libc::epoll_ctl(
                epoll.as_raw_fd(),
                libc::EPOLL_CTL_DEL,
                conn.stream.as_raw_fd(),
                std::ptr::null_mut(),
            )
        };
        conns[slot] = None;
        self.watched.fetch_sub(1, Ordering::Release);
    }

    /// A waiter left answers owed to a peer (in its `SettleStash`): the
    /// engine sends them if nobody else does first, woken for it if it
    /// sleeps.
    pub fn owed_answers(&self, peers: &Peers) {
        // SeqCst on both sides (here and in `engine_sleeps`): either the
        // engine sees `owed` before it sleeps, or we see it asleep.
        self.owed.store(true, Ordering::SeqCst);
        if self.engine_asleep.load(Ordering::SeqCst) {
            peers.wake_engine();
        }
    }

    /// The engine is about to block in `epoll`: false (do not block) when
    /// answers are owed.
    pub fn engine_sleeps(&self) -> bool {
        self.engine_asleep.store(true, Ordering::SeqCst);
        if self.owed.load(Ordering::SeqCst) {
            self.engine_asleep.store(false, Ordering::SeqCst);
            return false;
        }
        true
    }

    /// The engine is awake again.
    pub fn engine_wakes(&self) {
        self.engine_asleep.store(false, Ordering::Relaxed);
    }

    /// Clears the flag that answers are owed; true if it was set (the
    /// caller then sends every peer's).
    pub fn take_owed(&self) -> bool {
        self.owed.load(Ordering::Relaxed) && self.owed.swap(false, Ordering::AcqRel)
    }

    /// Whether a waiter polled within the last [`POLLING`].
    pub fn has_pollers(&self) -> bool {
        let last = self.last_poll.load(Ordering::Relaxed);
        last != 0 && self.nanos() < last + POLLING.as_nanos() as u64
    }

    fn nanos(&self) -> u64 {
        self.epoch.elapsed().as_nanos() as u64
    }

    /// Whether there is any connection to read.
    pub fn is_active(&self) -> bool {
        self.watched.load(Ordering::Relaxed) > 0
    }

    /// Reads every watched connection that has bytes and nobody reading it;
    /// returns whether it handled anything. Never blocks.
    pub fn poll(&self) -> bool {
        if !self.is_active() {
            return false;
        }
        let (Some(epoll), Some(inner)) = (&self.epoll, self.inner.get().and_then(Weak::upgrade))
        else {
            return false;
        };
        // Said every few polls only: a clock reading is a good part of a
        // poll that finds nothing (more on virtual machines), and the
        // engine only asks whether one came within [`POLLING`].
        let stamp = POLLS.with(|n| {
            let k = n.get().wrapping_add(1);
            n.set(k);
            k % STAMP_EVERY == 1
        });
        if stamp {
            self.last_poll.store(self.nanos().max(1), Ordering::Relaxed);
        }
        // Answers a waiter left owed in an earlier round: it is still
        // waiting, so the application's next frame is not about to carry
        // them. Send them now rather than at the engine's next look.
        inner.send_owed_answers();
        // The connections to read: with one, itself (a read that finds
        // nothing costs what asking the set would, and one that finds
        // bytes saves the asking); with more, those the set says have bytes.
        let mut ready: [Option<Arc<Connection>>; 8] = Default::default();
        {
            let conns = self.conns.lock().unwrap_or_else(|e| e.into_inner());
            // A frame the socket did not take whole: write the rest now
            // rather than when the engine next looks (it naps meanwhile).
            for conn in conns.iter().flatten() {
                if let Some(out) = inner.peers()[conn.rank].control.get() {
                    if out.has_queued() {
                        let _ = out.flush();
                    }
                }
            }
            if self.watched.load(Ordering::Relaxed) == 1 {
                ready[0] = conns.iter().flatten().next().cloned();
            } else {
                let mut events = [libc::epoll_event { events: 0, u64: 0 }; 8];
                // SAFETY: `events` is valid for writes of its length;
                // timeout 0 never blocks.
                let n = unsafe {
                    libc::epoll_wait(
                        epoll.as_raw_fd(),
                        events.as_mut_ptr(),
                        events.len() as libc::c_int,
                        0,
                    )
                };
                for (slot, ev) in ready.iter_mut().zip(events.iter().take(n.max(0) as usize)) {
                    *slot = conns.get(ev.u64 as usize).cloned().flatten();
                }
            }
        }
        let mut worked = false;
        for conn in ready.into_iter().flatten() {
            // None: the engine (or another waiter) is reading it now.
            let Some(mut state) = conn.try_lock() else {
                continue;
            };
            if state.ended {
                continue;
            }
            let before = state.read;
            let ended = inner.read_as_waiter(&conn, &mut state);
            worked |= ended || state.read != before;
            if ended {
                state.ended = true;
                drop(state);
                self.unwatch(&conn);
                inner.peers().wake_engine();
            }
        }
        worked
    }

    /// Polls, with a pause between rounds, while `busy` says so, for a
    /// waiter's spin budget `spin` or until `deadline` if that comes
    /// first: how a wait that does not spin on notification words (a
    /// queue's `wait`, a reply) reads its peers' connections before it
    /// sleeps. Returns at once where there is nothing to read.
    pub fn spin_while(
        &self,
        spin: Duration,
        deadline: Option<Instant>,
        mut busy: impl FnMut() -> bool,
    ) {
        if !self.is_active() {
            return;
        }
        let until = Instant::now() + spin;
        let until = deadline.map_or(until, |d| d.min(until));
        let mut round = 0u32;
        while busy() && (!round.is_multiple_of(16) || Instant::now() < until) {
            round = round.wrapping_add(1);
            // A pause or two between looks: the look itself (a system
            // call) is the wait. A `pause` is up to ~140 cycles on recent
            // x86 cores, so 32 of them kept an arriving answer waiting
            // up to a microsecond or two.
            if !self.poll() {
                for _ in 0..SPIN_WHILE_PAUSES {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

/// What a rank's waiters do while they spin (`gaspi_notify::SpinWork`): help
/// with copies posted to this rank (`protocol/assisted_copy.rs`) and read
/// the connections of TCP peers.
#[derive(Debug)]
pub(crate) struct WaitWork {
    pub copy: Option<Arc<crate::protocol::assisted_copy::CopyHelper>>,
    pub net: Option<Arc<WaiterProgress>>,
    /// Network transports whose peers' writes land only while someone
    /// reads their completion queue (`NetworkTransport::progress_in_waits`).
    pub network: Vec<Arc<dyn crate::transport::NetworkTransport>>,
    /// Those of them read once more when a word is seen, before the wait
    /// returns (`NetworkTransport::settle_in_waits`).
    pub settle: Vec<Arc<dyn crate::transport::NetworkTransport>>,
}

impl WaitWork {
    /// The work for this rank's notification areas, if there is any.
    pub fn new(
        copy: Option<Arc<crate::protocol::assisted_copy::CopyHelper>>,
        net: Option<Arc<WaiterProgress>>,
        network: &[Arc<dyn crate::transport::NetworkTransport>],
    ) -> Option<Arc<WaitWork>> {
        let network: Vec<_> = network
            .iter()
            .filter(|t| t.progress_in_waits())
            .cloned()
            .collect();
        let settle = network
            .iter()
            .filter(|t| t.settle_in_waits())
            .cloned()
            .collect();
        (copy.is_some() || net.is_some() || !network.is_empty()).then(|| {
            Arc::new(WaitWork {
                copy,
                net,
                network,
                settle,
            })
        })
    }
}

impl gaspi_notify::SpinWork for WaitWork {
    fn run(&self) -> bool {
        let copied = self.copy.as_ref().is_some_and(|c| c.run());
        let read = self.net.as_ref().is_some_and(|n| n.poll());
        // What a network transport applied shows in the words themselves.
        for t in &self.network {
            t.progress();
        }
        copied || read
    }

    fn settle(&self) {
        for t in &self.settle {
            t.progress();
        }
    }

    fn polls_between(&self) -> u32 {
        // Reading the sockets is how a TCP peer's notification arrives:
        // look every few polls (an `epoll_wait` costs about as much as a
        // few dozen polls of a word).
        match &self.net {
            Some(n) if n.is_active() => NET_POLLS_BETWEEN,
            _ if !self.network.is_empty() => NET_POLLS_BETWEEN,
            _ => 32,
        }
    }
}

/// Pauses between two looks at the sockets of [`WaiterProgress::spin_while`].
const SPIN_WHILE_PAUSES: u32 = 2;

/// Polls of the words between two looks at the sockets.
const NET_POLLS_BETWEEN: u32 = 2;
