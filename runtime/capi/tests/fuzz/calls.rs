//! The checks of fuzz target `capi_calls` (decision 0088): the C
//! interface's argument checking of one-sided calls, their lists and the
//! notification calls, through the exported functions of `libGPI2`, on a
//! single rank that writes to and reads from itself.
//!
//! The fuzzer's bytes are a program of calls (`gaspi_write`, `gaspi_read`,
//! their `_notify` forms, `gaspi_notify`, `gaspi_notify_reset`,
//! `gaspi_notify_waitsome`, the four list calls, `gaspi_segment_ptr`,
//! `gaspi_segment_size`, `gaspi_queue_size`) with arguments that are mostly
//! near the edges (segments that exist and one that does not, offsets
//! around the segments' ends, sizes near the transfer limit, offsets that
//! overflow, notification ids around the count, lists longer than the
//! queue or the list limit). Next to the runtime runs a model: the bytes
//! of every segment and every notification word, and which arguments
//! GASPI accepts, computed here independently (in 128-bit arithmetic).
//! Invariants, checked after every call:
//! - a call is accepted exactly when the model says its arguments are
//!   valid; a refusal is a GASPI error code, never `GASPI_ERROR` (which a
//!   panic at the C boundary becomes);
//! - a refused call changes nothing: every segment's bytes, every
//!   notification word and every queue's count are as before;
//! - an accepted call changes only its destination ranges, which lie
//!   inside their segments, and once its queue is waited on they hold the
//!   source's bytes and the notification its value; `gaspi_notify_reset`
//!   returns the word's value, `gaspi_notify_waitsome` the first set word.
//!
//! Shared by the fuzz target (`fuzz/fuzz_targets/capi_calls.rs`) and the
//! corpus replay test (`tests/fuzz_corpus_calls.rs`), each its own
//! process: the runtime is initialised once per process and every input
//! starts from the same state (segments filled with a pattern, all words
//! 0), so an input's outcome does not depend on the ones before it.

use std::sync::{Mutex, OnceLock, PoisonError};
use GPI2::*;

/// Notification words per segment.
const NOTIFICATIONS: u32 = 64;
/// Queues created at init (`queue_num`); ids 4..16 exist but are not created.
const QUEUES: u8 = 4;
/// Depth of each queue.
const QUEUE_DEPTH: u32 = 16;
/// Most elements of a list call.
const LIST_MAX: u32 = 32;
/// Largest transfer.
const TRANSFER_MAX: u64 = 2048;
/// Segment ids 0..SEGMENT_MAX are valid ids.
const SEGMENT_MAX: u32 = 8;
/// The segments made at init: id and size. Ids 2 and 4..8 are valid ids
/// without a segment.
const SEGMENTS: [(u8, u64); 3] = [(0, 4096), (1, 1000), (3, 1)];
/// How long a wait on a queue may take before it counts as a hang.
const WAIT_MS: gaspi_timeout_t = 20_000;

/// One segment as the model sees it.
struct Seg {
    id: u8,
    base: *mut u8,
    bytes: Vec<u8>,
    words: Vec<u32>,
}

/// The runtime's segments and the model of their contents.
struct Model {
    segs: Vec<Seg>,
}

// SAFETY: the segment pointers are the runtime's mappings, valid for the
// whole process (segments are never deleted here); the model is reached
// only under its mutex.
unsafe impl Send for Model {}

fn ok(what: &str, code: gaspi_return_t) {
    assert_eq!(code, GASPI_SUCCESS, "{what} failed with code {code}");
}

