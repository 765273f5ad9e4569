//! Statistics: calls per operation, bytes written and read, time spent waiting.
//!
//! Always on, so they must cost next to nothing on the write path, which
//! is tuned to a few tens of nanoseconds (see `transport/tables.rs`). A
//! shared atomic counter would cost a locked read-modify-write per call
//! and bounce its cache line between threads. Instead every thread that calls the runtime
//! gets its own block of counters, registered once with the context; only
//! that thread writes it, with a relaxed load and a relaxed store (no
//! read-modify-write, no lock). A reader sums the blocks of all threads.
//! Resetting does not write into other threads' blocks (that would race with
//! their stores): it records the current sums as a baseline that later
//! readings subtract.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

macro_rules! ops {
    ($($v:ident => $name:literal),* $(,)?) => {
        /// The operations whose calls are counted.
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Op { $($v),* }
        const OP_NAMES: &[&str] = &[$($name),*];
    };
}

ops! {
    Write => "write",
    WriteNotify => "write_notify",
    Read => "read",
    ReadNotify => "read_notify",
    Notify => "notify",
    WriteList => "write_list",
    WriteListNotify => "write_list_notify",
    ReadList => "read_list",
    ReadListNotify => "read_list_notify",
    Wait => "wait",
    NotifyWaitsome => "notify_waitsome",
    Barrier => "barrier",
    Allreduce => "allreduce",
    AtomicFetchAdd => "atomic_fetch_add",
    AtomicCompareSwap => "atomic_compare_swap",
    PassiveSend => "passive_send",
    PassiveReceive => "passive_receive",
    OwnerCopy => "owner_copy",
}

const N_OPS: usize = OP_NAMES.len();
const BYTES_WRITTEN: usize = N_OPS;
const BYTES_READ: usize = N_OPS + 1;
const WAIT_NS: usize = N_OPS + 2;
const COPIED_FOR_PEERS: usize = N_OPS + 3;
const CELLS: usize = N_OPS + 4;

/// Which byte counter a call adds to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Counter {
    BytesWritten,
    BytesRead,
    None,
}

/// One thread's counters; written only by that thread.
#[derive(Debug)]
struct Cells([AtomicU64; CELLS]);

impl Cells {
    #[inline]
    fn bump(&self, i: usize, by: u64) {
        // Single writer: a load and a store cannot lose an update.
        let c = &self.0[i];
        c.store(
            c.load(Ordering::Relaxed).wrapping_add(by),
            Ordering::Relaxed,
        );
    }
}

thread_local! {
    /// This thread's counters and the id of the context they belong to; a
    /// plain `Cell` of `Copy` data, so reading it is one TLS load (no
    /// borrow flag, no destructor registration).
    static MINE: Cell<(u64, *const Cells)> = const { Cell::new((0, std::ptr::null())) };
}

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// The counters of one context.
#[derive(Debug)]
pub(crate) struct Stats {
    id: u64,
    threads: Mutex<Vec<Arc<Cells>>>,
    baseline: Mutex<[u64; CELLS]>,
}

impl Default for Stats {
    fn default() -> Self {
        Stats {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            threads: Mutex::new(Vec::new()),
            baseline: Mutex::new([0; CELLS]),
        }
    }
}

impl Stats {
    #[inline(always)]
    fn with_cells(&self, f: impl FnOnce(&Cells)) {
        let (id, cells) = MINE.with(|m| m.get());
        if id == self.id {
            // SAFETY: the pointer was taken from an Arc that this Stats
            // (same id: ids are never reused) keeps in `threads` for as long
            // as it lives, and we are called through it, so it is alive.
            f(unsafe { &*cells })
        } else {
            self.register(f)
        }
    }

    /// First call of this thread on this context: gives it its counters.
    #[cold]
    fn register(&self, f: impl FnOnce(&Cells)) {
        let cells = Arc::new(Cells(std::array::from_fn(|_| AtomicU64::new(0))));
        MINE.with(|m| m.set((self.id, Arc::as_ptr(&cells))));
        f(&cells);
        self.threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(cells);
    }

    /// Counts one call of `op` moving `bytes` bytes into `counter`.
    #[inline(always)]
    pub fn call(&self, op: Op, counter: Counter, bytes: u64) {
        self.with_cells(|c| {
            c.bump(op as usize, 1);
            match counter {
                Counter::BytesWritten => c.bump(BYTES_WRITTEN, bytes),
                Counter::BytesRead => c.bump(BYTES_READ, bytes),
                Counter::None => {}
            }
        });
    }

