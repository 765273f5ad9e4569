//! The segment tables every call consults, read without locks or shared counters.
//!
//! `write_notify` must find the local and the remote segment on every call.
//! A `RwLock` costs two atomic read-modify-writes per lookup, and so does an
//! `ArcSwap` load (both measured at about 15 ns here, a tenth of a
//! shared-memory ping-pong). The tables change only when segments are
//! created, registered or deleted. So they are immutable snapshots: writers
//! build a new one under a mutex, publish it and bump a version counter;
//! every thread keeps the snapshot it used last in a thread-local cache and
//! reuses it while the version has not moved. A lookup is then one relaxed
//! load of the version and a thread-local access.
//!
//! A snapshot keeps the segments it points to alive, so a reader never sees
//! memory freed under it. The price: a deleted segment's memory is freed only
//! once every thread that used the tables has made another call (or ended).

use crate::segment::LocalSegment;
use crate::transport::RemoteSegment;
use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
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

/// The published snapshot, its version, and the writers' lock.
pub(crate) struct SegmentTables {
    /// Unique per instance, so a thread's cache never serves another job's tables.
    id: u64,
    version: AtomicU64,
    current: Mutex<Arc<Tables>>,
}

/// Instance ids of [`SegmentTables`].
static NEXT_ID: AtomicU64 = AtomicU64::new(1);

type Cached = Option<(u64, u64, Arc<Tables>)>;

thread_local! {
    /// (instance id, version, snapshot) of the last lookup on this thread.
    static CACHE: Cell<Cached> = const { Cell::new(None) };
}

/// Drops this thread's cached snapshot (if any) now.
pub(crate) fn forget_cached() {
    let _ = CACHE.try_with(|c| c.take());
}

impl std::fmt::Debug for Tables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Tables")
    }
}

impl std::fmt::Debug for SegmentTables {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SegmentTables")
    }
}

/// A snapshot in use; returns to the thread's cache when dropped.
pub(crate) struct Snapshot {
    tables: Option<Arc<Tables>>,
    id: u64,
    version: u64,
}

impl std::ops::Deref for Snapshot {
    type Target = Tables;
    #[inline]
    fn deref(&self) -> &Tables {
        self.tables
            .as_deref()
            .expect("a snapshot holds tables until dropped")
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if let Some(t) = self.tables.take() {
            let entry = Some((self.id, self.version, t));
            // During thread teardown the cache may be gone: then just drop.
            let _ = CACHE.try_with(|c| c.replace(entry));
        }
    }
}

impl SegmentTables {
    /// Empty tables for a job of `ranks`.
    pub fn new(ranks: u32) -> SegmentTables {
        let empty_rank: Arc<RankTable> = Arc::new((0..ENTRIES).map(|_| None).collect());
        SegmentTables {
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            version: AtomicU64::new(0),
            current: Mutex::new(Arc::new(Tables {
                local: Arc::new((0..ENTRIES).map(|_| None).collect()),
                remote: (0..ranks).map(|_| empty_rank.clone()).collect(),
            })),
        }
    }

    /// The current snapshot.
    #[inline]
    pub fn load(&self) -> Snapshot {
        // Acquire pairs with the Release bump in `update`: a thread that sees
        // the new version also sees the snapshot published before it.
        let version = self.version.load(Ordering::Acquire);
        let cached = CACHE.try_with(|c| c.take()).ok().flatten();
        let tables = match cached {
            Some((id, v, t)) if id == self.id && v == version => t,
            _ => self
                .current
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        };
        Snapshot {
            tables: Some(tables),
            id: self.id,
            version,
        }
    }

    /// Changes the tables: `f` edits a private copy, which is then published.
    /// Writers are serialised; readers are never blocked.
    pub fn update<R>(&self, f: impl FnOnce(&mut TablesMut<'_>) -> R) -> R {
        let mut current = self.current.lock().unwrap_or_else(|e| e.into_inner());
        let mut next = Tables::clone(&current);
        let r = f(&mut TablesMut(&mut next));
        *current = Arc::new(next);
        self.version.fetch_add(1, Ordering::Release);
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
