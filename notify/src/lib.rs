//! Notification areas: the words a `write_notify` sets on its target.
//!
//! Every GASPI segment carries an array of `u32` notification words. A writer
//! puts its data into the segment and *then* stores a non-zero value into one
//! word; the target finds the word with [`NotificationArea::waitsome`] and
//! clears it with [`NotificationArea::reset`]. The data-before-flag order is the
//! heart of the model, so the store is a release and the scan an acquire.
//!
//! An area lives in memory that several processes (and possibly a GPU) map at
//! once, so it is built from a raw region the caller provides, not from a Rust
//! allocation: the runtime places it in a shared-memory file for host
//! segments, or in pinned host-mapped memory for GPU segments, and peers map
//! the same bytes. This crate knows nothing of transports or segments.
//!
//! Layout of the region (all little-endian `u32`):
//!
//! | bytes | what |
//! |---|---|
//! | 0..4 | `sequence`: bumped after every notification store, the futex word |
//! | 4..8 | `sleepers`: how many waiters are (about to be) asleep on `sequence` |
//! | 8..12 | `silent_writers`: non-zero once a writer that cannot wake (a GPU) may store here |
//! | 128.. | the notification words, `count` of them |
//!
//! Waiting must not burn a core: tests run 8 ranks on 2 cores. A waiter scans,
//! spins for a short budget, then sleeps on a futex keyed on `sequence`. A
//! writer bumps `sequence` after its store and makes the `futex_wake` system
//! call only when `sleepers` says somebody sleeps, so the fast path of a
//! ping-pong stays free of system calls. Writers that cannot make system calls
//! (a GPU kernel storing into host-mapped words, a `cuStreamWriteValue32`)
//! first raise `silent_writers` ([`NotificationArea::mark_silent_writer`]);
//! from then on a sleeping waiter naps on the futex for a short, growing
//! interval instead of 10 ms, so CPU writers still wake it at once and GPU
//! writers are seen within the cap; see [`WakeMode`].
//!
//! A spinning waiter's core is idle, and the peer it waits for may be busy
//! with exactly the work that will set its word (a large copy into this
//! rank's segment). So an area may carry [`SpinWork`]: something the waiter
//! does between polls while it spins (the runtime's target-assisted copy,
//! `runtime/src/transport/assisted_copy.rs`). It never runs once the waiter
//! sleeps: a sleeping waiter stays asleep until its word changes.

pub mod futex;
pub mod gdrcopy;
pub mod poll;

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// Bytes before the first notification word: the header, padded so the
/// words start on their own cache line pair and writers of the header do not
/// share a line with the first words.
pub const HEADER_BYTES: usize = 128;

/// Errors of notification calls; every one is detected before anything changes.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotifyError {
    /// The id (or the range `begin..begin+num`) lies outside the area.
    #[error("notification id range {begin}..{end} is out of bounds (the area has {count} words)")]
    OutOfRange {
        /// first id asked for
        begin: u32,
        /// one past the last id asked for
        end: u64,
        /// number of words the area has
        count: u32,
    },
    /// A notification value of 0 means "not set" and cannot be written.
    #[error("notification value 0 is not allowed: 0 means 'not notified'")]
    ZeroValue,
    /// `waitsome` was asked for an empty range.
    #[error("notify_waitsome needs at least one notification id, got num = 0")]
    EmptyRange,
}

/// How a waiter on this area learns that a word changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WakeMode {
    /// Every writer is a CPU thread that bumps `sequence` and wakes sleepers
    /// (shared-memory writers, the progress engine): waiters sleep on a futex.
    Futex,
    /// Some writer cannot wake anybody (a GPU kernel storing over PCIe):
    /// waiters nap on the futex with an exponential back-off capped at this
    /// interval (CPU writers still wake them at once).
    Poll(Duration),
}

/// Longest nap of a sleeping waiter on an area with silent writers, unless
/// [`WakeMode::Poll`] gives another cap.
pub const SILENT_WRITER_NAP_CAP: Duration = Duration::from_micros(500);

