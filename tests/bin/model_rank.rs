//! `gaspi-model-rank`: the rank program of `tests/model.rs`.
//!
//! One subcommand per scenario. Each rank checks what it sees and exits
//! with a non-zero code (panics) when a call did the wrong thing; the
//! launcher then fails the whole job.

use gaspi::{
    Config, Error, Gaspi, Group, ListElem, Memory, NotifyId, Queue, Rank, RankState, ReduceOp,
    Reducible, SegId, Timeout,
};
use std::time::{Duration, Instant};

type R = Result<(), Box<dyn std::error::Error>>;

fn main() {
    gaspi_launch::init_logging();
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
        "groups" => groups(&g),
        "allreduce" => allreduce(&g),
        "resume" => resume(&g),
        "passive" => passive(&g),
        "kill" => kill(&g),
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
    reads_then_read_notify(g, &dst, from)
}

/// Windows of reads, then a `read_notify` behind them (over TCP the target
/// gathers the answers to the reads of one read of its connection and
/// sends them together): the word is set only once the `read_notify`'s own
/// bytes are in place, and `wait` finds every read's.
fn reads_then_read_notify(g: &Gaspi, dst: &gaspi::Segment, from: Rank) -> R {
    // Small (gathered whole) and large (bytes sent in place, answers
    // gathered) reads.
    read_windows(g, dst, from, 8192, 16, 48)?;
    read_windows(g, dst, from, 256 << 10, 4, 8)
}

