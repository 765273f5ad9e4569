//! `gaspi-model-rank`: the rank program of `tests/model.rs`.
//!
//! One subcommand per scenario. Each rank checks what it sees and exits
//! with a non-zero code (panics) when a call did the wrong thing; the
//! launcher then fails the whole job.

use gaspi::{Config, Error, Gaspi, Group, ListElem, Memory, NotifyId, Queue, Rank, SegId, Timeout};
use std::time::{Duration, Instant};

type R = Result<(), Box<dyn std::error::Error>>;

fn main() {
    gaspi::init_logging();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let scenario = args.first().cloned().unwrap_or_default();
    let g = Gaspi::init(Config::from_env().expect("config")).expect("init");
    let r = match scenario.as_str() {
        "read-notify" => read_notify(&g),
        "lists" => lists(&g),
        "lists-bad" => lists_bad(&g),
        "queues" => queues(&g),
        "fetch-add" => fetch_add(&g),
        "compare-swap" => compare_swap(&g),
        other => Err(format!("unknown scenario {other:?}").into()),
    };
    if let Err(e) = r {
        eprintln!("rank {}: {scenario}: {e}", g.rank().0);
        std::process::exit(1);
    }
    g.barrier(Group::ALL, Timeout::Ms(60_000))
        .expect("final barrier");
    println!("rank {} ok", g.rank().0);
}

fn next(g: &Gaspi) -> Rank {
    Rank((g.rank().0 + 1) % g.size())
}

fn prev(g: &Gaspi) -> Rank {
    Rank((g.rank().0 + g.size() - 1) % g.size())
}

fn block(g: &Gaspi) -> Result<(), Error> {
    g.barrier(Group::ALL, Timeout::Ms(60_000))
}

/// The byte a rank puts at `offset` of its pattern segment `seg`.
fn pattern(rank: u32, seg: u8, offset: u64) -> u8 {
    (rank as u64 * 31 + seg as u64 * 7 + offset * 13 + offset / 251) as u8
}

fn fill(g: &Gaspi, seg: SegId) -> R {
    let s = g.segment(seg)?;
    let bytes: Vec<u8> = (0..s.size() as u64)
        .map(|o| pattern(g.rank().0, seg.0, o))
        .collect();
    s.write(0, &bytes)?;
    Ok(())
}

// ----- read_notify -----

fn read_notify(g: &Gaspi) -> R {
    const SIZE: u64 = 4 << 20;
    let src = g.segment_create(SegId(0), SIZE, Memory::Host, Group::ALL, Timeout::Block)?;
    let dst = g.segment_create(SegId(1), SIZE, Memory::Host, Group::ALL, Timeout::Block)?;
    fill(g, SegId(0))?;
    let _ = src;
    block(g)?;
    let from = next(g);
    // Bad input first: nothing may be read.
    let bad = g.read_notify(
        SegId(1),
        0,
        from,
        SegId(0),
        0,
        SIZE,
        NotifyId(1 << 20),
        Queue(0),
    );
    assert!(
        matches!(bad, Err(Error::NotifyIdOutOfRange { .. })),
        "{bad:?}"
    );
    assert_eq!(dst.read_vec::<u8>(0, 4096)?, vec![0u8; 4096]);
    assert_eq!(g.notify_reset(SegId(1), NotifyId(9))?, 0);
    // A watcher sees the word and checks at once that all the data is there.
    std::thread::scope(|s| -> R {
        let watcher = s.spawn(|| -> Result<(), String> {
            let id = g
                .notify_waitsome(SegId(1), NotifyId(9), 1, Timeout::Ms(60_000))
                .map_err(|e| e.to_string())?;
            let got = dst
                .read_vec::<u8>(0, SIZE as usize)
                .map_err(|e| e.to_string())?;
            for (o, b) in got.iter().enumerate() {
                if *b != pattern(from.0, 0, o as u64) {
                    return Err(format!("byte {o} not there when {id:?} was set"));
                }
            }
            Ok(())
        });
        std::thread::sleep(Duration::from_millis(20));
        g.read_notify(SegId(1), 0, from, SegId(0), 0, SIZE, NotifyId(9), Queue(0))?;
        g.wait(Queue(0), Timeout::Block)?;
        watcher.join().expect("watcher")?;
        Ok(())
    })?;
    assert_eq!(g.notify_reset(SegId(1), NotifyId(9))?, 1);
    assert_eq!(g.statistics().calls_of("read_notify"), 1);
    assert!(g.statistics().bytes_read >= SIZE);
    Ok(())
}

