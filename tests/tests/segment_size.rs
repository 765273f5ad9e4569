//! Segment sizes that would wrap page rounding (issue 15, point 5) are
//! refused with a typed error before anything is mapped, and leave the id
//! free: a later valid segment under the same id works.
//!
//! These run a 1-rank job in this process: `Config::default()` is a
//! standalone rank of size 1 when no launcher set up the environment.

use gaspi::{Config, Error, Gaspi, Group, Memory, SegId, Timeout};

const LONG: Timeout = Timeout::Ms(30_000);

/// Sizes from the band where page rounding used to wrap, and the values
/// around the configured maximum.
fn huge_sizes(max: u64) -> Vec<u64> {
    vec![
        u64::MAX,
        u64::MAX - 100,
        u64::MAX - 4000,
        u64::MAX - 4095,
        (1u64 << 63) + 1,
        max + 1,
        max.saturating_mul(2),
    ]
}

/// Checks that the id is free and a 1 MiB segment made under it works
/// (written at 1 MiB - 64 and read back, and refused one byte further).
fn id_is_free_and_usable(g: &Gaspi, seg: SegId) {
    assert!(
        !g.segment_list().contains(&seg),
        "a refused call left {seg:?} behind: {:?}",
        g.segment_list()
    );
    assert!(
        matches!(g.segment_size(seg), Err(Error::UnknownSegment { .. })),
        "segment_size of a refused segment: {:?}",
        g.segment_size(seg)
    );
    let s = g
        .segment_create(seg, 1 << 20, Memory::Host, Group::ALL, LONG)
        .expect("a valid segment after refused ones");
    assert_eq!(g.segment_size(seg).unwrap(), 1 << 20);
    let data: Vec<u8> = (0..64u8).collect();
    s.write((1 << 20) - 64, &data).unwrap();
    assert_eq!(s.read_vec::<u8>((1 << 20) - 64, 64).unwrap(), data);
    assert!(matches!(
        s.write((1 << 20) - 63, &data),
        Err(Error::OutOfBounds { .. })
    ));
    g.segment_delete(seg).unwrap();
}

#[test]
fn a_segment_size_that_would_wrap_is_refused_and_creates_nothing() {
    let g = Gaspi::init(Config::default()).unwrap();
    let max = g.config().segment_size_max;
    let seg = SegId(3);
    for size in huge_sizes(max) {
        let alloc = g.segment_alloc(seg, size, Memory::Host);
        assert!(
            matches!(alloc, Err(Error::SegmentTooLarge { size: s, max: m }) if s == size && m == max),
            "segment_alloc({size}): {alloc:?}"
        );
        id_is_free_and_usable(&g, seg);
        let create = g.segment_create(seg, size, Memory::Host, Group::ALL, LONG);
        assert!(
            matches!(create, Err(Error::SegmentTooLarge { size: s, max: m }) if s == size && m == max),
            "segment_create({size}): {create:?}"
        );
        id_is_free_and_usable(&g, seg);
        // The GPU path is refused for its size before any driver is asked.
        let gpu = g.segment_alloc(seg, size, Memory::Gpu(0));
        assert!(
            matches!(gpu, Err(Error::SegmentTooLarge { size: s, max: m }) if s == size && m == max),
            "segment_alloc({size}, Gpu(0)): {gpu:?}"
        );
        id_is_free_and_usable(&g, seg);
        let mut byte = 0u8;
        // SAFETY: refused before the pointer is used (checked below: the
        // segment does not exist afterwards).
        let bind = unsafe { g.segment_bind(seg, &mut byte, size) };
        assert!(
            matches!(bind, Err(Error::SegmentTooLarge { size: s, max: m }) if s == size && m == max),
            "segment_bind({size}): {bind:?}"
        );
        id_is_free_and_usable(&g, seg);
    }
}