fn model() -> &'static Mutex<Model> {
    static MODEL: OnceLock<Mutex<Model>> = OnceLock::new();
    MODEL.get_or_init(|| {
        if std::env::var_os("GASPI_LOG").is_none() {
            // Refused local offsets are logged at warn: keep the fuzzer's
            // output readable (a panic at the boundary is still an error).
            std::env::set_var("GASPI_LOG", "error");
        }
        let mut c = std::mem::MaybeUninit::<gaspi_config_t>::uninit();
        // SAFETY: `c` is valid for writing one gaspi_config_t.
        ok("gaspi_config_get", unsafe {
            gaspi_config_get(c.as_mut_ptr())
        });
        // SAFETY: gaspi_config_get succeeded, so it wrote the whole struct.
        let mut c = unsafe { c.assume_init() };
        c.notification_num = NOTIFICATIONS;
        c.queue_num = QUEUES.into();
        c.queue_size_max = QUEUE_DEPTH;
        c.rw_list_elem_max = LIST_MAX;
        c.transfer_size_max = TRANSFER_MAX;
        c.segment_max = SEGMENT_MAX;
        ok("gaspi_config_set", gaspi_config_set(c));
        ok("gaspi_proc_init", gaspi_proc_init(GASPI_BLOCK));
        let segs = SEGMENTS
            .iter()
            .map(|&(id, size)| {
                ok("gaspi_segment_alloc", gaspi_segment_alloc(id, size, 0));
                let mut base: gaspi_pointer_t = std::ptr::null_mut();
                // SAFETY: `base` is valid for writing one pointer.
                ok("gaspi_segment_ptr", unsafe {
                    gaspi_segment_ptr(id, &mut base)
                });
                Seg {
                    id,
                    base: base.cast(),
                    bytes: vec![0; size as usize],
                    words: vec![0; NOTIFICATIONS as usize],
                }
            })
            .collect();
        Mutex::new(Model { segs })
    })
}

impl Seg {
    /// The segment's bytes as the runtime has them.
    fn real(&self) -> &[u8] {
        // SAFETY: `base` is the segment's mapping of `bytes.len()` bytes,
        // alive for the process; no transfer is in flight while the model
        // compares (every accepted call's queue was waited on).
        unsafe { std::slice::from_raw_parts(self.base, self.bytes.len()) }
    }
}

impl Model {
    fn seg(&self, id: u8) -> Option<&Seg> {
        self.segs.iter().find(|s| s.id == id)
    }

    fn seg_mut(&mut self, id: u8) -> &mut Seg {
        self.segs
            .iter_mut()
            .find(|s| s.id == id)
            .expect("a segment of the model")
    }

    /// Whether `size` bytes at `offset` lie inside segment `id`.
    fn inside(&self, id: u8, offset: u64, size: u64) -> bool {
        self.seg(id)
            .is_some_and(|s| offset as u128 + size as u128 <= s.bytes.len() as u128)
    }

    /// Whether `id` names a notification word of segment `seg`.
    fn word(&self, seg: u8, id: u32) -> bool {
        self.seg(seg).is_some() && id < NOTIFICATIONS
    }

    /// Every input starts here: each segment holds its pattern, every
    /// word is 0, every queue is empty.
    fn reset(&mut self) {
        for q in 0..QUEUES {
            ok("gaspi_wait", gaspi_wait(q, WAIT_MS));
        }
        for s in &mut self.segs {
            for (i, b) in s.bytes.iter_mut().enumerate() {
                *b = (i as u8).wrapping_mul(7) ^ s.id.wrapping_mul(0x35);
            }
            // SAFETY: the segment's mapping holds `bytes.len()` bytes and no
            // transfer is in flight (every queue was waited on above).
            unsafe { std::ptr::copy_nonoverlapping(s.bytes.as_ptr(), s.base, s.bytes.len()) };
            for id in 0..NOTIFICATIONS {
                let mut old = 0;
                // SAFETY: `old` is valid for writing one value.
                ok("gaspi_notify_reset", unsafe {
                    gaspi_notify_reset(s.id, id, &mut old)
                });
            }
            s.words.iter_mut().for_each(|w| *w = 0);
        }
    }

    /// The runtime's segments hold the model's bytes and every queue is
    /// empty.
    fn compare(&self, what: &str) {
        for s in &self.segs {
            let real = s.real();
            if let Some(at) = (0..real.len()).find(|&i| real[i] != s.bytes[i]) {
                panic!(
                    "{what}: segment {} differs from the model at byte {at} ({} there, {} expected)",
                    s.id, real[at], s.bytes[at]
                );
            }
        }
        for q in 0..QUEUES {
            let mut n = u32::MAX;
            // SAFETY: `n` is valid for writing one value.
            ok("gaspi_queue_size", unsafe { gaspi_queue_size(q, &mut n) });
            assert_eq!(n, 0, "{what}: queue {q} holds {n} requests");
        }
    }

