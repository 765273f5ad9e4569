//! loom model of the GPU request ring's producer / consumer protocol
//! (`src/ring.rs`'s "Protocol"; decision 0078). Run: `cargo test --release
//! -p gaspi-gpu-kernels --features loom --test loom_ring`.
//!
//! The host side is `RequestRing::try_pop` and `complete_through` with
//! their orderings (tail relaxed load by its only writer, acquire `seq`,
//! field reads, release `tail`; `completed` a release `fetch_max`). The
//! device side is modelled by loom threads doing what
//! `cuda/gaspi_device.cuh` does for one request: `atomicAdd` on the
//! producers' head, wait for room against an acquire of `tail`, write the
//! fields, release-store `seq = ticket + 1`; `gaspi_ring_quiet` waits for
//! `completed` (acquire) before the source buffer is reused. The slots and
//! the source buffers are loom cells: a field read before it is published,
//! or a buffer reused while the engine still reads it, is a race loom
//! reports. Inline requests (decision 0093) carry their data in the
//! slot's payload, written before `seq` and copied out by the engine
//! before it moves `tail`; their source may be reused at once. The real
//! ring lives in pinned memory written by a GPU, which loom cannot
//! instrument; change both together.
#![cfg(feature = "loom")]
// CAPACITY is 1 in the model; `ticket % CAPACITY` keeps the real ring's index.
#![allow(clippy::modulo_one)]

use loom::cell::UnsafeCell;
use loom::sync::atomic::{AtomicU64, Ordering};
use loom::sync::Arc;

/// Slots in the modelled ring: 1, so the second request wraps it (the
/// real ring has at least `RING_MIN_CAPACITY`; the protocol does not
/// depend on the size, and loom's search grows fast with it).
const CAPACITY: u64 = 1;

struct Slot {
    seq: AtomicU64,
    /// The request's fields (one stands for all).
    fields: UnsafeCell<u64>,
    /// The slot's payload (an inline request's data).
    payload: UnsafeCell<u64>,
}

/// The flag bit of `fields` that stands for `FLAG_INLINE`.
const INLINE: u64 = 1 << 63;

struct Ring {
    head: AtomicU64,
    tail: AtomicU64,
    completed: AtomicU64,
    slots: [Slot; CAPACITY as usize],
    /// Each producer's source buffer (the data of its write).
    sources: [UnsafeCell<u64>; 2],
}

// SAFETY: the cells are accessed per the ring protocol, which loom checks.
unsafe impl Sync for Ring {}
unsafe impl Send for Ring {}

impl Ring {
    fn new() -> Ring {
        let slot = || Slot {
            seq: AtomicU64::new(0),
            fields: UnsafeCell::new(0),
            payload: UnsafeCell::new(0),
        };
        Ring {
            head: AtomicU64::new(0),
            tail: AtomicU64::new(0),
            completed: AtomicU64::new(0),
            slots: [slot()],
            sources: [UnsafeCell::new(0), UnsafeCell::new(0)],
        }
    }

    /// A GPU thread posting one request whose data is in `sources[me]`:
    /// returns its ticket.
    fn post(&self, me: usize, data: u64) -> u64 {
        self.post_as(me, data, false)
    }

    /// An inline post (`gaspi_ring_post_inline_thread`): the data from
    /// `sources[me]` goes into the slot's payload before `seq`; returns
    /// the ticket. The source may be reused when it returns.
    fn post_inline(&self, me: usize, data: u64) -> u64 {
        self.post_as(me, data, true)
    }

    /// The producer's protocol for one request, its data in the slot's
    /// payload when `inline`.
    fn post_as(&self, me: usize, data: u64, inline: bool) -> u64 {
        self.sources[me].with_mut(|p| unsafe { *p = data });
        let ticket = self.head.fetch_add(1, Ordering::Relaxed);
        while ticket - self.tail.load(Ordering::Acquire) >= CAPACITY {
            loom::thread::yield_now();
        }
        let slot = &self.slots[(ticket % CAPACITY) as usize];
        // The fields name the source buffer and carry the ticket.
        let mut fields = (me as u64) << 32 | ticket;
        if inline {
            let bytes = self.sources[me].with(|p| unsafe { *p });
            slot.payload.with_mut(|p| unsafe { *p = bytes });
            fields |= INLINE;
        }
        slot.fields.with_mut(|p| unsafe { *p = fields });
        slot.seq.store(ticket + 1, Ordering::Release);
        ticket
    }

    /// `gaspi_ring_quiet`: waits until the engine is done with `ticket`'s
    /// source data; the buffer may be reused after it.
    fn quiet(&self, ticket: u64) {
        while self.completed.load(Ordering::Acquire) < ticket + 1 {
            loom::thread::yield_now();
        }
    }

    /// `RequestRing::try_pop_into`, then the engine reads the source data
    /// (an inline request's from the copy taken before `tail` moved).
    fn try_pop(&self) -> Option<(u64, usize, u64)> {
        let ticket = self.tail.load(Ordering::Relaxed);
        let slot = &self.slots[(ticket % CAPACITY) as usize];
        if slot.seq.load(Ordering::Acquire) != ticket + 1 {
            return None;
        }
        let fields = slot.fields.with(|p| unsafe { *p });
        let inline = (fields & INLINE != 0).then(|| slot.payload.with(|p| unsafe { *p }));
        self.tail.store(ticket + 1, Ordering::Release);
        assert_eq!(
            fields & 0xFFFF_FFFF,
            ticket,
            "the slot holds its own ticket's request"
        );
        let who = ((fields & !INLINE) >> 32) as usize;
        let data = match inline {
            Some(bytes) => bytes,
            None => self.sources[who].with(|p| unsafe { *p }),
        };
        Some((ticket, who, data))
    }