/// `rounds` rounds of `window` reads, each into its own `slot` bytes,
/// then a `read_notify` of the same size into the next slot.
fn read_windows(
    g: &Gaspi,
    dst: &gaspi::Segment,
    from: Rank,
    slot: u64,
    window: u64,
    rounds: u64,
) -> R {
    const SLOT_PAD: u64 = 64;
    let zeros = vec![0u8; ((window + 1) * slot) as usize];
    for round in 0..rounds {
        let n = 1 + (round * 977 + slot / 4 * (round % 4)) % (slot - SLOT_PAD);
        let at = |k: u64| k * slot + round % SLOT_PAD;
        dst.write(0, &zeros)?;
        for k in 0..window {
            g.read(SegId(1), at(k), from, SegId(0), at(k), n, Queue(0))?;
        }
        let last = at(window);
        g.read_notify(
            SegId(1),
            last,
            from,
            SegId(0),
            last,
            n,
            NotifyId(10),
            Queue(0),
        )?;
        let id = g.notify_waitsome(SegId(1), NotifyId(10), 1, Timeout::Ms(60_000))?;
        let got = dst.read_vec::<u8>(last as usize, n as usize)?;
        for (i, b) in got.iter().enumerate() {
            let o = last + i as u64;
            if *b != pattern(from.0, 0, o) {
                return Err(
                    format!("round {round}: byte {o} not there when {id:?} was set").into(),
                );
            }
        }
        assert_eq!(g.notify_reset(SegId(1), NotifyId(10))?, 1);
        g.wait(Queue(0), Timeout::Ms(60_000))?;
        for k in 0..window {
            let got = dst.read_vec::<u8>(at(k) as usize, n as usize)?;
            for (i, b) in got.iter().enumerate() {
                let o = at(k) + i as u64;
                if *b != pattern(from.0, 0, o) {
                    return Err(format!("round {round}: read byte {o} wrong after wait").into());
                }
            }
        }
    }
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
    block(g)?;
    // Elements of size 0 (decision 0030): checked, nothing moved; the
    // others land and the notification follows them. All of size 0: the
    // notification alone.
    for s in [2u8, 3] {
        g.segment(SegId(s))?.write(0, &vec![0u8; LSEG as usize])?;
    }
    block(g)?;
    let mixed: Vec<ListElem> = elems
        .iter()
        .enumerate()
        .map(|(i, e)| ListElem {
            size: if i % 3 == 0 { 0 } else { e.size },
            ..*e
        })
        .collect();
    g.write_list_notify(&mixed, next(g), SegId(3), NotifyId(4), 9, Queue(1))?;
    assert_eq!(g.queue_size(Queue(1))?, 255);
    let id = g.notify_waitsome(SegId(3), NotifyId(4), 1, Timeout::Ms(60_000))?;
    assert_eq!(g.notify_reset(SegId(3), id)?, 9);
    check_elements(g, prev(g), &mixed, false)?;
    let none: Vec<ListElem> = mixed.iter().map(|e| ListElem { size: 0, ..*e }).collect();
    g.write_list_notify(&none[..10], next(g), SegId(3), NotifyId(6), 5, Queue(1))?;
    let id = g.notify_waitsome(SegId(3), NotifyId(6), 1, Timeout::Ms(60_000))?;
    assert_eq!(g.notify_reset(SegId(3), id)?, 5);
    g.wait(Queue(1), Timeout::Block)?;
    check_elements(g, prev(g), &mixed, false)?;
    let st = g.statistics();
    assert_eq!(st.calls_of("write_list_notify"), 3);
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
    // A zero-size element is valid (decision 0030) but checked all the same.
    elems[254].size = 0;
    elems[254].remote_offset = LSEG + 1;
    let e = g.read_list(&elems, to, Queue(0));
    assert!(matches!(e, Err(Error::OutOfBounds { .. })), "{e:?}");
    elems[254].remote_offset = 0;
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
    // One request: the notification is part of it (decision 0030).
    assert_eq!(g.queue_size(q)?, 1);
    let busy = g.queue_delete(q);
    assert!(
        matches!(busy, Err(Error::QueueBusy { posted: 1, .. })),
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
    // Adds per rank to each of the two counters' first (a tenth of it to
    // the second); FETCH_ADD_N makes fewer where each one is slow (the
    // emulated Soft-RoCE VM: atomics there go through the owner).
    let adds: u64 = std::env::var("FETCH_ADD_N")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    atomic_segments(g)?;
    let root = Rank(0);
    let e = g.atomic_fetch_add(SegId(0), 4, root, 1, Timeout::Block);
    assert!(matches!(e, Err(Error::Unaligned { offset: 4 })), "{e:?}");
    let e = g.atomic_fetch_add(SegId(0), 4096, root, 1, Timeout::Block);
    assert!(matches!(e, Err(Error::OutOfBounds { .. })), "{e:?}");
    let e = g.atomic_fetch_add(SegId(9), 0, root, 1, Timeout::Block);
    assert!(matches!(e, Err(Error::UnknownSegment { .. })), "{e:?}");
    block(g)?;
    for (seg, n) in [(SegId(0), adds), (SegId(1), adds / 10)] {
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
    assert!(g.statistics().calls_of("atomic_fetch_add") >= adds);
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

// ----- groups -----

fn groups(g: &Gaspi) -> R {
    let me = g.rank();
    let n = g.size();
    // Group::ALL cannot be changed or deleted.
    assert!(matches!(
        g.group_add(Group::ALL, me),
        Err(Error::GroupCommitted { .. })
    ));
    assert!(matches!(
        g.group_delete(Group::ALL),
        Err(Error::GroupCommitted { .. })
    ));
    // A group with holes: ranks 0, 2, 5 (of 8), or 0 and the last rank.
    let members: Vec<Rank> = if n >= 8 {
        vec![Rank(0), Rank(2), Rank(5)]
    } else {
        vec![Rank(0), Rank(n - 1)]
    };
    if members.contains(&me) {
        let grp = g.group_create()?;
        // Added in a scrambled order: members are kept ascending.
        for &r in members.iter().rev() {
            g.group_add(grp, r)?;
        }
        let dup = g.group_add(grp, members[0]);
        assert!(matches!(dup, Err(Error::AlreadyMember { .. })), "{dup:?}");
        assert!(matches!(
            g.barrier(grp, Timeout::Test),
            Err(Error::BadGroup { .. })
        ));
        g.group_commit(grp, Timeout::Ms(60_000))?;
        assert_eq!(g.group_ranks(grp)?, members);
        assert_eq!(g.group_size(grp)?, members.len() as u32);
        assert!(matches!(
            g.group_add(grp, Rank(1)),
            Err(Error::GroupCommitted { .. })
        ));
        for round in 0..20u64 {
            g.barrier(grp, Timeout::Ms(60_000))?;
            let send = [me.0 as i64 * 1000 + round as i64, -(me.0 as i64)];
            let mut recv = [0i64; 2];
            g.allreduce(&send, &mut recv, ReduceOp::Sum, grp, Timeout::Ms(60_000))?;
            let sum: i64 = members.iter().map(|r| r.0 as i64).sum();
            assert_eq!(
                recv,
                [sum * 1000 + round as i64 * members.len() as i64, -sum]
            );
            g.allreduce(&send, &mut recv, ReduceOp::Max, grp, Timeout::Ms(60_000))?;
            let top = members.last().expect("members").0 as i64;
            assert_eq!(recv, [top * 1000 + round as i64, 0]);
        }
        // Delete and create again: the id is reused and the new group's
        // barriers are not released by the old group's epochs.
        g.group_delete(grp)?;
        assert!(matches!(g.group_size(grp), Err(Error::BadGroup { .. })));
        let again = g.group_create()?;
        assert_eq!(again, grp);
        for &r in &members {
            g.group_add(again, r)?;
        }
        g.group_commit(again, Timeout::Ms(60_000))?;
        for _ in 0..5 {
            g.barrier(again, Timeout::Ms(60_000))?;
        }
        g.group_delete(again)?;
    } else {
        // Not a member: the group does not exist here.
        assert!(matches!(
            g.barrier(Group(1), Timeout::Test),
            Err(Error::BadGroup { .. })
        ));
    }
    block(g)?;
    // Up to group_max groups, Group::ALL included.
    let mut made = Vec::new();
    loop {
        match g.group_create() {
            Ok(grp) => made.push(grp),
            Err(Error::NoFreeGroup { max }) => {
                assert_eq!(max, g.group_max());
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    assert_eq!(made.len() as u32, g.group_max() - 1);
    for grp in made {
        g.group_delete(grp)?;
    }
    // Members that disagree: rank 0 thinks {0, 1}, ranks 1 and 2 {0, 1, 2}.
    if n >= 3 && me.0 <= 2 {
        let grp = g.group_create()?;
        let list: &[u32] = if me.0 == 0 { &[0, 1] } else { &[0, 1, 2] };
        for &r in list {
            g.group_add(grp, Rank(r))?;
        }
        let r = g.group_commit(grp, Timeout::Ms(2000));
        match me.0 {
            0 => assert!(
                matches!(r, Err(Error::GroupMismatch { rank: Rank(1), .. })),
                "{r:?}"
            ),
            1 => assert!(
                matches!(r, Err(Error::GroupMismatch { rank: Rank(0), .. })),
                "{r:?}"
            ),
            _ => assert!(
                matches!(
                    r,
                    Err(Error::Timeout { .. }) | Err(Error::GroupMismatch { .. })
                ),
                "{r:?}"
            ),
        }
        assert!(matches!(
            g.barrier(grp, Timeout::Test),
            Err(Error::BadGroup { .. })
        ));
        g.group_delete(grp)?;
    }
    Ok(())
}

// ----- allreduce -----

/// splitmix64: the same stream on every rank for the same seed.
fn mix(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

trait Gen: Reducible + PartialEq + std::fmt::Debug {
    fn gen(bits: u64) -> Self;
    fn op_ref(op: ReduceOp, a: Self, b: Self) -> Self;
}

macro_rules! gen_int {
    ($($t:ty),*) => {$(
        impl Gen for $t {
            fn gen(bits: u64) -> Self { bits as $t }
            fn op_ref(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Min => if b < a { b } else { a },
                    ReduceOp::Max => if b > a { b } else { a },
                    ReduceOp::Sum => a.wrapping_add(b),
                }
            }
        }
    )*};
}
gen_int!(i32, u32, i64, u64);

macro_rules! gen_float {
    ($($t:ty),*) => {$(
        impl Gen for $t {
            fn gen(bits: u64) -> Self {
                // Values of every magnitude and sign, so that the order of
                // the sum matters.
                let m = (bits >> 11) as $t / (1u64 << 53) as $t;
                let e = ((bits & 0x3f) as i32) - 32;
                let s = if bits & 0x40 != 0 { -1.0 } else { 1.0 };
                s * m * (2.0 as $t).powi(e)
            }
            fn op_ref(op: ReduceOp, a: Self, b: Self) -> Self {
                match op {
                    ReduceOp::Min => if b < a { b } else { a },
                    ReduceOp::Max => if b > a { b } else { a },
                    ReduceOp::Sum => a + b,
                }
            }
        }
    )*};
}
gen_float!(f32, f64);

fn contribution<T: Gen>(rank: u32, case: u64, count: usize) -> Vec<T> {
    (0..count)
        .map(|i| T::gen(mix((rank as u64) << 40 ^ case << 16 ^ i as u64)))
        .collect()
}

fn check_type<T: Gen>(g: &Gaspi, case: &mut u64) -> R {
    let members: Vec<u32> = (0..g.size()).collect();
    for op in [ReduceOp::Min, ReduceOp::Max, ReduceOp::Sum] {
        for count in [1usize, 7, 255] {
            *case += 1;
            let send = contribution::<T>(g.rank().0, *case, count);
            let mut recv = vec![T::gen(0); count];
            g.allreduce(&send, &mut recv, op, Group::ALL, Timeout::Ms(60_000))?;
            // The reference: a sequential reduction in member order.
            let mut want = contribution::<T>(members[0], *case, count);
            for &m in &members[1..] {
                let x = contribution::<T>(m, *case, count);
                for (w, v) in want.iter_mut().zip(x) {
                    *w = T::op_ref(op, *w, v);
                }
            }
            if recv != want {
                return Err(format!(
                    "{} {op:?} x{count}: got {:?}.. want {:?}..",
                    std::any::type_name::<T>(),
                    &recv[..count.min(3)],
                    &want[..count.min(3)]
                )
                .into());
            }
        }
    }
    Ok(())
}

fn allreduce(g: &Gaspi) -> R {
    let mut case = 0;
    check_type::<i32>(g, &mut case)?;
    check_type::<u32>(g, &mut case)?;
    check_type::<i64>(g, &mut case)?;
    check_type::<u64>(g, &mut case)?;
    check_type::<f32>(g, &mut case)?;
    check_type::<f64>(g, &mut case)?;
    // A user reduction that depends on the order: acc = acc * 3 + x (u32,
    // wrapping), applied in member order.
    let send: Vec<u8> = (0..64u32)
        .map(|i| i.wrapping_mul(7).wrapping_add(g.rank().0 * 1_000_003))
        .flat_map(u32::to_ne_bytes)
        .collect();
    let mut recv = vec![0u8; send.len()];
    let reduce = |acc: &mut [u8], x: &[u8]| {
        for (a, b) in acc.chunks_exact_mut(4).zip(x.chunks_exact(4)) {
            let v = u32::from_ne_bytes(a.try_into().unwrap())
                .wrapping_mul(3)
                .wrapping_add(u32::from_ne_bytes(b.try_into().unwrap()));
            a.copy_from_slice(&v.to_ne_bytes());
        }
    };
    g.allreduce_user(
        &send,
        &mut recv,
        4,
        &reduce,
        Group::ALL,
        Timeout::Ms(60_000),
    )?;
    for i in 0..64u32 {
        let mut want = i.wrapping_mul(7);
        for m in 1..g.size() {
            want = want
                .wrapping_mul(3)
                .wrapping_add(i.wrapping_mul(7).wrapping_add(m * 1_000_003));
        }
        let got = u32::from_ne_bytes(recv[i as usize * 4..][..4].try_into().unwrap());
        assert_eq!(got, want, "user reduction, element {i}");
    }
    // Bad input, refused before anything is sent.
    let big = vec![0u64; 256];
    let mut out = vec![0u64; 256];
    let e = g.allreduce(&big, &mut out, ReduceOp::Sum, Group::ALL, Timeout::Block);
    assert!(
        matches!(e, Err(Error::TooManyElements { count: 256, .. })),
        "{e:?}"
    );
    let e = g.allreduce(
        &big[..3],
        &mut out[..2],
        ReduceOp::Sum,
        Group::ALL,
        Timeout::Block,
    );
    assert!(matches!(e, Err(Error::LengthMismatch { .. })), "{e:?}");
    let e = g.allreduce::<u64>(&[], &mut [], ReduceOp::Sum, Group::ALL, Timeout::Block);
    assert!(matches!(e, Err(Error::ZeroSize { .. })), "{e:?}");
    let e = g.allreduce(
        &big[..3],
        &mut out[..3],
        ReduceOp::Sum,
        Group(9),
        Timeout::Block,
    );
    assert!(matches!(e, Err(Error::BadGroup { .. })), "{e:?}");
    // Still in step after the refusals.
    let mut one = [0u64];
    g.allreduce(
        &[1u64],
        &mut one,
        ReduceOp::Sum,
        Group::ALL,
        Timeout::Ms(60_000),
    )?;
    assert_eq!(one[0], g.size() as u64);
    Ok(())
}

/// Calls `f` with `Timeout::Test` until it succeeds; returns how many
/// times it said Timeout.
fn poll_until_done(mut f: impl FnMut() -> Result<(), Error>) -> Result<u32, Error> {
    let mut timeouts = 0;
    let start = Instant::now();
    loop {
        match f() {
            Ok(()) => return Ok(timeouts),
            Err(e) if e.is_timeout() => {
                timeouts += 1;
                assert!(start.elapsed() < Duration::from_secs(60), "never completed");
                std::thread::sleep(Duration::from_micros(200));
            }
            Err(e) => return Err(e),
        }
    }
}

fn resume(g: &Gaspi) -> R {
    const GO: SegId = SegId(7);
    let me = g.rank().0;
    let n = g.size() as u64;
    let _go = g.segment_create(GO, 64, Memory::Host, Group::ALL, Timeout::Block)?;
    // Rank `late` joins a collective only once every other rank has
    // entered it with Timeout::Test (and got Timeout); then 300 ms later,
    // so that they poll many times. The sleep makes that likely, the
    // notifications make the first Timeout certain.
    let entered = |late: u32| -> R {
        g.notify(Rank(late), GO, NotifyId(me), 1, Queue(0))?;
        g.wait(Queue(0), Timeout::Ms(60_000))?;
        Ok(())
    };
    let join_late = || -> R {
        for _ in 1..n {
            let id = g.notify_waitsome(GO, NotifyId(0), n as u32, Timeout::Ms(60_000))?;
            g.notify_reset(GO, id)?;
        }
        std::thread::sleep(Duration::from_millis(300));
        Ok(())
    };
    for late in [0u32, 1] {
        // Rank `late` (the root, then a member) joins after the others,
        // which poll with Timeout::Test and so return Timeout many times.
        let send = [me as u64 + 1, 10 * (me as u64 + 1)];
        let mut recv = [0u64; 2];
        if me == late {
            join_late()?;
            g.allreduce(
                &send,
                &mut recv,
                ReduceOp::Sum,
                Group::ALL,
                Timeout::Ms(60_000),
            )?;
        } else {
            let first = g.allreduce(&send, &mut recv, ReduceOp::Sum, Group::ALL, Timeout::Test);
            assert!(matches!(first, Err(Error::Timeout { .. })), "{first:?}");
            // Meanwhile a different collective on the group is refused.
            let other = g.barrier(Group::ALL, Timeout::Test);
            assert!(
                matches!(
                    other,
                    Err(Error::CollectiveInProgress {
                        running: "allreduce",
                        ..
                    })
                ),
                "{other:?}"
            );
            let mut three = [0u64; 3];
            let other = g.allreduce(
                &[1u64, 2, 3],
                &mut three,
                ReduceOp::Sum,
                Group::ALL,
                Timeout::Test,
            );
            assert!(
                matches!(other, Err(Error::CollectiveInProgress { .. })),
                "{other:?}"
            );
            entered(late)?;
            poll_until_done(|| {
                g.allreduce(&send, &mut recv, ReduceOp::Sum, Group::ALL, Timeout::Test)
            })?;
        }
        let s = n * (n + 1) / 2;
        assert_eq!(recv, [s, 10 * s], "late {late}");
        // The barrier, resumed the same way.
        if me == late {
            join_late()?;
            block(g)?;
        } else {
            let first = g.barrier(Group::ALL, Timeout::Test);
            assert!(matches!(first, Err(Error::Timeout { .. })), "{first:?}");
            let mut one = [0u64];
            let other = g.allreduce(&[1u64], &mut one, ReduceOp::Sum, Group::ALL, Timeout::Test);
            assert!(
                matches!(
                    other,
                    Err(Error::CollectiveInProgress {
                        running: "barrier",
                        ..
                    })
                ),
                "{other:?}"
            );
            entered(late)?;
            poll_until_done(|| g.barrier(Group::ALL, Timeout::Test))?;
        }
    }
    // Many back-to-back resumed allreduces stay in step.
    for i in 0..50u64 {
        let mut recv = [0u64];
        poll_until_done(|| {
            g.allreduce(
                &[i * me as u64],
                &mut recv,
                ReduceOp::Sum,
                Group::ALL,
                Timeout::Test,
            )
        })?;
        assert_eq!(recv[0], i * n * (n - 1) / 2);
    }
    Ok(())
}

// ----- passive -----

fn passive_size(sender: u32, seq: u32) -> u64 {
    match seq % 5 {
        0 => 1,
        1 => gaspi::PASSIVE_MAX,
        _ => 1 + mix(((sender as u64) << 32) | seq as u64) % gaspi::PASSIVE_MAX,
    }
}

fn passive_byte(sender: u32, seq: u32, i: u64) -> u8 {
    (sender as u64 * 7 + seq as u64 * 13 + i * 3 + i / 256) as u8
}

fn passive(g: &Gaspi) -> R {
    const K: u32 = 40;
    let me = g.rank().0;
    let seg = g.segment_create(SegId(0), 2 << 16, Memory::Host, Group::ALL, Timeout::Block)?;
    let e = g.passive_send(SegId(0), 0, Rank(0), 0, Timeout::Block);
    assert!(
        matches!(e, Err(Error::PassiveSize { size: 0, .. })),
        "{e:?}"
    );
    let e = g.passive_send(SegId(0), 0, Rank(0), 65_536, Timeout::Block);
    assert!(matches!(e, Err(Error::PassiveSize { .. })), "{e:?}");
    let e = g.passive_send(SegId(0), (2 << 16) - 10, Rank(0), 11, Timeout::Block);
    assert!(matches!(e, Err(Error::OutOfBounds { .. })), "{e:?}");
    if me == 0 {
        let e = g.passive_receive(SegId(0), 0, Timeout::Ms(50));
        assert!(matches!(e, Err(Error::Timeout { .. })), "{e:?}");
    }
    block(g)?;
    if me != 0 {
        for seq in 0..K {
            let size = passive_size(me, seq);
            let bytes: Vec<u8> = (0..size).map(|i| passive_byte(me, seq, i)).collect();
            seg.write(0, &bytes)?;
            g.passive_send(SegId(0), 0, Rank(0), size, Timeout::Block)?;
        }
    } else {
        let mut next = vec![0u32; g.size() as usize];
        let t = Instant::now();
        for _ in 0..K * (g.size() - 1) {
            let (from, size) = g.passive_receive(SegId(0), 1 << 16, Timeout::Ms(60_000))?;
            let seq = next[from.0 as usize];
            next[from.0 as usize] += 1;
            assert_eq!(
                size,
                passive_size(from.0, seq),
                "size of message {seq} of {from:?}"
            );
            let got = seg.read_vec::<u8>(1 << 16, size as usize)?;
            for (i, b) in got.iter().enumerate() {
                assert_eq!(
                    *b,
                    passive_byte(from.0, seq, i as u64),
                    "byte {i} of message {seq} of {from:?}"
                );
            }
        }
        assert!(next[1..].iter().all(|&c| c == K));
        // Waiting sleeps: the receiver used far less CPU than wall time.
        let _ = t;
        let e = g.passive_receive(SegId(0), 0, Timeout::Ms(20));
        assert!(matches!(e, Err(Error::Timeout { .. })), "{e:?}");
        // To itself, too.
        seg.write(0, &[5u8, 6, 7])?;
        g.passive_send(SegId(0), 0, Rank(0), 3, Timeout::Block)?;
        assert_eq!(
            g.passive_receive(SegId(0), 100, Timeout::Ms(1000))?,
            (Rank(0), 3)
        );
        assert_eq!(seg.read_vec::<u8>(100, 3)?, vec![5, 6, 7]);
        let st = g.statistics();
        assert_eq!(
            st.calls_of("passive_receive"),
            (K * (g.size() - 1) + 1) as u64
        );
    }
    Ok(())
}

// ----- proc_kill and the error-state vector -----

fn kill(g: &Gaspi) -> R {
    let me = g.rank().0;
    let victim = Rank(g.size() - 1);
    // A barrier fails on every member as soon as any member is known dead
    // (decision 0018), even on one that has not seen its last signal yet:
    // so rank 0 kills only once every other survivor says it is past the
    // barrier (a notification into rank 0's segment).
    let seg = g.segment_create(SegId(0), 64, Memory::Host, Group::ALL, Timeout::Ms(60_000))?;
    block(g)?;
    assert!(g.state_vec().iter().all(|s| *s == RankState::Healthy));
    if me != 0 && me != victim.0 {
        g.notify(Rank(0), SegId(0), NotifyId(me), 1, Queue(0))?;
        g.wait(Queue(0), Timeout::Ms(60_000))?;
    }
    if me == 0 {
        for r in 1..victim.0 {
            g.notify_waitsome(SegId(0), NotifyId(r), 1, Timeout::Ms(60_000))?;
        }
        g.proc_ping(victim, Timeout::Ms(10_000))?;
        g.proc_kill(victim)?;
    }
    drop(seg);
    if me == victim.0 {
        std::thread::sleep(Duration::from_secs(30));
        return Err("still alive after proc_kill".into());
    }
    let t = Instant::now();
    while g.state_vec()[victim.0 as usize] != RankState::Corrupt {
        assert!(t.elapsed() < Duration::from_secs(20), "not marked corrupt");
        std::thread::sleep(Duration::from_millis(5));
    }
    let e = g.proc_ping(victim, Timeout::Ms(1000));
    assert!(
        matches!(e, Err(Error::PeerDead { rank }) if rank == victim),
        "{e:?}"
    );
    let e = g.barrier(Group::ALL, Timeout::Ms(5000));
    assert!(
        e.as_ref().err().and_then(|e| e.failed_rank()) == Some(victim),
        "{e:?}"
    );
    // The other survivors are not dead; one that already checked may
    // have ended in order (`Terminated`).
    let st = g.state_vec();
    assert!(
        st[..victim.0 as usize]
            .iter()
            .all(|s| matches!(s, RankState::Healthy | RankState::Terminated)),
        "{st:?}"
    );
    println!("rank {me} saw {victim:?} corrupt");
    Ok(())
}