    /// Every notification word is the model's: the set words, found with
    /// `gaspi_notify_waitsome`, hold the model's values (read with
    /// `gaspi_notify_reset` and set again with `gaspi_notify`).
    fn compare_words(&self, what: &str) {
        for s in &self.segs {
            let mut begin = 0u32;
            loop {
                let mut first = u32::MAX;
                // SAFETY: `first` is valid for writing one id.
                let code = unsafe {
                    gaspi_notify_waitsome(
                        s.id,
                        begin,
                        NOTIFICATIONS - begin,
                        &mut first,
                        GASPI_TEST,
                    )
                };
                let expected = (begin..NOTIFICATIONS).find(|&i| s.words[i as usize] != 0);
                match expected {
                    None => {
                        assert_eq!(
                            code, GASPI_TIMEOUT,
                            "{what}: segment {}: a word from {begin} is set ({first}, code {code}), the model has none",
                            s.id
                        );
                        break;
                    }
                    Some(id) => {
                        assert_eq!(
                            code, GASPI_SUCCESS,
                            "{what}: segment {}: word {id} is not set",
                            s.id
                        );
                        assert_eq!(first, id, "{what}: segment {}: first set word", s.id);
                        let mut value = 0;
                        // SAFETY: `value` is valid for writing one value.
                        ok("gaspi_notify_reset", unsafe {
                            gaspi_notify_reset(s.id, id, &mut value)
                        });
                        assert_eq!(
                            value, s.words[id as usize],
                            "{what}: segment {} word {id}",
                            s.id
                        );
                        ok("gaspi_notify", gaspi_notify(s.id, 0, id, value, 0, WAIT_MS));
                        ok("gaspi_wait", gaspi_wait(0, WAIT_MS));
                        begin = id + 1;
                        if begin == NOTIFICATIONS {
                            break;
                        }
                    }
                }
            }
        }
    }

    /// Copies `size` bytes from `from`@`src` to `to`@`dst` in the model.
    fn copy(&mut self, from: u8, src: u64, to: u8, dst: u64, size: u64) {
        let bytes = self.seg(from).expect("a checked segment").bytes[src as usize..]
            [..size as usize]
            .to_vec();
        self.seg_mut(to).bytes[dst as usize..][..size as usize].copy_from_slice(&bytes);
    }

    /// After moves whose ranges overlap (GASPI leaves their outcome
    /// open): only the destination ranges may differ from the model; then
    /// the model takes the runtime's bytes there.
    fn take_destinations(&mut self, what: &str, dests: &[(u8, u64, u64)]) {
        for s in &mut self.segs {
            let real = s.real().to_vec();
            let id = s.id;
            for (i, (have, want)) in real.iter().zip(s.bytes.iter_mut()).enumerate() {
                let dest = dests
                    .iter()
                    .any(|&(d, off, size)| d == id && (i as u64) >= off && (i as u64) < off + size);
                if dest {
                    *want = *have;
                } else {
                    assert_eq!(
                        *have, *want,
                        "{what}: segment {id} byte {i} outside every destination changed"
                    );
                }
            }
        }
    }
}

/// The fuzzer's bytes, read as the arguments of calls; 0 once used up.
struct Input<'a>(&'a [u8]);

