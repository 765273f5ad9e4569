//! What every service of a rank reads: its configuration, the other
//! ranks, how each is reached, the segment tables, the system segment and
//! the counters.
//!
//! `Base` sits just above the transports and below the protocol layer and
//! the services. A service that needs only these takes `&Base` (and its
//! own state), never the whole context of the front (`context.rs`), so the
//! dependencies run one way: front -> services -> protocol -> base ->
//! transports -> segments -> net -> model. The layout of the system
//! segment (the internal segment whose notification words carry the
//! collectives) is here too: start-up sizes it, the collectives and the
//! assisted copy address it.

use crate::model::config::Config;
use crate::model::ids::Rank;
use crate::model::stats::Stats;
use crate::net::peers::Peers;
use crate::segments::LocalSegment;
use crate::transport::tables::SegmentTables;
use crate::transport::Transport;
use std::sync::Arc;

/// Index of the internal system segment in the remote tables; user ids are
/// below `segment_max` <= 255, so 255 is never a user's.
pub(crate) const SYSTEM_SEG: usize = 255;

/// The base every service of a rank stands on (see the module docs).
#[derive(Debug)]
pub(crate) struct Base {
    pub config: Config,
    pub rank: Rank,
    pub size: u32,
    /// The other ranks: alive or not, control connections, replies.
    pub peers: Arc<Peers>,
    /// How each rank's segments are reached (`None`: no transport does).
    pub transports: Vec<Option<Arc<dyn Transport>>>,
    /// This rank's segments and the segments peers registered with it.
    pub tables: SegmentTables,
    /// The internal segment whose notifications carry collectives.
    pub system: Arc<LocalSegment>,
    /// Calls, bytes and waiting time (see `stats.rs`).
    pub stats: Stats,
}

impl Base {
    /// Name of the transport to `rank`.
    pub fn transport_name(&self, rank: Rank) -> &'static str {
        self.transports[rank.0 as usize]
            .as_ref()
            .map_or("none", |t| t.name())
    }
}

/// Bytes of one allreduce slot of the system segment for an
/// `allreduce_elem_max` of `elem_max` (8-byte elements, rounded up to a
/// multiple of 64): 2 KiB for the default 255, at least that.
pub(crate) fn allreduce_slot(elem_max: u32) -> usize {
    (elem_max as usize * 8).next_multiple_of(64).max(2048)
}

/// Notification words of the system segment: 64 per group for barriers,
/// then per group one allreduce word per member position and one for the
/// result.
pub(crate) fn system_notifications(group_max: u32, size: u32) -> u32 {
    group_max * 64 + group_max * (size + 1)
}

/// Data bytes of the system segment: per group one allreduce slot (of
/// `slot` bytes, [`allreduce_slot`]) per member position (used on the
/// group's root) and one result slot. The memfd is sparse: pages never
/// touched cost nothing.
pub(crate) fn system_data_size(group_max: u32, size: u32, slot: usize) -> usize {
    group_max as usize * (size as usize + 1) * slot
}

/// Allreduce word of `group` for member position `slot` (`slot == size`:
/// the result word).
pub(crate) fn reduce_word(
    group_max: u32,
    size: u32,
    group: crate::model::ids::Group,
    slot: u32,
) -> u32 {
    64 * group_max + group.0 * (size + 1) + slot
}

/// Offset of allreduce slot `index` of `group` in the system segment's
/// data, for slots of `slot` bytes.
pub(crate) fn reduce_offset(
    size: u32,
    group: crate::model::ids::Group,
    index: u32,
    slot: usize,
) -> u64 {
    ((group.0 as u64 * (size as u64 + 1)) + index as u64) * slot as u64
}

/// Every collective word of `group` in the system segment.
pub(crate) fn group_words(
    group_max: u32,
    size: u32,
    group: crate::model::ids::Group,
) -> impl Iterator<Item = u32> {
    let first = reduce_word(group_max, size, group, 0);
    (64 * group.0..64 * group.0 + 64).chain(first..=first + size)
}