    /// `RequestRing::complete_through`.
    fn complete_through(&self, count: u64) {
        self.completed.fetch_max(count, Ordering::Release);
    }
}

fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let runs = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counted = runs.clone();
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(3);
    b.max_branches = 20_000;
    b.check(move || {
        counted.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        f()
    });
    println!(
        "loom {name}: {} interleavings (preemption bound 3)",
        runs.load(std::sync::atomic::Ordering::Relaxed)
    );
}

/// The engine's loop: pops `n` requests in ticket order, reading each
/// one's source data, completing each after.
fn engine(ring: &Ring, n: usize) -> Vec<(usize, u64)> {
    let mut got = Vec::new();
    while got.len() < n {
        match ring.try_pop() {
            Some((ticket, who, data)) => {
                assert_eq!(ticket, got.len() as u64, "tickets in order");
                got.push((who, data));
                ring.complete_through(ticket + 1);
            }
            None => loom::thread::yield_now(),
        }
    }
    got
}

/// Two requests through a ring of one slot, from two GPU threads' buffers
/// but posted one after the other by one thread (the second waits for
/// room: the ring wraps): the engine pops each once, in ticket order, with
/// the fields written for it and its data. (Two posting threads make
/// three spinning threads, a search loom does not finish in minutes; the
/// ticket `atomicAdd` they add is one RMW.)
#[test]
fn loom_the_ring_delivers_every_request_once_and_whole() {
    model("GPU ring: 2 requests, 1 slot (wraps)", || {
        let ring = Arc::new(Ring::new());
        let r = ring.clone();
        let producer = loom::thread::spawn(move || {
            r.post(0, 10);
            r.post(1, 11);
        });
        let mut got = engine(&ring, 2);
        producer.join().unwrap();
        got.sort();
        assert_eq!(
            got,
            vec![(0, 10), (1, 11)],
            "each request once, with its data"
        );
        assert_eq!(ring.try_pop(), None, "nothing more");
    });
}

/// `quiet`, then the source buffer reused: never while the engine still
/// reads it (a race loom would report), and the engine read the data of
/// the request, not what was written after.
#[test]
fn loom_a_source_buffer_is_reused_only_after_quiet() {
    model("GPU ring: post, quiet, reuse", || {
        let ring = Arc::new(Ring::new());
        let r = ring.clone();
        let producer = loom::thread::spawn(move || {
            let t = r.post(0, 10);
            r.quiet(t);
            r.sources[0].with_mut(|p| unsafe { *p = 99 });
        });
        let got = engine(&ring, 1);
        producer.join().unwrap();
        assert_eq!(got, vec![(0, 10)]);
    });
}

/// The mutant whose engine frees the slot before reading it (tail stored
/// before the field read): loom reports the race with the producer that
/// reuses the slot, which shows that the model can fail.
#[test]
#[should_panic]
fn loom_a_slot_freed_before_it_is_read_is_a_race() {
    loom::model(|| {
        let ring = Arc::new(Ring::new());
        let producers: Vec<_> = (0..2)
            .map(|me| {
                let r = ring.clone();
                loom::thread::spawn(move || {
                    r.post(me, 10 + me as u64);
                })
            })
            .collect();
        let mut popped = 0;
        while popped < 2 {
            let ticket = ring.tail.load(Ordering::Relaxed);
            let slot = &ring.slots[(ticket % CAPACITY) as usize];
            if slot.seq.load(Ordering::Acquire) != ticket + 1 {
                loom::thread::yield_now();
                continue;
            }
            ring.tail.store(ticket + 1, Ordering::Release);
            let fields = slot.fields.with(|p| unsafe { *p });
            assert_eq!(fields & 0xFFFF_FFFF, ticket);
            popped += 1;
        }
        for p in producers {
            p.join().unwrap();
        }
    });
}

/// Inline requests through a ring of one slot: the producer reuses its
/// source at once after each post (no `quiet`), and the second post wraps
/// the ring and writes the same payload again. The engine gets each
/// request's own data; a payload read after `tail` moved, or a source
/// read by the engine, would be a race loom reports.
#[test]
fn loom_inline_payloads_need_no_quiet() {
    model(
        "GPU ring: 2 inline requests, 1 slot, sources reused at once",
        || {
            let ring = Arc::new(Ring::new());
            let r = ring.clone();
            let producer = loom::thread::spawn(move || {
                r.post_inline(0, 10);
                r.sources[0].with_mut(|p| unsafe { *p = 99 });
                r.post_inline(0, 11);
                r.sources[0].with_mut(|p| unsafe { *p = 98 });
            });
            let got = engine(&ring, 2);
            producer.join().unwrap();
            assert_eq!(got, vec![(0, 10), (0, 11)], "each request's own data");
        },
    );
}

/// The mutant whose engine copies the payload after moving `tail`: the
/// wrapping producer writes it meanwhile, which loom reports (the model
/// can fail).
#[test]
#[should_panic]
fn loom_a_payload_read_after_the_tail_moved_is_a_race() {
    loom::model(|| {
        let ring = Arc::new(Ring::new());
        let r = ring.clone();
        let producer = loom::thread::spawn(move || {
            r.post_inline(0, 10);
            r.post_inline(1, 11);
        });
        let mut got = Vec::new();
        while got.len() < 2 {
            let ticket = ring.tail.load(Ordering::Relaxed);
            let slot = &ring.slots[(ticket % CAPACITY) as usize];
            if slot.seq.load(Ordering::Acquire) != ticket + 1 {
                loom::thread::yield_now();
                continue;
            }
            ring.tail.store(ticket + 1, Ordering::Release);
            got.push(slot.payload.with(|p| unsafe { *p }));
        }
        producer.join().unwrap();
    });
}