    /// Adds time spent blocked in a call.
    pub fn waited(&self, d: Duration) {
        let ns = d.as_nanos().min(u64::MAX as u128) as u64;
        self.with_cells(|c| c.bump(WAIT_NS, ns));
    }

    /// Adds bytes this rank's waiters copied for a peer's write (a
    /// target-assisted copy, `protocol/assisted_copy.rs`).
    pub fn copied_for_peers(&self, bytes: u64) {
        self.with_cells(|c| c.bump(COPIED_FOR_PEERS, bytes));
    }

    fn totals(&self) -> [u64; CELLS] {
        let mut sum = [0u64; CELLS];
        for t in self
            .threads
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            for (s, c) in sum.iter_mut().zip(t.0.iter()) {
                *s = s.wrapping_add(c.load(Ordering::Relaxed));
            }
        }
        sum
    }

    /// The counters since the last reset.
    pub fn read(&self) -> Statistics {
        let base = *self.baseline.lock().unwrap_or_else(|e| e.into_inner());
        let now = self.totals();
        let v = |i: usize| now[i].wrapping_sub(base[i]);
        Statistics {
            bytes_written: v(BYTES_WRITTEN),
            bytes_read: v(BYTES_READ),
            wait_time: Duration::from_nanos(v(WAIT_NS)),
            bytes_copied_for_peers: v(COPIED_FOR_PEERS),
            calls: OP_NAMES
                .iter()
                .enumerate()
                .map(|(i, n)| (*n, v(i)))
                .collect(),
        }
    }

    /// Starts counting from zero again.
    pub fn reset(&self) {
        let now = self.totals();
        *self.baseline.lock().unwrap_or_else(|e| e.into_inner()) = now;
    }
}

/// A reading of the statistics of this rank (see [`crate::Gaspi::statistics`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Statistics {
    /// Bytes this rank wrote into segments (its own or peers'): `write`,
    /// `write_notify`, the write lists, and payloads of `passive_send`.
    pub bytes_written: u64,
    /// Bytes this rank read from segments: `read`, `read_notify`, the read
    /// lists, and payloads taken by `passive_receive`.
    pub bytes_read: u64,
    /// Time spent blocked in waiting calls (`notify_waitsome` once it stops
    /// finding a word at once, `barrier`, `allreduce`, `passive_receive`,
    /// atomics).
    pub wait_time: Duration,
    /// Bytes of peers' large writes into this rank's segments that this
    /// rank's waiters copied themselves while they waited (target-assisted
    /// copies, see [`crate::Config::copy_assist_min`]); also counted in
    /// the writers' `bytes_written`, not in this rank's.
    pub bytes_copied_for_peers: u64,
    /// Calls per operation, by the operation's name.
    pub calls: Vec<(&'static str, u64)>,
}

impl Statistics {
    /// Calls of the operation named `op` (e.g. `"write_notify"`); 0 for a
    /// name that is not counted.
    pub fn calls_of(&self, op: &str) -> u64 {
        self.calls
            .iter()
            .find(|(n, _)| *n == op)
            .map_or(0, |(_, c)| *c)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_from_several_threads_add_up_and_reset_to_zero() {
        let s = Arc::new(Stats::default());
        std::thread::scope(|sc| {
            for _ in 0..4 {
                let s = s.clone();
                sc.spawn(move || {
                    for _ in 0..1000 {
                        s.call(Op::Write, Counter::BytesWritten, 8);
                    }
                });
            }
        });
        s.call(Op::Read, Counter::BytesRead, 3);
        let r = s.read();
        assert_eq!(r.calls_of("write"), 4000);
        assert_eq!(r.bytes_written, 32_000);
        assert_eq!((r.calls_of("read"), r.bytes_read), (1, 3));
        s.reset();
        let r = s.read();
        assert_eq!((r.calls_of("write"), r.bytes_written), (0, 0));
        s.call(Op::Write, Counter::BytesWritten, 1);
        assert_eq!(s.read().bytes_written, 1);
        s.copied_for_peers(5);
        assert_eq!(s.read().bytes_copied_for_peers, 5);
    }
}
