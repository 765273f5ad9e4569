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

use crate::model::bounds::check_segment_size;
use crate::model::config::Config;
use crate::model::error::{Error, Result};
use crate::model::ids::{Rank, SegId};
use crate::model::stats::Stats;
use crate::net::peers::Peers;
use crate::net::rendezvous::Endpoint;
use crate::segments::LocalSegment;
use crate::transport::tables::{SegmentTables, Tables};
use crate::transport::Transport;
use std::sync::{Arc, Mutex, OnceLock};

/// Index of the internal system segment in the remote tables; user ids are
/// below `segment_max` <= 255, so 255 is never a user's.
pub(crate) const SYSTEM_SEG: usize = 255;

impl std::fmt::Debug for Base {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Base")
            .field("rank", &self.rank)
            .field("size", &self.size)
            .field("peers", &self.peers)
            .field("transports", &self.transports)
            .finish_non_exhaustive()
    }
}

/// Decides the transport to a peer from its endpoint.
pub(crate) type ChooseTransport =
    Box<dyn Fn(Rank, &Endpoint) -> Result<Option<Arc<dyn Transport>>> + Send + Sync>;

/// The base every service of a rank stands on (see the module docs).
pub(crate) struct Base {
    pub config: Config,
    pub rank: Rank,
    pub size: u32,
    /// The other ranks: alive or not, control connections, replies.
    pub peers: Arc<Peers>,
    /// How each rank's segments are reached (`None`: no transport does),
    /// decided at start-up or on first use ([`Base::transport`]).
    pub transports: Vec<OnceLock<Option<Arc<dyn Transport>>>>,
    /// Decides the transport to a peer from its endpoint (first use).
    pub choose: ChooseTransport,
    /// Attaches a peer's system segment (first use in jobs whose ranks
    /// did not map every peer's at start-up; set by the front once).
    pub attach_system: OnceLock<Box<dyn Fn(Rank) -> Result<()> + Send + Sync>>,
    /// Serializes first-use attachments of system segments.
    attaching: Mutex<()>,
    /// This rank's segments and the segments peers registered with it.
    pub tables: SegmentTables,
    /// The internal segment whose notifications carry collectives.
    pub system: Arc<LocalSegment>,
    /// Calls, bytes and waiting time (see `stats.rs`).
    pub stats: Stats,
}

impl Base {
    /// A base whose transports are decided by `choose`, those of
    /// `transports` that are `Some` already.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        config: Config,
        rank: Rank,
        size: u32,
        peers: Arc<Peers>,
        transports: Vec<Option<Option<Arc<dyn Transport>>>>,
        choose: ChooseTransport,
        tables: SegmentTables,
        system: Arc<LocalSegment>,
    ) -> Base {
        Base {
            config,
            rank,
            size,
            peers,
            transports: transports
                .into_iter()
                .map(|t| t.map(OnceLock::from).unwrap_or_default())
                .collect(),
            choose,
            attach_system: OnceLock::new(),
            attaching: Mutex::new(()),
            tables,
            system,
            stats: Stats::default(),
        }
    }

    /// The transport to `rank` (`None`: no transport reaches it), decided
    /// now from its endpoint if not yet (which may ask rank 0's directory
    /// for the endpoint, decision 0065).
    pub fn transport(&self, rank: Rank) -> Result<Option<&Arc<dyn Transport>>> {
        self.peers.check_rank(rank)?;
        let slot = &self.transports[rank.0 as usize];
        if let Some(t) = slot.get() {
            return Ok(t.as_ref());
        }
        let ep = self.peers.endpoint(rank)?;
        let t = (self.choose)(rank, ep)?;
        Ok(slot.get_or_init(|| t).as_ref())
    }

    /// The transport to `rank` if it is decided already.
    pub fn transport_known(&self, rank: Rank) -> Option<&Arc<dyn Transport>> {
        self.transports.get(rank.0 as usize)?.get()?.as_ref()
    }

    /// Name of the transport to `rank` ("none" also when it cannot be
    /// decided: its endpoint cannot be had).
    pub fn transport_name(&self, rank: Rank) -> &'static str {
        match self.transport(rank) {
            Ok(Some(t)) => t.name(),
            _ => "none",
        }
    }

    /// The provider of the transport towards `rank`, if it has one.
    pub fn transport_provider(&self, rank: Rank) -> Option<String> {
        self.transport(rank)
            .ok()
            .flatten()
            .and_then(|t| t.provider().map(str::to_owned))
    }

    /// Makes sure `rank`'s system segment is attached here: at start-up in
    /// a job whose ranks got the whole table, else on first use.
    pub fn ensure_system(&self, rank: Rank) -> Result<()> {
        let attached = |b: &Base| {
            b.tables
                .load()
                .remote
                .get(rank.0 as usize)
                .is_some_and(|r| r[SYSTEM_SEG].is_some())
        };
        if attached(self) {
            return Ok(());
        }
        let Some(attach) = self.attach_system.get() else {
            return Ok(());
        };
        let _one = self.attaching.lock().unwrap_or_else(|e| e.into_inner());
        if attached(self) {
            return Ok(());
        }
        attach(rank)
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

impl Base {
    pub(crate) fn check_seg_id(&self, seg: SegId) -> Result<()> {
        if seg.0 as u32 >= self.config.segment_max {
            return Err(Error::SegmentIdOutOfRange {
                seg,
                max: self.config.segment_max,
            });
        }
        Ok(())
    }

    pub(crate) fn local_segment(&self, seg: SegId) -> Result<Arc<LocalSegment>> {
        self.check_seg_id(seg)?;
        self.tables.load().local[seg.0 as usize]
            .clone()
            .ok_or(Error::UnknownSegment {
                rank: self.rank,
                seg,
            })
    }

    /// Runs `f` on local segment `seg` of the current table snapshot: the
    /// hot-path form of [`Base::local_segment`], without reference counting.
    pub(crate) fn with_local<R>(
        &self,
        seg: SegId,
        f: impl FnOnce(&LocalSegment, &Tables) -> Result<R>,
    ) -> Result<R> {
        self.check_seg_id(seg)?;
        let tables = self.tables.load();
        let s = tables.local[seg.0 as usize]
            .as_deref()
            .ok_or(Error::UnknownSegment {
                rank: self.rank,
                seg,
            })?;
        f(s, &tables)
    }

    /// Checks the size of a write, read or list element: at most the
    /// transfer size maximum. 0 is allowed, as in GPI-2 (decision 0030):
    /// such a request moves no data, but its other arguments are checked
    /// as for any size and its notification, if it has one, is delivered.
    pub(crate) fn check_transfer_size(&self, size: u64) -> Result<()> {
        if size > self.config.transfer_size_max {
            return Err(Error::TooLarge {
                size,
                max: self.config.transfer_size_max,
            });
        }
        Ok(())
    }

    /// Checks the size of a new segment: not 0, and at most the configured
    /// [`segment_size_max`](crate::Config::segment_size_max). Every segment
    /// call runs it before anything is mapped, allocated or sent.
    pub(crate) fn check_segment_size(&self, size: u64) -> Result<()> {
        check_segment_size(size, self.config.segment_size_max)
    }

    /// Checks that `rank` exists, is healthy and reachable.
    pub(crate) fn check_peer(&self, rank: Rank) -> Result<()> {
        self.peers.check_rank(rank)?;
        self.peers.peer_ok(rank)?;
        if self.transport(rank)?.is_none() {
            return Err(Error::NoTransport {
                rank,
                reason: "it is on another host and no network transport is available yet".into(),
            });
        }
        Ok(())
    }
}