impl Input<'_> {
    fn u8(&mut self) -> u8 {
        match self.0.split_first() {
            Some((&b, rest)) => {
                self.0 = rest;
                b
            }
            None => 0,
        }
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn u64(&mut self) -> u64 {
        u64::from(self.u32()) | u64::from(self.u32()) << 32
    }
    fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// A segment id: mostly 0..5 (0, 1 and 3 exist), else any.
    fn seg(&mut self) -> gaspi_segment_id_t {
        match self.u8() {
            b @ 0..=191 => b % 5,
            _ => self.u8(),
        }
    }
    /// A rank: mostly this one (0), else any.
    fn rank(&mut self) -> gaspi_rank_t {
        match self.u8() {
            0..=223 => 0,
            _ => self.u16(),
        }
    }
    /// A queue: mostly 0..6 (0..4 created), else any.
    fn queue(&mut self) -> gaspi_queue_id_t {
        match self.u8() {
            b @ 0..=223 => b % 6,
            _ => self.u8(),
        }
    }
    /// An offset or a size: mostly inside or just past the segments,
    /// sometimes at their edges, near overflow, or anything.
    fn offset(&mut self) -> u64 {
        const EDGES: [u64; 12] = [
            0,
            1,
            999,
            1000,
            1001,
            2047,
            2048,
            2049,
            4095,
            4096,
            4097,
            1 << 63,
        ];
        match self.u8() % 8 {
            0..=4 => u64::from(self.u16()) % 4200,
            5 => EDGES[self.u8() as usize % EDGES.len()],
            6 => u64::MAX - u64::from(self.u16()),
            _ => self.u64(),
        }
    }
    /// A notification id: mostly around the count, else any.
    fn word(&mut self) -> gaspi_notification_id_t {
        match self.u8() % 8 {
            0..=5 => u32::from(self.u8()) % (NOTIFICATIONS + 8),
            6 => u32::MAX - u32::from(self.u8()),
            _ => self.u32(),
        }
    }
    /// A notification value: mostly small and not 0, sometimes 0 or any.
    fn value(&mut self) -> gaspi_notification_t {
        match self.u8() % 8 {
            0..=5 => u32::from(self.u8()) + 1,
            6 => 0,
            _ => self.u32(),
        }
    }
    /// A list's length: mostly 0..40 (at most 16 fit a queue, 32 a list),
    /// else up to 65535.
    fn num(&mut self) -> gaspi_number_t {
        match self.u8() % 8 {
            0..=6 => u32::from(self.u8()) % 40,
            _ => u32::from(self.u16()),
        }
    }
}

/// One element of a list call.
#[derive(Clone, Copy)]
struct Elem {
    seg_local: u8,
    off_local: u64,
    seg_remote: u8,
    off_remote: u64,
    size: u64,
}

/// The five arrays of a list call, `num` entries each.
struct Lists {
    seg_local: Vec<gaspi_segment_id_t>,
    off_local: Vec<gaspi_offset_t>,
    seg_remote: Vec<gaspi_segment_id_t>,
    off_remote: Vec<gaspi_offset_t>,
    size: Vec<gaspi_size_t>,
}

impl Lists {
    fn of(elems: &[Elem]) -> Lists {
        Lists {
            seg_local: elems.iter().map(|e| e.seg_local).collect(),
            off_local: elems.iter().map(|e| e.off_local).collect(),
            seg_remote: elems.iter().map(|e| e.seg_remote).collect(),
            off_remote: elems.iter().map(|e| e.off_remote).collect(),
            size: elems.iter().map(|e| e.size).collect(),
        }
    }
}

/// The elements of a list of `num`: the first (at most 40) from the
/// input, repeated up to `num`.
fn elems(input: &mut Input<'_>, num: u32) -> Vec<Elem> {
    let distinct: Vec<Elem> = (0..num.min(40))
        .map(|_| Elem {
            seg_local: input.seg(),
            off_local: input.offset(),
            seg_remote: input.seg(),
            off_remote: input.offset(),
            size: input.offset(),
        })
        .collect();
    (0..num as usize)
        .map(|i| distinct[i % distinct.len()])
        .collect()
}

/// Whether two byte ranges of segments overlap.
fn overlap(a: (u8, u64, u64), b: (u8, u64, u64)) -> bool {
    a.0 == b.0 && a.1 < b.1 + b.2 && b.1 < a.1 + a.2
}

/// The data moves of an accepted call, in order: (from seg, offset, to
/// seg, offset, size). Applies them to the model, exactly when no
/// destination overlaps another move's source or destination (or its own
/// source), else by taking the runtime's bytes at the destinations.
fn apply_moves(m: &mut Model, what: &str, moves: &[(u8, u64, u8, u64, u64)]) {
    let moves: Vec<_> = moves.iter().copied().filter(|mv| mv.4 > 0).collect();
    let tangled = moves.iter().enumerate().any(|(i, a)| {
        let dst = (a.2, a.3, a.4);
        moves.iter().enumerate().any(|(j, b)| {
            overlap(dst, (b.0, b.1, b.4)) || (i != j && overlap(dst, (b.2, b.3, b.4)))
        })
    });
    if tangled {
        let dests: Vec<_> = moves.iter().map(|mv| (mv.2, mv.3, mv.4)).collect();
        m.take_destinations(what, &dests);
    } else {
        for &(from, src, to, dst, size) in &moves {
            m.copy(from, src, to, dst, size);
        }
    }
}