// ----- lists -----

const LSEG: u64 = 64 << 10;

/// 255 elements from pattern segments 0/1 into non-overlapping slots of
/// segments 2/3, sizes 1..200, offsets spread over the segments.
fn elements(n: usize) -> Vec<ListElem> {
    (0..n)
        .map(|i| {
            let size = 1 + (i as u64 * 37) % 200;
            ListElem::new(
                SegId((i % 2) as u8),
                (i as u64 * 251) % (LSEG - 256),
                SegId(if i % 3 == 0 { 3 } else { 2 }),
                i as u64 * 256,
                size,
            )
        })
        .collect()
}

/// Checks that the segments 2/3 of this rank hold `from`'s elements, and
/// zeros everywhere else.
fn check_elements(g: &Gaspi, from: Rank, elems: &[ListElem], swapped: bool) -> R {
    let s2 = g.segment(SegId(2))?.read_vec::<u8>(0, LSEG as usize)?;
    let s3 = g.segment(SegId(3))?.read_vec::<u8>(0, LSEG as usize)?;
    let mut want2 = vec![0u8; LSEG as usize];
    let mut want3 = vec![0u8; LSEG as usize];
    for e in elems {
        // Written lists: the peer's pattern segment lands at remote_*;
        // read lists (swapped): the peer's remote_* pattern lands at local_*.
        let (src_seg, src_off, dst_seg, dst_off) = if swapped {
            (e.remote_seg, e.remote_offset, e.local_seg, e.local_offset)
        } else {
            (e.local_seg, e.local_offset, e.remote_seg, e.remote_offset)
        };
        let want = if dst_seg.0 == 2 {
            &mut want2
        } else {
            &mut want3
        };
        for k in 0..e.size {
            want[(dst_off + k) as usize] = pattern(from.0, src_seg.0, src_off + k);
        }
    }
    if s2 != want2 || s3 != want3 {
        let bad = s2.iter().zip(&want2).position(|(a, b)| a != b);
        return Err(
            format!("elements from {from:?} misplaced (seg 2 first bad byte {bad:?})").into(),
        );
    }
    Ok(())
}

fn lists(g: &Gaspi) -> R {
    for s in 0..4 {
        g.segment_create(SegId(s), LSEG, Memory::Host, Group::ALL, Timeout::Block)?;
    }
    fill(g, SegId(0))?;
    fill(g, SegId(1))?;
    block(g)?;
    let elems = elements(255);
    // write_list_notify: the notification after all 255 elements.
    g.write_list_notify(
        &elems,
        next(g),
        SegId(3),
        NotifyId(3),
        g.rank().0 + 1,
        Queue(0),
    )?;
    g.wait(Queue(0), Timeout::Block)?;
    let id = g.notify_waitsome(SegId(3), NotifyId(3), 1, Timeout::Ms(60_000))?;
    assert_eq!(g.notify_reset(SegId(3), id)?, prev(g).0 + 1);
    check_elements(g, prev(g), &elems, false)?;
    block(g)?;
    // write_list (no notification) then a barrier.
    for s in [2u8, 3] {
        g.segment(SegId(s))?.write(0, &vec![0u8; LSEG as usize])?;
    }
    block(g)?;
    g.write_list(&elems[..100], next(g), Queue(1))?;
    g.wait(Queue(1), Timeout::Block)?;
    block(g)?;
    check_elements(g, prev(g), &elems[..100], false)?;
    block(g)?;
    // read_list_notify: elements (local 2/3 <- remote 0/1 of the next rank).
    for s in [2u8, 3] {
        g.segment(SegId(s))?.write(0, &vec![0u8; LSEG as usize])?;
    }
    let reads: Vec<ListElem> = elems
        .iter()
        .map(|e| {
            ListElem::new(
                e.remote_seg,
                e.remote_offset,
                e.local_seg,
                e.local_offset,
                e.size,
            )
        })
        .collect();
    g.read_list_notify(&reads, next(g), SegId(2), NotifyId(5), Queue(0))?;
    let id = g.notify_waitsome(SegId(2), NotifyId(5), 1, Timeout::Ms(60_000))?;
    assert_eq!(g.notify_reset(SegId(2), id)?, 1);
    g.wait(Queue(0), Timeout::Block)?;
    check_elements(g, next(g), &reads, true)?;
    // read_list: a few elements again into zeroed memory.
    for s in [2u8, 3] {
        g.segment(SegId(s))?.write(0, &vec![0u8; LSEG as usize])?;
    }
    g.read_list(&reads[..7], next(g), Queue(2))?;
    g.wait(Queue(2), Timeout::Block)?;
    check_elements(g, next(g), &reads[..7], true)?;
    let st = g.statistics();
    assert_eq!(st.calls_of("write_list_notify"), 1);
    assert_eq!(st.calls_of("read_list"), 1);
    Ok(())
}