/// How long a waiter spins before it sleeps. Short: on an oversubscribed
/// machine a spinning waiter steals the core its writer needs.
pub const DEFAULT_SPIN: Duration = Duration::from_micros(50);

/// Paced polls between two clock readings of a spinning waiter (a few
/// microseconds: a pause is ~10-50 ns).
const SPIN_CHUNK: u32 = 256;

/// Paced polls between two looks at [`SpinWork`] while spinning: short,
/// so that work posted for this waiter (a peer's copy, some tens of
/// microseconds) is taken up within a microsecond or two.
const SPIN_CHUNK_WITH_WORK: u32 = 32;

/// Work a waiter does while it spins, between polls of its words.
///
/// [`SpinWork::run`] is called every few dozen polls during the spin phase
/// of every wait on an area that carries it. It must be cheap when there is
/// nothing to do (one load), must not wait for anything itself, and returns
/// whether it did some work; a waiter that did work spins anew for its
/// whole budget afterwards, because what it helped with is likely about to
/// set its word.
///
/// ```
/// use gaspi_notify::{NotificationArea, SpinWork, WakeMode};
/// use std::sync::atomic::{AtomicU32, Ordering};
/// use std::sync::Arc;
///
/// #[derive(Debug, Default)]
/// struct Count(AtomicU32);
/// impl SpinWork for Count {
///     fn run(&self) -> bool {
///         self.0.fetch_add(1, Ordering::Relaxed);
///         false
///     }
/// }
///
/// let mut mem = vec![0u64; NotificationArea::bytes_for(4).div_ceil(8)];
/// // SAFETY: mem is 8-aligned, big enough and outlives the area.
/// let mut area = unsafe {
///     NotificationArea::from_raw(mem.as_mut_ptr().cast(), 4, WakeMode::Futex)
/// };
/// let work = Arc::new(Count::default());
/// area.set_spin_work(work.clone());
/// let deadline = std::time::Instant::now() + std::time::Duration::from_millis(1);
/// assert_eq!(area.waitsome(0, 4, Some(deadline)).unwrap(), None);
/// assert!(work.0.load(Ordering::Relaxed) > 0);
/// ```
pub trait SpinWork: Send + Sync + std::fmt::Debug {
    /// Does whatever work there is now; returns whether there was any.
    fn run(&self) -> bool;

    /// Paced polls of the words between two calls of [`SpinWork::run`]
    /// (and two clock readings): fewer for work that is itself the way the
    /// word gets set (reading the socket a notification arrives on), so
    /// that it is looked at within a fraction of a microsecond.
    fn polls_between(&self) -> u32 {
        SPIN_CHUNK_WITH_WORK
    }

    /// Called once a wait saw a word set, before it returns: for work that
    /// also sets other words and must have set those it can before the
    /// waiter goes on (a completion queue in which earlier notifications
    /// wait while a later word was written directly). Nothing by default.
    fn settle(&self) {}
}

/// A view of a notification area in memory shared with other processes.
///
/// The view does not own the memory; whoever created it (a segment) keeps the
/// mapping alive for as long as the view exists.
#[derive(Debug)]
pub struct NotificationArea {
    base: *mut u8,
    count: u32,
    wake: WakeMode,
    spin: Duration,
    spin_work: Option<std::sync::Arc<dyn SpinWork>>,
}

// SAFETY: the area is only ever accessed through atomic operations on the
// words and the header, which are safe to perform from any thread; the raw
// pointer is valid for the lifetime promised by the caller of `from_raw`.
unsafe impl Send for NotificationArea {}
// SAFETY: as for `Send`: all accesses are atomic.
unsafe impl Sync for NotificationArea {}

impl NotificationArea {
    /// Bytes a region must have to hold `count` notification words.
    ///
    /// ```
    /// assert_eq!(gaspi_notify::NotificationArea::bytes_for(16), 128 + 64);
    /// ```
    pub const fn bytes_for(count: u32) -> usize {
        HEADER_BYTES + count as usize * 4
    }

