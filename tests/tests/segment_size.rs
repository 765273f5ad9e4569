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
fn huge_sizes() -> Vec<u64> {
    vec![
        u64::MAX,
        u64::MAX - 100,
        u64::MAX - 4000,
        u64::MAX - 4095,
        (1u64 << 63) + 1,
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
    let seg = SegId(3);
    for size in huge_sizes() {
        let alloc = g.segment_alloc(seg, size, Memory::Host);
        assert!(alloc.is_err(), "segment_alloc({size}): {alloc:?}");
        id_is_free_and_usable(&g, seg);
        let create = g.segment_create(seg, size, Memory::Host, Group::ALL, LONG);
        assert!(create.is_err(), "segment_create({size}): {create:?}");
        id_is_free_and_usable(&g, seg);
        // Refused on this GPU-less host anyway; must leave nothing behind.
        let gpu = g.segment_alloc(seg, size, Memory::Gpu(0));
        assert!(gpu.is_err(), "segment_alloc({size}, Gpu(0)): {gpu:?}");
        id_is_free_and_usable(&g, seg);
        let mut byte = 0u8;
        // SAFETY: refused before the pointer is used (checked below: the
        // segment does not exist afterwards).
        let bind = unsafe { g.segment_bind(seg, &mut byte, size) };
        assert!(bind.is_err(), "segment_bind({size}): {bind:?}");
        id_is_free_and_usable(&g, seg);
    }
}
