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