fn lists_bad(g: &Gaspi) -> R {
    for s in 0..4 {
        g.segment_create(SegId(s), LSEG, Memory::Host, Group::ALL, Timeout::Block)?;
    }
    fill(g, SegId(0))?;
    fill(g, SegId(1))?;
    block(g)?;
    let to = next(g);
    let mut elems = elements(255);
    let more = elements(256);
    let e = g.write_list(&more, to, Queue(0));
    assert!(
        matches!(
            e,
            Err(Error::TooManyElements {
                count: 256,
                max: 255,
                ..
            })
        ),
        "{e:?}"
    );
    assert!(matches!(
        g.write_list(&[], to, Queue(0)),
        Err(Error::ZeroSize { .. })
    ));
    // The last element is out of bounds: the 254 before it must not move.
    elems[254].remote_offset = LSEG - 1;
    let e = g.write_list_notify(&elems, to, SegId(3), NotifyId(3), 1, Queue(0));
    assert!(matches!(e, Err(Error::OutOfBounds { .. })), "{e:?}");
    elems[254].remote_offset = 0;
    elems[254].remote_seg = SegId(77);
    let e = g.write_list(&elems, to, Queue(0));
    assert!(matches!(e, Err(Error::UnknownSegment { .. })), "{e:?}");
    elems[254].remote_seg = SegId(2);
    elems[254].size = 0;
    let e = g.read_list(&elems, to, Queue(0));
    assert!(matches!(e, Err(Error::ZeroSize { .. })), "{e:?}");
    elems[254].size = 1;
    // A bad notification: nothing moves either.
    let e = g.write_list_notify(&elems, to, SegId(3), NotifyId(3), 0, Queue(0));
    assert!(matches!(e, Err(Error::NotifyValueZero)), "{e:?}");
    let e = g.read_list_notify(&elems, to, SegId(3), NotifyId(u32::MAX), Queue(0));
    assert!(matches!(e, Err(Error::NotifyIdOutOfRange { .. })), "{e:?}");
    assert_eq!(g.queue_size(Queue(0))?, 0);
    block(g)?;
    for s in [2u8, 3] {
        let got = g.segment(SegId(s))?.read_vec::<u8>(0, LSEG as usize)?;
        assert!(got.iter().all(|&b| b == 0), "segment {s} was written");
    }
    assert_eq!(g.notify_reset(SegId(3), NotifyId(3))?, 0);
    let _ = Instant::now();
    Ok(())
}

// ----- queues -----