    /// Views `base` as an area of `count` words.
    ///
    /// # Safety
    /// `base` must be 4-byte aligned, valid for reads and writes of
    /// [`Self::bytes_for`]`(count)` bytes, and stay mapped for the lifetime of
    /// the returned value. Other processes may access the same bytes, but only
    /// through atomic 32-bit operations (which is what every user of this
    /// crate does).
    pub unsafe fn from_raw(base: *mut u8, count: u32, wake: WakeMode) -> Self {
        debug_assert_eq!(base as usize % 4, 0);
        NotificationArea {
            base,
            count,
            wake,
            spin: DEFAULT_SPIN,
            spin_work: None,
        }
    }

    /// Gives waiters on this area work to do while they spin (see
    /// [`SpinWork`]).
    pub fn set_spin_work(&mut self, work: std::sync::Arc<dyn SpinWork>) {
        self.spin_work = Some(work);
    }

    /// Polls per look at the clock (and at the spin work) while spinning.
    fn spin_chunk(&self) -> u32 {
        match &self.spin_work {
            Some(work) => work.polls_between().max(1),
            None => SPIN_CHUNK,
        }
    }

    /// Changes how long waiters spin before sleeping.
    pub fn set_spin(&mut self, spin: Duration) {
        self.spin = spin;
    }

    /// Number of notification words.
    pub fn count(&self) -> u32 {
        self.count
    }

    /// Start of the region (header included), for peers that map it.
    pub fn base(&self) -> *mut u8 {
        self.base
    }

    fn header(&self, index: usize) -> &AtomicU32 {
        // SAFETY: the header has two u32 fields within the first HEADER_BYTES
        // bytes of a region valid for the lifetime of `self` (from_raw's
        // contract); AtomicU32 has the size and alignment of u32.
        unsafe { &*(self.base.add(index * 4) as *const AtomicU32) }
    }

    fn sequence(&self) -> &AtomicU32 {
        self.header(0)
    }

    fn sleepers(&self) -> &AtomicU32 {
        self.header(1)
    }

    fn silent_writers(&self) -> &AtomicU32 {
        self.header(2)
    }

    /// Declares that a writer which cannot make the wake-up system call (a
    /// GPU kernel, a stream memory operation) may store into this area from
    /// now on, so waiters nap briefly instead of sleeping until woken. Any
    /// process mapping the area may call it; it cannot be undone.
    pub fn mark_silent_writer(&self) {
        if self.silent_writers().load(Ordering::Relaxed) == 0 {
            self.silent_writers().store(1, Ordering::SeqCst);
        }
    }

    /// Whether [`Self::mark_silent_writer`] was called on this area.
    pub fn has_silent_writers(&self) -> bool {
        self.silent_writers().load(Ordering::Relaxed) != 0
    }

    /// The word of notification `id`, unchecked.
    fn word(&self, id: u32) -> &AtomicU32 {
        debug_assert!(id < self.count);
        // SAFETY: id < count, so the word lies inside the region
        // (bytes_for(count)), which from_raw promises is valid and aligned.
        unsafe { &*(self.base.add(HEADER_BYTES + id as usize * 4) as *const AtomicU32) }
    }

    /// Checks that `begin..begin+num` is a non-empty range inside the area.
    pub fn check_range(&self, begin: u32, num: u32) -> Result<(), NotifyError> {
        if num == 0 {
            return Err(NotifyError::EmptyRange);
        }
        let end = begin as u64 + num as u64;
        if end > self.count as u64 {
            return Err(NotifyError::OutOfRange {
                begin,
                end,
                count: self.count,
            });
        }
        Ok(())
    }

    /// Checks a single id and a value before anything is written.
    pub fn check_set(&self, id: u32, value: u32) -> Result<(), NotifyError> {
        self.check_range(id, 1)?;
        if value == 0 {
            return Err(NotifyError::ZeroValue);
        }
        Ok(())
    }

    /// Stores `value` into word `id` and wakes sleeping waiters.
    ///
    /// The store is a release: every write this thread made before (the data
    /// of a `write_notify`) is visible to whoever observes the word with an
    /// acquire load.
    #[inline]
    pub fn set(&self, id: u32, value: u32) -> Result<(), NotifyError> {
        self.check_set(id, value)?;
        self.word(id).store(value, Ordering::Release);
        self.signal();
        Ok(())
    }