#[test]
fn the_configured_maximum_is_inclusive_and_applies_to_every_kind_of_segment() {
    let max = 64 << 10;
    let g = Gaspi::init(Config::default().segment_size_max(max)).unwrap();
    assert_eq!(g.config().segment_size_max, max);
    let seg = SegId(1);
    let s = g.segment_alloc(seg, max, Memory::Host).unwrap();
    assert_eq!(s.size() as u64, max);
    g.segment_delete(seg).unwrap();
    drop(s);
    let err = g.segment_alloc(seg, max + 1, Memory::Host);
    assert!(
        matches!(err, Err(Error::SegmentTooLarge { size, max: m }) if size == max + 1 && m == max),
        "{err:?}"
    );
    let big = vec![0u8; max as usize + 1].into_boxed_slice();
    let err = g.segment_bind_buffer(seg, big.clone());
    assert!(
        matches!(err, Err(Error::SegmentTooLarge { size, max: m }) if size == max + 1 && m == max),
        "{err:?}"
    );
    let err = g.segment_use(seg, big, Group::ALL, LONG);
    assert!(
        matches!(err, Err(Error::SegmentTooLarge { size, max: m }) if size == max + 1 && m == max),
        "{err:?}"
    );
    id_is_free_and_usable_small(&g, seg, max);
}

fn id_is_free_and_usable_small(g: &Gaspi, seg: SegId, size: u64) {
    assert!(!g.segment_list().contains(&seg), "{:?}", g.segment_list());
    let s = g
        .segment_use(
            seg,
            vec![7u8; size as usize].into_boxed_slice(),
            Group::ALL,
            LONG,
        )
        .unwrap();
    assert_eq!(s.read_vec::<u8>(size as usize - 1, 1).unwrap(), [7]);
}

#[test]
fn a_maximum_outside_its_range_is_refused_at_init() {
    for bad in [0, u64::MAX, gaspi::SEGMENT_SIZE_CEILING + 1] {
        let err = Gaspi::init(Config::default().segment_size_max(bad));
        assert!(
            matches!(err, Err(Error::Config(ref m)) if m.contains("segment_size_max")),
            "segment_size_max {bad}: {err:?}"
        );
    }
}

mod through_the_api {
    //! Every call that takes offsets and sizes, through the public API of
    //! a 1-rank job (the rank writes into and reads from its own
    //! segments): a call whose ranges fit succeeds and moves exactly its
    //! bytes; one that does not returns a typed error and changes nothing.

    use gaspi::{
        Config, Error, Gaspi, ListElem, Memory, NotifyId, Queue, Rank, SegId, Segment, Timeout,
    };
    use proptest::prelude::*;
    use proptest::test_runner::{Config as RunConfig, TestRunner};

    const A: SegId = SegId(0);
    const B: SegId = SegId(1);
    const C: SegId = SegId(2);
    const SA: u64 = 4096 + 100;
    const SB: u64 = 8192 + 64;
    const SC: u64 = 1 << 16;
    const ME: Rank = Rank(0);
    const Q: Queue = Queue(0);
    const ID: NotifyId = NotifyId(1);

    #[derive(Debug, Clone, Copy)]
    enum Call {
        Write,
        Read,
        WriteNotify,
        ReadNotify,
        WriteList,
        ReadList,
        WriteListNotify,
        ReadListNotify,
        FetchAdd,
        CompareSwap,
        Passive,
        SegmentWrite,
        SegmentRead,
    }

    fn offset() -> impl Strategy<Value = u64> {
        prop_oneof![
            8 => 0..SA,
            2 => SA..SB + 200,
            1 => (0u64..=512).prop_map(|d| d * 8),
            1 => (0u64..=4096).prop_map(|d| u64::MAX - d),
            1 => any::<u64>(),
        ]
    }

    fn size() -> impl Strategy<Value = u64> {
        prop_oneof![
            8 => 1u64..=400,
            1 => Just(0),
            1 => (0u64..=4096).prop_map(|d| u64::MAX - d),
            1 => Just(SB + 1),
            1 => any::<u64>(),
        ]
    }

    fn call() -> impl Strategy<Value = Call> {
        use Call::*;
        prop::sample::select(vec![
            Write,
            Read,
            WriteNotify,
            ReadNotify,
            WriteList,
            ReadList,
            WriteListNotify,
            ReadListNotify,
            FetchAdd,
            CompareSwap,
            Passive,
            SegmentWrite,
            SegmentRead,
        ])
    }

    fn fits(offset: u64, len: u64, size: u64) -> bool {
        offset as u128 + len as u128 <= size as u128
    }