/// Checks a call's code against the model's verdict; on acceptance waits
/// for queue `q`.
fn settle(what: &str, code: gaspi_return_t, valid: bool, q: gaspi_queue_id_t) -> bool {
    assert_ne!(
        code, GASPI_ERROR,
        "{what}: GASPI_ERROR (a panic at the boundary, or an unmapped error)"
    );
    if valid {
        assert_eq!(
            code, GASPI_SUCCESS,
            "{what}: refused with code {code}, the model accepts it"
        );
        let mut n = u32::MAX;
        // SAFETY: `n` is valid for writing one value.
        ok("gaspi_queue_size", unsafe { gaspi_queue_size(q, &mut n) });
        assert!(
            n <= QUEUE_DEPTH,
            "{what}: queue {q} holds {n} requests, deeper than {QUEUE_DEPTH}"
        );
        ok("gaspi_wait", gaspi_wait(q, WAIT_MS));
    } else {
        assert_ne!(
            code, GASPI_SUCCESS,
            "{what}: accepted, the model refuses it"
        );
    }
    valid
}

/// Fuzz target `capi_calls`: runs the input's calls against the runtime
/// and the model; panics when an invariant breaks.
pub fn capi_calls(data: &[u8]) {
    let mut m = model().lock().unwrap_or_else(PoisonError::into_inner);
    m.reset();
    let mut input = Input(data);
    let mut step = 0;
    while !input.is_empty() && step < 64 {
        step += 1;
        let op = input.u8() % 14;
        let what = format!("call {step} (op {op})");
        match op {
            // gaspi_write, gaspi_read, gaspi_write_notify, gaspi_read_notify
            0..=3 => {
                let (sl, ol, r, sr, or, size) = (
                    input.seg(),
                    input.offset(),
                    input.rank(),
                    input.seg(),
                    input.offset(),
                    input.offset(),
                );
                let (id, value, q) = (input.word(), input.value(), input.queue());
                let moves_ok = q < QUEUES
                    && r == 0
                    && size <= TRANSFER_MAX
                    && m.inside(sl, ol, size)
                    && m.inside(sr, or, size);
                let (code, valid) = match op {
                    0 => (gaspi_write(sl, ol, r, sr, or, size, q, WAIT_MS), moves_ok),
                    1 => (gaspi_read(sl, ol, r, sr, or, size, q, WAIT_MS), moves_ok),
                    2 => (
                        gaspi_write_notify(sl, ol, r, sr, or, size, id, value, q, WAIT_MS),
                        moves_ok && m.word(sr, id) && value != 0,
                    ),
                    _ => (
                        gaspi_read_notify(sl, ol, r, sr, or, size, id, q, WAIT_MS),
                        moves_ok && m.word(sl, id),
                    ),
                };
                if settle(&what, code, valid, q) {
                    let mv = if op == 1 || op == 3 {
                        (sr, or, sl, ol, size)
                    } else {
                        (sl, ol, sr, or, size)
                    };
                    apply_moves(&mut m, &what, &[mv]);
                    match op {
                        2 => m.seg_mut(sr).words[id as usize] = value,
                        3 => m.seg_mut(sl).words[id as usize] = 1,
                        _ => {}
                    }
                }
            }
            // gaspi_notify
            4 => {
                let (s, r, id, value, q) = (
                    input.seg(),
                    input.rank(),
                    input.word(),
                    input.value(),
                    input.queue(),
                );
                let valid = q < QUEUES && r == 0 && m.word(s, id) && value != 0;
                if settle(&what, gaspi_notify(s, r, id, value, q, WAIT_MS), valid, q) {
                    m.seg_mut(s).words[id as usize] = value;
                }
            }
            // gaspi_notify_reset
            5 => {
                let (s, id) = (input.seg(), input.word());
                let mut old = 0xdead_beef;
                // SAFETY: `old` is valid for writing one value.
                let code = unsafe { gaspi_notify_reset(s, id, &mut old) };
                assert_ne!(code, GASPI_ERROR, "{what}: GASPI_ERROR");
                if m.word(s, id) {
                    assert_eq!(
                        code, GASPI_SUCCESS,
                        "{what}: reset of segment {s} word {id} refused"
                    );
                    let w = &mut m.seg_mut(s).words[id as usize];
                    assert_eq!(
                        old, *w,
                        "{what}: reset returned another value than the word's"
                    );
                    *w = 0;
                } else {
                    assert_ne!(
                        code, GASPI_SUCCESS,
                        "{what}: reset of segment {s} word {id} accepted"
                    );
                    assert_eq!(
                        old, 0xdead_beef,
                        "{what}: a refused reset wrote its out value"
                    );
                }
            }
            // gaspi_notify_waitsome, without waiting
            6 => {
                let (s, begin) = (input.seg(), input.word());
                let num = match input.u8() % 4 {
                    0 => 0,
                    1 => input.u32(),
                    _ => u32::from(input.u8()) % (NOTIFICATIONS + 8),
                };
                let mut first = 0xdead_beef;
                // SAFETY: `first` is valid for writing one id.
                let code = unsafe { gaspi_notify_waitsome(s, begin, num, &mut first, GASPI_TEST) };
                assert_ne!(code, GASPI_ERROR, "{what}: GASPI_ERROR");
                let exists = m.seg(s).is_some();
                if num == 0 {
                    // GPI-2's: nothing to wait for; `first` is not written.
                    let valid = exists && begin <= NOTIFICATIONS;
                    assert_eq!(
                        code == GASPI_SUCCESS,
                        valid,
                        "{what}: waitsome of 0 words: code {code}"
                    );
                    assert_eq!(
                        first, 0xdead_beef,
                        "{what}: waitsome of 0 words wrote an id"
                    );
                } else if exists && begin as u64 + num as u64 <= NOTIFICATIONS as u64 {
                    let words = &m.seg(s).expect("exists").words;
                    match (begin..begin + num).find(|&i| words[i as usize] != 0) {
                        Some(id) => {
                            assert_eq!(
                                code, GASPI_SUCCESS,
                                "{what}: word {id} is set, waitsome says {code}"
                            );
                            assert_eq!(first, id, "{what}: waitsome's first set word");
                        }
                        None => assert_eq!(
                            code, GASPI_TIMEOUT,
                            "{what}: no word set, waitsome says {code}"
                        ),
                    }
                } else {
                    assert!(
                        code != GASPI_SUCCESS && code != GASPI_TIMEOUT,
                        "{what}: waitsome of a bad range: code {code}"
                    );
                    assert_eq!(first, 0xdead_beef, "{what}: a refused waitsome wrote an id");
                }
            }
            // gaspi_write_list, gaspi_read_list, gaspi_write_list_notify, gaspi_read_list_notify
            7..=10 => {
                let num = input.num();
                let r = input.rank();
                let (ns, id, value, q) = (input.seg(), input.word(), input.value(), input.queue());
                let elems = if num == 0 {
                    Vec::new()
                } else {
                    elems(&mut input, num)
                };
                // A list of 0 still passes arrays (of one entry: never null).
                let zero = Elem {
                    seg_local: 0,
                    off_local: 0,
                    seg_remote: 0,
                    off_remote: 0,
                    size: 0,
                };
                let mut l = Lists::of(if num == 0 {
                    std::slice::from_ref(&zero)
                } else {
                    &elems
                });
                let ptrs = (
                    l.seg_local.as_mut_ptr(),
                    l.off_local.as_mut_ptr(),
                    l.seg_remote.as_mut_ptr(),
                    l.off_remote.as_mut_ptr(),
                    l.size.as_mut_ptr(),
                );
                let elems_ok = (1..=LIST_MAX).contains(&num)
                    && num <= QUEUE_DEPTH
                    && q < QUEUES
                    && r == 0
                    && elems.iter().all(|e| {
                        e.size <= TRANSFER_MAX
                            && m.inside(e.seg_local, e.off_local, e.size)
                            && m.inside(e.seg_remote, e.off_remote, e.size)
                    });
                // SAFETY: the five arrays hold `num` entries each (one when
                // `num` is 0), as GASPI.h asks of a list call.
                let (code, valid) = unsafe {
                    match op {
                        7 => (
                            gaspi_write_list(
                                num, ptrs.0, ptrs.1, r, ptrs.2, ptrs.3, ptrs.4, q, WAIT_MS,
                            ),
                            elems_ok,
                        ),
                        8 => (
                            gaspi_read_list(
                                num, ptrs.0, ptrs.1, r, ptrs.2, ptrs.3, ptrs.4, q, WAIT_MS,
                            ),
                            elems_ok,
                        ),
                        9 => (
                            gaspi_write_list_notify(
                                num, ptrs.0, ptrs.1, r, ptrs.2, ptrs.3, ptrs.4, ns, id, value, q,
                                WAIT_MS,
                            ),
                            elems_ok && m.word(ns, id) && value != 0,
                        ),
                        _ => (
                            gaspi_read_list_notify(
                                num, ptrs.0, ptrs.1, r, ptrs.2, ptrs.3, ptrs.4, ns, id, q, WAIT_MS,
                            ),
                            elems_ok && m.word(ns, id),
                        ),
                    }
                };
                if settle(&what, code, valid, q) {
                    let moves: Vec<_> = elems
                        .iter()
                        .map(|e| {
                            if op == 8 || op == 10 {
                                (e.seg_remote, e.off_remote, e.seg_local, e.off_local, e.size)
                            } else {
                                (e.seg_local, e.off_local, e.seg_remote, e.off_remote, e.size)
                            }
                        })
                        .collect();
                    apply_moves(&mut m, &what, &moves);
                    match op {
                        9 => m.seg_mut(ns).words[id as usize] = value,
                        10 => m.seg_mut(ns).words[id as usize] = 1,
                        _ => {}
                    }
                }
            }
            // gaspi_segment_ptr, gaspi_segment_size
            11 => {
                let (s, r) = (input.seg(), input.rank());
                let mut p: gaspi_pointer_t = std::ptr::null_mut();
                // SAFETY: `p` is valid for writing one pointer.
                let code = unsafe { gaspi_segment_ptr(s, &mut p) };
                match m.seg(s) {
                    Some(seg) => {
                        assert_eq!(code, GASPI_SUCCESS, "{what}: gaspi_segment_ptr({s})");
                        assert_eq!(p.cast::<u8>(), seg.base, "{what}: segment {s} moved");
                    }
                    None => {
                        assert!(
                            code != GASPI_SUCCESS && code != GASPI_ERROR,
                            "{what}: gaspi_segment_ptr({s}): code {code}"
                        );
                        assert!(
                            p.is_null(),
                            "{what}: a refused gaspi_segment_ptr wrote a pointer"
                        );
                    }
                }
                let mut size = u64::MAX;
                // SAFETY: `size` is valid for writing one value.
                let code = unsafe { gaspi_segment_size(s, r, &mut size) };
                match m.seg(s) {
                    Some(seg) if r == 0 => {
                        assert_eq!(code, GASPI_SUCCESS, "{what}: gaspi_segment_size({s}, {r})");
                        assert_eq!(size, seg.bytes.len() as u64, "{what}: segment {s}'s size");
                    }
                    _ => {
                        assert!(
                            code != GASPI_SUCCESS && code != GASPI_ERROR,
                            "{what}: gaspi_segment_size({s}, {r}): code {code}"
                        );
                        assert_eq!(
                            size,
                            u64::MAX,
                            "{what}: a refused gaspi_segment_size wrote a size"
                        );
                    }
                }
            }
            // gaspi_queue_size, gaspi_wait of any queue
            12 => {
                let q = input.queue();
                let mut n = u32::MAX;
                // SAFETY: `n` is valid for writing one value.
                let code = unsafe { gaspi_queue_size(q, &mut n) };
                let wait = gaspi_wait(q, GASPI_TEST);
                if q < QUEUES {
                    assert_eq!(
                        (code, n, wait),
                        (GASPI_SUCCESS, 0, GASPI_SUCCESS),
                        "{what}: queue {q}"
                    );
                } else {
                    assert!(
                        code != GASPI_SUCCESS && code != GASPI_ERROR,
                        "{what}: gaspi_queue_size({q}): code {code}"
                    );
                    assert!(
                        wait != GASPI_SUCCESS && wait != GASPI_ERROR,
                        "{what}: gaspi_wait({q}): code {wait}"
                    );
                    assert_eq!(
                        n,
                        u32::MAX,
                        "{what}: a refused gaspi_queue_size wrote a count"
                    );
                }
            }
            // The notification words, all of them, against the model.
            _ => m.compare_words(&what),
        }
        m.compare(&what);
    }
    m.compare_words("the end of the input");
}