    /// Adds `value` to word `id` (wrapping) and wakes waiters; returns the old value.
    pub fn add(&self, id: u32, value: u32) -> Result<u32, NotifyError> {
        self.check_set(id, value)?;
        let old = self.word(id).fetch_add(value, Ordering::AcqRel);
        self.signal();
        Ok(old)
    }

    /// Tells sleepers that some word may have changed.
    ///
    /// The sequence bump is SeqCst so that it is ordered before the load of
    /// `sleepers`; a waiter increments `sleepers` (SeqCst) before it reads the
    /// sequence and rescans. Either the waiter's rescan sees our word, or we
    /// see its `sleepers` and wake it (its futex_wait then fails on the changed
    /// sequence or is woken). This is the classic event-count handshake.
    pub fn signal(&self) {
        self.sequence().fetch_add(1, Ordering::SeqCst);
        if self.sleepers().load(Ordering::SeqCst) != 0 {
            futex::wake_all(self.sequence());
        }
    }

    /// Reads word `id` with an acquire load (0 when not set).
    pub fn get(&self, id: u32) -> Result<u32, NotifyError> {
        self.check_range(id, 1)?;
        Ok(self.word(id).load(Ordering::Acquire))
    }

    /// Atomically takes the value of word `id`, leaving 0; returns the old value.
    pub fn reset(&self, id: u32) -> Result<u32, NotifyError> {
        self.check_range(id, 1)?;
        Ok(self.word(id).swap(0, Ordering::AcqRel))
    }

    /// Scans `begin..begin+num` once; returns the first id whose word is set.
    pub fn scan(&self, begin: u32, num: u32) -> Option<u32> {
        (begin..begin + num).find(|&id| self.word(id).load(Ordering::Acquire) != 0)
    }

    /// Waits until a word of `begin..begin+num` is non-zero and returns its id.
    ///
    /// `None` as `deadline` waits forever; `Some(now)` tests once. Returns
    /// `Ok(None)` when the deadline passed with nothing set.
    pub fn waitsome(
        &self,
        begin: u32,
        num: u32,
        deadline: Option<Instant>,
    ) -> Result<Option<u32>, NotifyError> {
        Ok(self.waitsome_timed(begin, num, deadline)?.0)
    }

    /// [`Self::waitsome`], also returning about how long it waited (see
    /// [`Self::wait_until_timed`]).
    ///
    /// A single id is polled by [`poll::poll_word`], a loop whose placement
    /// in the binary does not move with the surrounding code.
    pub fn waitsome_timed(
        &self,
        begin: u32,
        num: u32,
        deadline: Option<Instant>,
    ) -> Result<(Option<u32>, Duration), NotifyError> {
        self.check_range(begin, num)?;
        if num != 1 {
            return Ok(self.wait_until_timed(deadline, || self.scan(begin, num)));
        }
        let word = self.word(begin);
        Ok(self.wait_with(deadline, |polls| {
            let v = match polls {
                0 => word.load(Ordering::Acquire),
                n => poll::poll_word(word, n),
            };
            (v != 0).then_some(begin)
        }))
    }

    /// Waits until `ready` returns `Some`, spinning briefly, then sleeping.
    ///
    /// `ready` is re-evaluated after every change of the area (and, to let
    /// callers observe outside events such as a dead peer, at least every
    /// few milliseconds, and whenever [`Self::signal`] is called). Returns
    /// `None` once `deadline` has passed.
    pub fn wait_until<R>(
        &self,
        deadline: Option<Instant>,
        ready: impl FnMut() -> Option<R>,
    ) -> Option<R> {
        self.wait_until_timed(deadline, ready).0
    }