    struct Job {
        g: Gaspi,
        segs: [Segment; 3],
        /// Calls accepted and refused, to show both sides were exercised.
        counts: std::sync::Mutex<(u32, u32)>,
    }

    impl Job {
        fn snapshot(&self) -> [Vec<u8>; 3] {
            self.segs
                .clone()
                .map(|s| s.read_vec::<u8>(0, s.size()).unwrap())
        }
    }

    /// Runs `call`; returns whether it was accepted, after checking that
    /// an accepted one moved its bytes as the model says and a refused one
    /// changed nothing.
    fn check(job: &Job, call: Call, lo: u64, ro: u64, n: u64) -> Result<(), TestCaseError> {
        let g = &job.g;
        let before = job.snapshot();
        let mut want = before.clone();
        let copy = |want: &mut [Vec<u8>; 3], from: usize, fo: u64, to: usize, t: u64, n: u64| {
            let src = before[from][fo as usize..(fo + n) as usize].to_vec();
            want[to][t as usize..(t + n) as usize].copy_from_slice(&src);
        };
        // Size 0 is a valid transfer (decision 0030): it moves nothing, but
        // its offsets are checked as for any size.
        let transfer_ok = fits(lo, n, SA) && fits(ro, n, SB);
        let valid = ListElem::new(A, 0, B, 0, 16);
        let elem = ListElem::new(A, lo, B, ro, n);
        let notify_seg = |write: bool| if write { B } else { A };
        let (result, ok, notified): (Result<(), Error>, bool, Option<SegId>) = match call {
            Call::Write | Call::WriteNotify | Call::WriteList | Call::WriteListNotify => {
                let r = match call {
                    Call::Write => g.write(A, lo, ME, B, ro, n, Q),
                    Call::WriteNotify => g.write_notify(A, lo, ME, B, ro, n, ID, 1, Q),
                    Call::WriteList => g.write_list(&[valid, elem], ME, Q),
                    _ => g.write_list_notify(&[valid, elem], ME, B, ID, 1, Q),
                };
                if transfer_ok {
                    if matches!(call, Call::WriteList | Call::WriteListNotify) {
                        copy(&mut want, 0, 0, 1, 0, 16);
                    }
                    copy(&mut want, 0, lo, 1, ro, n);
                }
                let notifies = matches!(call, Call::WriteNotify | Call::WriteListNotify);
                (r, transfer_ok, notifies.then(|| notify_seg(true)))
            }
            Call::Read | Call::ReadNotify | Call::ReadList | Call::ReadListNotify => {
                let r = match call {
                    Call::Read => g.read(A, lo, ME, B, ro, n, Q),
                    Call::ReadNotify => g.read_notify(A, lo, ME, B, ro, n, ID, Q),
                    Call::ReadList => g.read_list(&[valid, elem], ME, Q),
                    _ => g.read_list_notify(&[valid, elem], ME, A, ID, Q),
                };
                if transfer_ok {
                    if matches!(call, Call::ReadList | Call::ReadListNotify) {
                        copy(&mut want, 1, 0, 0, 0, 16);
                    }
                    copy(&mut want, 1, ro, 0, lo, n);
                }
                let notifies = matches!(call, Call::ReadNotify | Call::ReadListNotify);
                (r, transfer_ok, notifies.then(|| notify_seg(false)))
            }
            Call::FetchAdd | Call::CompareSwap => {
                let ok = ro.is_multiple_of(8) && fits(ro, 8, SB);
                let r = if matches!(call, Call::FetchAdd) {
                    g.atomic_fetch_add(B, ro, ME, n, Timeout::Ms(5000))
                } else {
                    let old = if ok {
                        let at = ro as usize;
                        u64::from_ne_bytes(before[1][at..at + 8].try_into().unwrap())
                    } else {
                        0
                    };
                    g.atomic_compare_swap(B, ro, ME, old, n, Timeout::Ms(5000))
                };
                if ok {
                    let at = ro as usize;
                    let old = u64::from_ne_bytes(before[1][at..at + 8].try_into().unwrap());
                    prop_assert_eq!(r.as_ref().ok(), Some(&old), "{:?}", r);
                    let new = match call {
                        Call::FetchAdd => old.wrapping_add(n),
                        _ => n,
                    };
                    want[1][at..at + 8].copy_from_slice(&new.to_ne_bytes());
                }
                (r.map(|_| ()), ok, None)
            }
            Call::Passive => {
                let ok = (1..=gaspi::PASSIVE_MAX).contains(&n) && fits(lo, n, SA);
                let r = g.passive_send(A, lo, ME, n, Timeout::Ms(5000));
                if ok && r.is_ok() {
                    let got = g.passive_receive(C, 0, Timeout::Ms(5000));
                    prop_assert_eq!(got.ok(), Some((ME, n)));
                    copy(&mut want, 0, lo, 2, 0, n);
                }
                (r, ok, None)
            }
            Call::SegmentWrite | Call::SegmentRead => {
                let len = n.min(600) as usize;
                let ok = fits(lo, len as u64, SA);
                let off = lo as usize;
                let r = if matches!(call, Call::SegmentWrite) {
                    let data = vec![0x5Au8; len];
                    if ok {
                        want[0][off..off + len].copy_from_slice(&data);
                    }
                    job.segs[0].write(off, &data)
                } else {
                    let mut out = vec![0u8; len];
                    let r = job.segs[0].read(off, &mut out);
                    if ok {
                        prop_assert_eq!(&out[..], &before[0][off..off + len]);
                    } else {
                        prop_assert!(out.iter().all(|&b| b == 0));
                    }
                    r
                };
                (r, ok, None)
            }
        };
        g.wait(Q, Timeout::Ms(5000)).unwrap();
        {
            let mut c = job.counts.lock().unwrap();
            if ok {
                c.0 += 1;
            } else {
                c.1 += 1;
            }
        }
        if ok {
            prop_assert!(result.is_ok(), "{call:?}({lo}, {ro}, {n}): {result:?}");
        } else {
            let typed = matches!(
                result,
                Err(Error::OutOfBounds { .. }
                    | Error::ZeroSize { .. }
                    | Error::TooLarge { .. }
                    | Error::Unaligned { .. }
                    | Error::PassiveSize { .. })
            );
            prop_assert!(typed, "{call:?}({lo}, {ro}, {n}): {result:?}");
        }
        // The notification was set exactly when the call was accepted.
        if let Some(seg) = notified {
            prop_assert_eq!(g.notify_reset(seg, ID).unwrap(), u32::from(ok));
        }
        for s in [A, B] {
            prop_assert_eq!(g.notify_reset(s, ID).unwrap(), 0);
        }
        prop_assert_eq!(g.queue_size(Q).unwrap(), 0);
        let after = job.snapshot();
        for (k, name) in ["A", "B", "C"].iter().enumerate() {
            if after[k] != want[k] {
                let at = after[k].iter().zip(&want[k]).position(|(a, b)| a != b);
                prop_assert!(
                    false,
                    "{call:?}({lo}, {ro}, {n}) ok={ok}: segment {name} differs from the model at {at:?}"
                );
            }
        }
        Ok(())
    }

    #[test]
    fn every_call_moves_exactly_the_bytes_that_fit_and_refuses_the_rest() {
        let g = Gaspi::init(Config::default()).unwrap();
        let segs = [(A, SA), (B, SB), (C, SC)].map(|(id, size)| {
            let s = g.segment_alloc(id, size, Memory::Host).unwrap();
            let bytes: Vec<u8> = (0..size).map(|i| (i * 31 % 253) as u8 + id.0).collect();
            s.write(0, &bytes).unwrap();
            s
        });
        let job = Job {
            g,
            segs,
            counts: Default::default(),
        };
        let mut runner = TestRunner::new(RunConfig {
            cases: 400,
            failure_persistence: None,
            ..RunConfig::default()
        });
        runner
            .run(&(call(), offset(), offset(), size()), |(c, lo, ro, n)| {
                check(&job, c, lo, ro, n)
            })
            .unwrap();
        let (accepted, refused) = *job.counts.lock().unwrap();
        eprintln!("{accepted} calls accepted, {refused} refused");
        assert!(
            accepted >= 40 && refused >= 40,
            "{accepted} accepted, {refused} refused"
        );
    }
}
