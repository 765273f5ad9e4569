//! The segment tables every call consults, read without locks.
//!
//! `write_notify` must find the local and the remote segment on every call.
//! A `RwLock` costs two atomic read-modify-writes per lookup (about 15 ns
//! here, measured); the tables change only when segments are created,
//! registered or deleted. So they are copy-on-write snapshots behind an
//! `ArcSwap`: a reader takes the current snapshot (a few ns, no shared
//! counter), writers build a new one under a mutex and publish it. A
//! snapshot keeps the segments it points to alive, so a reader never sees
//! memory freed under it, and a segment is freed once no snapshot or handle
//! refers to it.

use crate::segment::LocalSegment;
use crate::transport::RemoteSegment;
use arc_swap::{ArcSwap, Guard};
use std::sync::{Arc, Mutex};

/// Entries per table: every `u8` segment id, the system segment at 255.
pub(crate) const ENTRIES: usize = 256;

/// The segments one rank registered with this one, by id.
pub(crate) type RankTable = Vec<Option<Arc<dyn RemoteSegment>>>;

/// One snapshot of all tables.
#[derive(Clone)]
pub(crate) struct Tables {
    /// This rank's own segments.
    pub local: Arc<Vec<Option<Arc<LocalSegment>>>>,
    /// `remote[rank][seg]`: segments reachable on each rank.
    pub remote: Vec<Arc<RankTable>>,
}

/// The published snapshot and the writers' lock.
pub(crate) struct SegmentTables {
    current: ArcSwap<Tables>,
    writer: Mutex<()>,
}

impl std::fmt::Debug for SegmentTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SegmentTables")
    }
}

impl SegmentTables {
    /// Empty tables for a job of `ranks`.
    pub fn new(ranks: u32) -> SegmentTables {
        let empty_rank: Arc<RankTable> = Arc::new((0..ENTRIES).map(|_| None).collect());
        SegmentTables {
            current: ArcSwap::from_pointee(Tables {
                local: Arc::new((0..ENTRIES).map(|_| None).collect()),
                remote: (0..ranks).map(|_| empty_rank.clone()).collect(),
            }),
            writer: Mutex::new(()),
        }
    }

    /// The current snapshot.
    #[inline]
    pub fn load(&self) -> Guard<Arc<Tables>> {
        self.current.load()
    }

    /// Changes the tables: `f` edits a private copy, which is then published.
    /// Writers are serialised; readers are never blocked.
    pub fn update<R>(&self, f: impl FnOnce(&mut TablesMut<'_>) -> R) -> R {
        let _w = self.writer.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = Tables::clone(&self.current.load());
        let r = f(&mut TablesMut(&mut next));
        self.current.store(Arc::new(next));
        r
    }
}

/// Editing access to a private copy of the tables.
pub(crate) struct TablesMut<'a>(&'a mut Tables);

impl TablesMut<'_> {
    /// The local segment with index `seg`.
    pub fn local(&self, seg: usize) -> Option<&Arc<LocalSegment>> {
        self.0.local[seg].as_ref()
    }

    /// Sets or clears local segment `seg`; returns what was there.
    pub fn set_local(
        &mut self,
        seg: usize,
        s: Option<Arc<LocalSegment>>,
    ) -> Option<Arc<LocalSegment>> {
        std::mem::replace(&mut Arc::make_mut(&mut self.0.local)[seg], s)
    }

    /// Sets or clears segment `seg` of `rank`.
    pub fn set_remote(&mut self, rank: usize, seg: usize, s: Option<Arc<dyn RemoteSegment>>) {
        Arc::make_mut(&mut self.0.remote[rank])[seg] = s;
    }
}
