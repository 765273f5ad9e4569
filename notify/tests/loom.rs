//! loom models of the notification words (set / waitsome / reset with
//! racing writers and waiters) and of the futex wait / wake under them
//! (decision 0078). Run: `cargo test --release -p gaspi-notify --features
//! loom --test loom`.
//!
//! The area's words live in raw (often shared) memory that loom cannot
//! instrument, so these are models of the protocol in `src/lib.rs`: the
//! same operations with the same orderings (`set`: release store, then
//! `signal`: SeqCst bump of `sequence`, SeqCst load of `sleepers`, wake;
//! the sleep phase of `wait_for`: SeqCst `sleepers` +1, SeqCst load of
//! `sequence`, re-scan, futex wait on the value seen, `sleepers` -1,
//! re-scan; `reset`: AcqRel swap). The futex is modelled as the kernel
//! does it: the value check and the sleep under one bucket lock, the wake
//! under it too. loom treats SeqCst *accesses* as AcqRel (its README: false
//! alarms) but models `fence(SeqCst)` exactly, so each SeqCst access pair
//! of the handshake (the writer's bump then load, the sleeper's increment
//! then load) is written here as the access followed by `fence(SeqCst)`,
//! which gives the store-buffering guarantee the code relies on; the model
//! without those fences deadlocks (a lost wake-up), and a test checks that
//! loom finds it. The models' waits have no timeout (the real one naps at
//! most 10 ms), so a lost wake-up shows as a deadlock, which loom reports.
//! Change both together.
#![cfg(feature = "loom")]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{fence, AtomicU32, Ordering};
use loom::sync::{Arc, Condvar, Mutex};
use std::sync::atomic::AtomicUsize;

/// The kernel's futex on one word: compare and sleep atomically with
/// respect to wakes.
#[derive(Default)]
struct Futex {
    bucket: Mutex<()>,
    cv: Condvar,
}

impl Futex {
    /// `futex::wait`: sleeps while `word` holds `expected`.
    fn wait(&self, word: &AtomicU32, expected: u32) {
        let g = self.bucket.lock().unwrap();
        if word.load(Ordering::SeqCst) != expected {
            return;
        }
        drop(self.cv.wait(g).unwrap());
    }
    /// `futex::wake_all`.
    fn wake_all(&self) {
        let _g = self.bucket.lock().unwrap();
        self.cv.notify_all();
    }
}

/// The area: its words, the header's `sequence` and `sleepers`, and the
/// data each word announces (a segment's bytes, written before `set`).
struct Area {
    words: [AtomicU32; 2],
    sequence: AtomicU32,
    sleepers: AtomicU32,
    futex: Futex,
    data: [UnsafeCell<u32>; 2],
    /// The SeqCst handshake (false: the mutant without it).
    handshake: bool,
}

// SAFETY: `data[i]` is written only by writer i before it sets word i
// (release) and read only after word i was seen set (acquire); loom checks
// exactly that and reports a race otherwise.
unsafe impl Sync for Area {}
unsafe impl Send for Area {}

impl Area {
    fn new() -> Area {
        Area {
            words: [AtomicU32::new(0), AtomicU32::new(0)],
            sequence: AtomicU32::new(0),
            sleepers: AtomicU32::new(0),
            futex: Futex::default(),
            data: [UnsafeCell::new(0), UnsafeCell::new(0)],
            handshake: true,
        }
    }

    /// A SeqCst access's place in the single total order (see the top).
    fn seqcst(&self) {
        if self.handshake {
            fence(Ordering::SeqCst);
        }
    }

    /// `write_notify` over shared memory: the data, then `set`.
    fn write_notify(&self, id: usize, data: u32, value: u32) {
        self.data[id].with_mut(|p| unsafe { *p = data });
        self.set(id, value);
    }

    /// `NotificationArea::set`.
    fn set(&self, id: usize, value: u32) {
        self.words[id].store(value, Ordering::Release);
        self.signal();
    }

    /// `NotificationArea::signal`.
    fn signal(&self) {
        self.sequence.fetch_add(1, Ordering::SeqCst);
        self.seqcst();
        if self.sleepers.load(Ordering::SeqCst) != 0 {
            self.futex.wake_all();
        }
    }

    /// `NotificationArea::scan` of every word.
    fn scan(&self) -> Option<usize> {
        (0..self.words.len()).find(|&i| self.words[i].load(Ordering::Acquire) != 0)
    }