fn queues(g: &Gaspi) -> R {
    let seg = g.segment_create(SegId(0), 4096, Memory::Host, Group::ALL, Timeout::Block)?;
    let before = g.queue_num();
    let mut made = Vec::new();
    loop {
        match g.queue_create() {
            Ok(q) => made.push(q),
            Err(Error::NoFreeQueue { max }) => {
                assert_eq!(max, g.queue_max());
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    assert_eq!(before + made.len() as u32, g.queue_max());
    assert_eq!(g.queue_num(), g.queue_max());
    let q = *made.last().expect("a queue was made");
    seg.write(0, &[g.rank().0 as u64])?;
    g.write_notify(SegId(0), 0, next(g), SegId(0), 8, 8, NotifyId(1), 1, q)?;
    assert_eq!(g.queue_size(q)?, 2);
    let busy = g.queue_delete(q);
    assert!(
        matches!(busy, Err(Error::QueueBusy { posted: 2, .. })),
        "{busy:?}"
    );
    g.queue_purge(q, Timeout::Block)?;
    assert_eq!(g.queue_size(q)?, 0);
    g.queue_delete(q)?;
    let gone = g.write(SegId(0), 0, next(g), SegId(0), 8, 8, q);
    assert!(matches!(gone, Err(Error::BadQueue { .. })), "{gone:?}");
    assert!(matches!(g.queue_delete(q), Err(Error::BadQueue { .. })));
    // The id is free again, and is the one handed out next.
    assert_eq!(g.queue_create()?, q);
    for q in made {
        g.queue_delete(q)?;
    }
    assert_eq!(g.queue_num(), before);
    g.notify_waitsome(SegId(0), NotifyId(1), 1, Timeout::Ms(60_000))?;
    assert_eq!(seg.read_vec::<u64>(8, 1)?, vec![prev(g).0 as u64]);
    Ok(())
}

// ----- atomics -----

/// Segment 0 in the runtime's shared memory (hardware atomics on the
/// mapping) and segment 1 bound from a heap buffer (atomics applied by the
/// owner's progress engine).
fn atomic_segments(g: &Gaspi) -> R {
    g.segment_create(SegId(0), 4096, Memory::Host, Group::ALL, Timeout::Block)?;
    let buf = vec![0u64; 512]
        .into_iter()
        .flat_map(u64::to_ne_bytes)
        .collect::<Vec<u8>>();
    g.segment_use(SegId(1), buf.into_boxed_slice(), Group::ALL, Timeout::Block)?;
    Ok(())
}

fn fetch_add(g: &Gaspi) -> R {
    const N: u64 = 10_000;
    atomic_segments(g)?;
    let root = Rank(0);
    let e = g.atomic_fetch_add(SegId(0), 4, root, 1, Timeout::Block);
    assert!(matches!(e, Err(Error::Unaligned { offset: 4 })), "{e:?}");
    let e = g.atomic_fetch_add(SegId(0), 4096, root, 1, Timeout::Block);
    assert!(matches!(e, Err(Error::OutOfBounds { .. })), "{e:?}");
    let e = g.atomic_fetch_add(SegId(9), 0, root, 1, Timeout::Block);
    assert!(matches!(e, Err(Error::UnknownSegment { .. })), "{e:?}");
    block(g)?;
    for (seg, n) in [(SegId(0), N), (SegId(1), N / 10)] {
        let mut last = None;
        for _ in 0..n {
            let old = g.atomic_fetch_add(seg, 8, root, 1, Timeout::Block)?;
            // Old values seen by one rank only grow.
            assert!(last.is_none_or(|l| old > l), "{old} after {last:?}");
            last = Some(old);
        }
        // Large addends wrap like u64 arithmetic.
        g.atomic_fetch_add(seg, 16, root, u64::MAX, Timeout::Block)?;
        block(g)?;
        let total = g.atomic_fetch_add(seg, 8, root, 0, Timeout::Block)?;
        assert_eq!(total, n * g.size() as u64, "{seg}");
        let wrapped = g.atomic_fetch_add(seg, 16, root, 0, Timeout::Block)?;
        assert_eq!(wrapped, (g.size() as u64).wrapping_mul(u64::MAX), "{seg}");
    }
    assert!(g.statistics().calls_of("atomic_fetch_add") >= N);
    Ok(())
}

fn compare_swap(g: &Gaspi) -> R {
    atomic_segments(g)?;
    let me = g.rank().0 as u64 + 1;
    for (seg, off) in [(SegId(0), 24), (SegId(1), 40), (SegId(0), 4088)] {
        let root = Rank(g.size() - 1);
        let old = g.atomic_compare_swap(seg, off, root, 0, me, Timeout::Block)?;
        block(g)?;
        let winner = g.atomic_fetch_add(seg, off, root, 0, Timeout::Block)?;
        assert!((1..=g.size() as u64).contains(&winner), "{winner}");
        // Exactly one rank saw 0 and put its number in; every loser saw it.
        assert_eq!(old == 0, winner == me, "old {old}, winner {winner}");
        if old != 0 {
            assert_eq!(old, winner);
        }
        // A failing swap changes nothing.
        let again = g.atomic_compare_swap(seg, off, root, 0, 99, Timeout::Block)?;
        assert_eq!(again, winner);
        block(g)?;
    }
    let e = g.atomic_compare_swap(SegId(1), 12, Rank(0), 0, 1, Timeout::Block);
    assert!(matches!(e, Err(Error::Unaligned { offset: 12 })), "{e:?}");
    Ok(())
}
