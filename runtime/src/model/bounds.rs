//! Bounds checks shared by every layer: byte ranges against segment sizes,
//! segment sizes against the limits.
//!
//! Pure functions of numbers, at the bottom so that descriptors, segments,
//! transports serving a peer's request and the calls all check the same way.

use super::error::{Error, Result, Side};
use super::ids::{Rank, SegId};

/// Whether `offset..offset+len` lies within `size` bytes (no overflow).
#[inline]
pub(crate) fn fits(offset: u64, len: u64, size: u64) -> bool {
    offset.checked_add(len).is_some_and(|end| end <= size)
}

/// Checks the size of a new segment against `max`: not 0, at most `max`.
pub(crate) fn check_segment_size(size: u64, max: u64) -> Result<()> {
    if size == 0 {
        return Err(Error::ZeroSize { what: "a segment" });
    }
    if size > max {
        return Err(Error::SegmentTooLarge { size, max });
    }
    Ok(())
}

/// Checks `offset..offset+len` against a segment of `seg_size` bytes.
pub(crate) fn check_bounds(
    side: Side,
    rank: Rank,
    seg: SegId,
    offset: u64,
    len: u64,
    seg_size: u64,
) -> Result<()> {
    match offset.checked_add(len) {
        Some(end) if end <= seg_size => Ok(()),
        _ => Err(Error::OutOfBounds {
            side,
            rank,
            seg,
            offset,
            end: offset.saturating_add(len),
            seg_size,
        }),
    }
}