    /// `NotificationArea::waitsome` without a deadline: the first check,
    /// then the sleep phase (the spin phase only re-scans).
    fn waitsome(&self) -> usize {
        if let Some(i) = self.scan() {
            return i;
        }
        loop {
            self.sleepers.fetch_add(1, Ordering::SeqCst);
            self.seqcst();
            let seen = self.sequence.load(Ordering::SeqCst);
            if let Some(i) = self.scan() {
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                return i;
            }
            self.futex.wait(&self.sequence, seen);
            self.sleepers.fetch_sub(1, Ordering::SeqCst);
            if let Some(i) = self.scan() {
                return i;
            }
        }
    }

    /// `NotificationArea::reset`. The yield before the swap works around
    /// loom 0.7.3's broken atomicity of an RMW racing a plain store
    /// (tokio-rs/loom#254, #389: it lets the store fall between the RMW's
    /// read and write, a history C11 forbids); it adds a scheduling point,
    /// no ordering.
    fn reset(&self, id: usize) -> u32 {
        loom::thread::yield_now();
        self.words[id].swap(0, Ordering::AcqRel)
    }
}

/// Runs `f` under loom, counting the interleavings it explored.
fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(AtomicUsize::new(0));
    let counted = runs.clone();
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    println!(
        "loom {name}: {} interleavings (preemption bound 3)",
        runs.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// Two writers race a waiter: the waiter finds each word once, sees the
/// data written before it, its reset takes the value, and it never sleeps
/// through a set (no lost wake-up).
#[test]
fn loom_two_writers_and_a_waiter_lose_no_notification() {
    model("notifications: 2 writers, 1 waiter", || {
        let area = Arc::new(Area::new());
        let writers: Vec<_> = (0..2)
            .map(|id| {
                let a = area.clone();
                loom::thread::spawn(move || a.write_notify(id, 100 + id as u32, 1 + id as u32))
            })
            .collect();
        let mut seen = [false; 2];
        for _ in 0..2 {
            let id = area.waitsome();
            assert!(!seen[id], "word {id} found twice");
            seen[id] = true;
            assert_eq!(area.reset(id), 1 + id as u32, "reset takes the value set");
            // SAFETY: the word was seen set (acquire): the data is written.
            let data = area.data[id].with(|p| unsafe { *p });
            assert_eq!(data, 100 + id as u32, "the data before the notification");
        }
        for w in writers {
            w.join().unwrap();
        }
        assert_eq!(area.scan(), None, "every word reset");
    });
}

// Not modelled: a reset racing a second set of the same word. loom 0.7.3
// lets a plain store fall inside an RMW (tokio-rs/loom#254, #389; fix
// pending in #391) and reports a history C11 forbids ("reset took 1, then
// the word read 0 after the writer's 2"), with or without a yield before
// the swap. The single swap's atomicity is the hardware's; the model above
// checks that the value a reset takes is the one set.

/// Two waiters on one area, one writer: both wake (wake_all), neither
/// sleeps through the set.
#[test]
fn loom_two_sleeping_waiters_both_wake() {
    model("futex: 2 waiters, 1 waker", || {
        let area = Arc::new(Area::new());
        let waiters: Vec<_> = (0..2)
            .map(|_| {
                let a = area.clone();
                loom::thread::spawn(move || a.waitsome())
            })
            .collect();
        area.set(1, 9);
        for w in waiters {
            assert_eq!(w.join().unwrap(), 1);
        }
        assert_eq!(
            area.sleepers.load(Ordering::SeqCst),
            0,
            "every sleeper left"
        );
    });
}

/// The futex alone: a sleeper on a word and a waker that changes it and
/// wakes: the sleeper always returns (its compare and the wake are
/// ordered by the bucket lock).
#[test]
fn loom_futex_wait_never_misses_the_wake_that_follows_a_change() {
    model("futex: wait vs change + wake", || {
        let word = Arc::new(AtomicU32::new(0));
        let futex = Arc::new(Futex::default());
        let (w2, f2) = (word.clone(), futex.clone());
        let sleeper = loom::thread::spawn(move || {
            while w2.load(Ordering::SeqCst) == 0 {
                f2.wait(&w2, 0);
            }
        });
        word.store(1, Ordering::SeqCst);
        futex.wake_all();
        sleeper.join().unwrap();
    });
}

/// The mutant without the SeqCst handshake: loom finds the lost wake-up
/// (the waiter sleeps although the word is set), which shows that the
/// models above can fail.
#[test]
#[should_panic(expected = "deadlock")]
fn loom_without_the_handshake_a_wake_up_is_lost() {
    loom::model(|| {
        let mut area = Area::new();
        area.handshake = false;
        let area = Arc::new(area);
        let a = area.clone();
        let w = loom::thread::spawn(move || a.set(0, 1));
        assert_eq!(area.waitsome(), 0);
        w.join().unwrap();
    });
}