    /// [`Self::wait_until`], also returning about how long it waited.
    ///
    /// The time comes from the clock readings the wait makes anyway (one
    /// when it starts to spin, then one every few hundred polls), so a
    /// notification that arrives during the spin costs no extra clock read
    /// on its way back to the caller: a `clock_gettime` is ~20-30 ns, a
    /// seventh of a shared-memory round trip. It undercounts by at most
    /// one polling interval (a few microseconds).
    pub fn wait_until_timed<R>(
        &self,
        deadline: Option<Instant>,
        mut ready: impl FnMut() -> Option<R>,
    ) -> (Option<R>, Duration) {
        self.wait_with(deadline, |polls| {
            if polls == 0 {
                return ready();
            }
            (0..polls).find_map(|_| {
                // One pause per check: a pause costs up to ~140 cycles on
                // recent x86 cores, more than a scan of a few words.
                std::hint::spin_loop();
                ready()
            })
        })
    }

    /// The wait itself. `check(0)` checks once; `check(n)` makes `n` paced
    /// checks, between which the clock is read and the spin work runs.
    /// Once something was found, the spin work settles ([`SpinWork::settle`]).
    fn wait_with<R>(
        &self,
        deadline: Option<Instant>,
        check: impl FnMut(u32) -> Option<R>,
    ) -> (Option<R>, Duration) {
        let found = self.wait_for(deadline, check);
        if found.0.is_some() {
            if let Some(w) = &self.spin_work {
                w.settle();
            }
        }
        found
    }

    /// [`Self::wait_with`] before it settles.
    fn wait_for<R>(
        &self,
        deadline: Option<Instant>,
        mut check: impl FnMut(u32) -> Option<R>,
    ) -> (Option<R>, Duration) {
        if let Some(r) = check(0) {
            return (Some(r), Duration::ZERO);
        }
        let start = Instant::now();
        let mut spin_end = start + self.spin;
        let mut last = start;
        let polls = self.spin_chunk();
        // Spin phase: paced re-scans, checking the clock between chunks.
        loop {
            if let Some(r) = check(polls) {
                return (Some(r), last - start);
            }
            last = Instant::now();
            if deadline.is_some_and(|d| last >= d) {
                // A test (or a timeout run out): callers poll such calls in
                // a loop (GASPI_TEST). Help along once what the spin work
                // helps, and give the core away: with more ranks than
                // cores, the peer whose signal this waits for may be
                // waiting for this core (issue 42: a polled barrier took
                // 46 times the blocking one with 4 ranks on 2 cores).
                if let Some(w) = &self.spin_work {
                    w.run();
                }
                std::thread::yield_now();
                return (None, last - start);
            }
            if self.spin_work.as_ref().is_some_and(|w| w.run()) {
                // Whatever was helped along is likely what sets our word:
                // keep spinning rather than go to sleep right before it.
                last = Instant::now();
                spin_end = last + self.spin;
                continue;
            }
            if last >= spin_end {
                break;
            }
        }
        // Sleep phase.
        let mut backoff = Duration::from_micros(20);
        loop {
            let now = Instant::now();
            let left = match deadline {
                Some(d) if now >= d => return (check(0), now - start),
                Some(d) => Some(d - now),
                None => None,
            };
            // Nap on the futex: CPU writers wake us at once. Without silent
            // writers, wake up at least every 10 ms so a predicate that
            // watches something outside the area (peer health) is
            // re-evaluated; with them, after a short, growing nap.
            let cap = match self.wake {
                WakeMode::Poll(cap) => Some(cap),
                WakeMode::Futex if self.has_silent_writers() => Some(SILENT_WRITER_NAP_CAP),
                WakeMode::Futex => None,
            };
            let slice = match cap {
                Some(cap) => {
                    let nap = backoff.min(cap);
                    backoff = (backoff * 2).min(cap);
                    nap
                }
                None => Duration::from_millis(10),
            };
            self.sleepers().fetch_add(1, Ordering::SeqCst);
            let seen = self.sequence().load(Ordering::SeqCst);
            if let Some(r) = check(0) {
                self.sleepers().fetch_sub(1, Ordering::SeqCst);
                return (Some(r), now - start);
            }
            let nap = left.map_or(slice, |l| l.min(slice));
            futex::wait(self.sequence(), seen, nap);
            self.sleepers().fetch_sub(1, Ordering::SeqCst);
            if let Some(r) = check(0) {
                return (Some(r), start.elapsed());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    struct Owned {
        _mem: Vec<u64>,
        area: NotificationArea,
    }

    fn area(count: u32) -> Owned {
        let mut mem = vec![0u64; NotificationArea::bytes_for(count).div_ceil(8)];
        // SAFETY: mem is 8-aligned, large enough and lives as long as the area
        // (both are fields of Owned, and the Vec's heap buffer never moves).
        let area = unsafe {
            NotificationArea::from_raw(mem.as_mut_ptr() as *mut u8, count, WakeMode::Futex)
        };
        Owned { _mem: mem, area }
    }

    #[test]
    fn set_then_waitsome_finds_the_first_set_id_and_reset_clears_it() {
        let o = area(64);
        o.area.set(40, 7).unwrap();
        o.area.set(12, 3).unwrap();
        assert_eq!(o.area.waitsome(0, 64, None).unwrap(), Some(12));
        assert_eq!(o.area.waitsome(13, 51, None).unwrap(), Some(40));
        assert_eq!(o.area.reset(12).unwrap(), 3);
        assert_eq!(o.area.reset(12).unwrap(), 0);
        assert_eq!(o.area.waitsome(0, 64, None).unwrap(), Some(40));
    }

    #[test]
    fn bad_input_is_refused_and_changes_nothing() {
        let o = area(8);
        assert_eq!(o.area.set(3, 0), Err(NotifyError::ZeroValue));
        assert!(matches!(
            o.area.set(8, 1),
            Err(NotifyError::OutOfRange { .. })
        ));
        assert!(matches!(
            o.area.waitsome(4, 5, None),
            Err(NotifyError::OutOfRange { .. })
        ));
        assert_eq!(o.area.waitsome(0, 0, None), Err(NotifyError::EmptyRange));
        assert!(matches!(
            o.area.reset(9),
            Err(NotifyError::OutOfRange { .. })
        ));
        assert_eq!(o.area.scan(0, 8), None);
    }

    #[test]
    fn test_deadline_returns_at_once_when_nothing_is_set() {
        let o = area(8);
        let t = Instant::now();
        assert_eq!(o.area.waitsome(0, 8, Some(Instant::now())).unwrap(), None);
        // A hang guard: how promptly is a benchmark's figure.
        assert!(t.elapsed() < Duration::from_secs(10));
        let t = Instant::now();
        let d = Instant::now() + Duration::from_millis(30);
        assert_eq!(o.area.waitsome(0, 8, Some(d)).unwrap(), None);
        assert!(t.elapsed() >= Duration::from_millis(30));
    }

    #[test]
    fn a_silent_writer_is_seen_by_a_sleeping_waiter_without_a_wake() {
        let o = Arc::new(area(4));
        assert!(!o.area.has_silent_writers());
        o.area.mark_silent_writer();
        assert!(o.area.has_silent_writers());
        let o2 = o.clone();
        let waiter = std::thread::spawn(move || o2.area.waitsome(0, 4, None).unwrap());
        std::thread::sleep(Duration::from_millis(100));
        // A store without the sequence bump, as a GPU kernel makes it.
        o.area.word(1).store(5, Ordering::Release);
        assert_eq!(waiter.join().unwrap(), Some(1));
    }

    #[test]
    fn a_single_id_is_found_by_the_spinning_and_the_sleeping_waiter() {
        let o = Arc::new(area(4));
        for delay_ms in [0, 100] {
            let o2 = o.clone();
            let waiter = std::thread::spawn(move || o2.area.waitsome_timed(3, 1, None).unwrap());
            std::thread::sleep(Duration::from_millis(delay_ms));
            o.area.set(3, 4).unwrap();
            let (found, waited) = waiter.join().unwrap();
            assert_eq!(found, Some(3));
            // A hang guard (a busy machine may run the waiter late).
            assert!(waited <= Duration::from_millis(delay_ms + 10_000));
            assert_eq!(o.area.reset(3).unwrap(), 4);
        }
        // Nothing set: a test deadline gives up at once.
        let (found, _) = o.area.waitsome_timed(3, 1, Some(Instant::now())).unwrap();
        assert_eq!(found, None);
    }

    #[test]
    fn a_sleeping_waiter_is_woken_by_a_set_from_another_thread() {
        let o = Arc::new(area(4));
        let o2 = o.clone();
        let waiter = std::thread::spawn(move || o2.area.waitsome(0, 4, None).unwrap());
        // Long enough that the waiter is past its spin budget and asleep.
        std::thread::sleep(Duration::from_millis(100));
        o.area.set(2, 9).unwrap();
        assert_eq!(waiter.join().unwrap(), Some(2));
    }

    /// Spin work that counts its runs and reports work while `busy` is
    /// set (sleeping 100 us per such run, as a copy would take).
    #[derive(Debug)]
    struct Helper {
        start: Instant,
        busy: std::sync::atomic::AtomicBool,
        runs: std::sync::atomic::AtomicU64,
        last_run_us: std::sync::atomic::AtomicU64,
    }

    impl SpinWork for Helper {
        fn run(&self) -> bool {
            self.runs.fetch_add(1, Ordering::Relaxed);
            let at = self.start.elapsed();
            self.last_run_us
                .store(at.as_micros() as u64, Ordering::Relaxed);
            let busy = self.busy.load(Ordering::Relaxed);
            if busy {
                std::thread::sleep(Duration::from_micros(100));
            }
            busy
        }
    }

    fn helper(busy: bool) -> Arc<Helper> {
        Arc::new(Helper {
            start: Instant::now(),
            busy: busy.into(),
            runs: Default::default(),
            last_run_us: Default::default(),
        })
    }

    /// Polls `cond` until it holds; panics (naming `what`) after 20 s, a
    /// hang guard: the verdicts below never depend on how soon.
    fn eventually(what: &str, cond: impl Fn() -> bool) {
        let until = Instant::now() + Duration::from_secs(20);
        while !cond() {
            assert!(Instant::now() < until, "never {what}");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Once the waiter sleeps, the work it ran stays put for `quiet`.
    fn no_runs_while_asleep(o: &Owned, work: &Helper, quiet: Duration) {
        eventually("went to sleep", || {
            o.area.sleepers().load(Ordering::SeqCst) == 1
        });
        let runs = work.runs.load(Ordering::Relaxed);
        std::thread::sleep(quiet);
        assert_eq!(work.runs.load(Ordering::Relaxed), runs, "ran while asleep");
    }

    #[test]
    fn spin_work_runs_while_spinning_and_not_once_asleep() {
        let mut o = area(4);
        o.area.set_spin(Duration::from_millis(2));
        let work = helper(false);
        o.area.set_spin_work(work.clone());
        let o = Arc::new(o);
        let o2 = o.clone();
        let waiter = std::thread::spawn(move || o2.area.waitsome(2, 1, None).unwrap());
        // The spin phase runs the work before it checks its budget.
        eventually("ran the work", || work.runs.load(Ordering::Relaxed) > 0);
        no_runs_while_asleep(&o, &work, Duration::from_millis(50));
        o.area.set(2, 1).unwrap();
        assert_eq!(waiter.join().unwrap(), Some(2));
    }

    #[test]
    fn spin_work_that_did_something_keeps_the_waiter_spinning() {
        let mut o = area(4);
        o.area.set_spin(Duration::from_millis(1));
        let work = helper(true);
        o.area.set_spin_work(work.clone());
        let o = Arc::new(o);
        let o2 = o.clone();
        let waiter = std::thread::spawn(move || o2.area.waitsome(2, 1, None).unwrap());
        // The work runs only while the waiter spins: a run 30 ms in is a
        // waiter far past its 1 ms budget, kept spinning by the work.
        eventually("ran 30 ms in", || {
            work.last_run_us.load(Ordering::Relaxed) >= 30_000
        });
        assert_eq!(o.area.sleepers().load(Ordering::SeqCst), 0, "went to sleep");
        // The work stops reporting progress: the waiter goes to sleep.
        work.busy.store(false, Ordering::Relaxed);
        no_runs_while_asleep(&o, &work, Duration::from_millis(20));
        o.area.set(2, 1).unwrap();
        assert_eq!(waiter.join().unwrap(), Some(2));
    }
}
