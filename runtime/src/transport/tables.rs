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
//! A lookup must not write much either: on a 4 KiB `write` the copy's
//! stores fill the store buffer, and every store of ours queues behind
//! them. So the cache is not taken out and put back per call; a call
//! borrows it and counts itself in a per-thread depth, and the cached
//! snapshot is replaced only when no call of this thread is using it. What
//! a hit reads (instance, version, address) sits in a thread-local of plain
//! data without a destructor, so the check is two loads relative to the
//! thread pointer; the `Arc` that owns the snapshot sits in another one,
//! touched only on a miss. The short path of a put does not even count
//! itself ([`SegmentTables::peek`]): it calls nothing that could replace
//! the snapshot, so it borrows without a store. Inlined into the caller,
//! that took the 4 KiB write from 101 to 130 GB/s and the 8-byte ping-pong
//! from 0.156 to 0.136 us on the development VM.
//! Remote entries also carry, read once at attach, what the short path of
//! a put needs (sizes, the host mapping), so it makes no virtual call.
//!
//! A snapshot keeps the segments it points to alive, so a reader never sees
//! memory freed under it. The price: a deleted segment's memory is freed only
//! once every thread that used the tables has made another call (or ended).
//!
//! The tables live beside the seam, not in `segments/`: a remote entry is
//! what a transport's `attach` returned, with its capabilities read once.

use super::{HostDirect, RemoteSegment};
use crate::model::bounds::check_bounds;
use crate::model::error::{Error, Result, Side};
use crate::model::ids::{NotifyId, Rank, SegId};
use crate::segments::LocalSegment;
use gaspi_notify::NotificationArea;
use std::cell::{Cell, UnsafeCell};
use std::marker::PhantomData;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Entries per table: every `u8` segment id, the system segment at 255.
pub(crate) const ENTRIES: usize = 256;

/// The segments one rank registered with this one, by id.
pub(crate) type RankTable = Vec<Option<RemoteEntry>>;

/// A remote segment in the tables, with what the short path of a put reads
/// of it copied out at attach (it derefs to the segment for everything else).
#[derive(Clone)]
pub(crate) struct RemoteEntry {
    segment: Arc<dyn RemoteSegment>,
    /// [`RemoteSegment::size`].
    pub size: u64,
    /// [`RemoteSegment::notification_count`].
    pub notification_count: u32,
    /// [`RemoteSegment::host_direct`], as pointers into `segment`.
    host: Option<(NonNull<u8>, NonNull<NotificationArea>)>,
}

// SAFETY: the pointers point into the segment that `segment` keeps alive
// (its mapping and its NotificationArea); the segment is Send + Sync, the
// area is only accessed through atomics, and the data only through copies
// whose bounds the callers check, as for the segment itself.
unsafe impl Send for RemoteEntry {}
// SAFETY: as for Send.
unsafe impl Sync for RemoteEntry {}

impl RemoteEntry {
    fn new(segment: Arc<dyn RemoteSegment>) -> RemoteEntry {
        let host = segment
            .host_direct()
            .and_then(|h| Some((NonNull::new(h.data)?, NonNull::from(h.notifications))));
        RemoteEntry {
            size: segment.size(),
            notification_count: segment.notification_count(),
            host,
            segment,
        }
    }

    /// The segment as host memory mapped here (see [`HostDirect`]).
    #[inline]
    pub fn host(&self) -> Option<HostDirect<'_>> {
        self.host.map(|(data, area)| HostDirect {
            data: data.as_ptr(),
            // SAFETY: the area lives inside `self.segment`, which outlives
            // the returned borrow of self.
            notifications: unsafe { area.as_ref() },
        })
    }

    /// The segment itself, shared.
    pub fn segment(&self) -> &Arc<dyn RemoteSegment> {
        &self.segment
    }
}

impl std::ops::Deref for RemoteEntry {
    type Target = dyn RemoteSegment;

    fn deref(&self) -> &(dyn RemoteSegment + 'static) {
        &*self.segment
    }
}

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

/// What a cache hit needs: which instance and version the thread's cached
/// snapshot is of, and where it is. Plain `Copy` data in a thread-local
/// without a destructor, so reading it is a load relative to the thread
/// pointer, with no "initialised / destroyed" state to check.
#[derive(Clone, Copy)]
struct Hot {
    id: u64,
    version: u64,
    tables: *const Tables,
}

impl Hot {
    /// Matches no instance: ids start at 1.
    const EMPTY: Hot = Hot {
        id: 0,
        version: 0,
        tables: std::ptr::null(),
    };
}

/// Owns the snapshot that [`HOT`] points to. Replaced only while [`DEPTH`]
/// is 0, so the tables it holds outlive every [`Snapshot`] taken from it.
struct Slot(UnsafeCell<Option<Arc<Tables>>>);

impl Drop for Slot {
    fn drop(&mut self) {
        // The thread is ending and the snapshot goes with this slot: nothing
        // may find it through HOT any more (HOT has no destructor, so it
        // stays readable by later thread-local destructors).
        HOT.with(|h| h.set(Hot::EMPTY));
    }
}

thread_local! {
    static HOT: Cell<Hot> = const { Cell::new(Hot::EMPTY) };
    /// Snapshots of this thread borrowed from [`SLOT`] and not yet dropped.
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    static SLOT: Slot = const { Slot(UnsafeCell::new(None)) };
}

/// Drops this thread's cached snapshot (if any and not in use) now.
pub(crate) fn forget_cached() {
    if DEPTH.with(Cell::get) == 0 {
        HOT.with(|h| h.set(Hot::EMPTY));
        // SAFETY: only this thread accesses its slot, and with depth 0 no
        // Snapshot points into it; HOT no longer does either.
        let old = SLOT.try_with(|s| unsafe { (*s.0.get()).take() });
        drop(old);
    }
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

/// A snapshot in use: borrowed from the thread's cache (most calls) or,
/// when the cache cannot serve it, owned.
pub(crate) struct Snapshot {
    tables: NonNull<Tables>,
    /// Set when the snapshot is not the cache's (then it keeps it alive).
    owned: Option<Arc<Tables>>,
    /// Borrowed snapshots give back their count on the thread that took
    /// them: not Send.
    _thread: PhantomData<*const ()>,
}

impl std::ops::Deref for Snapshot {
    type Target = Tables;
    #[inline]
    fn deref(&self) -> &Tables {
        // SAFETY: either `owned` holds these tables, or the thread's cache
        // does and does not replace them while our count is in its depth.
        unsafe { self.tables.as_ref() }
    }
}

impl Drop for Snapshot {
    #[inline(always)]
    fn drop(&mut self) {
        if self.owned.is_none() {
            DEPTH.with(|d| d.set(d.get() - 1));
        }
    }
}

impl SegmentTables {
    /// Empty tables for a job of `ranks` ranks.
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

    fn current(&self) -> Arc<Tables> {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The thread's cached snapshot, if it is of this instance and current.
    #[inline(always)]
    fn hit(&self) -> Option<NonNull<Tables>> {
        let version = self.version.load(Ordering::Acquire);
        let hot = HOT.with(Cell::get);
        if hot.id == self.id && hot.version == version {
            NonNull::new(hot.tables.cast_mut())
        } else {
            None
        }
    }

    /// The current tables: the thread's cached snapshot while the version
    /// has not moved (one load, no shared write), else a fresh one.
    #[inline(always)]
    pub fn load(&self) -> Snapshot {
        match self.hit() {
            Some(tables) => {
                DEPTH.with(|d| d.set(d.get() + 1));
                Snapshot {
                    tables,
                    owned: None,
                    _thread: PhantomData,
                }
            }
            None => self.load_slow(),
        }
    }

    /// [`Self::load`] when the cache misses: refill it if no snapshot of
    /// this thread borrows it, else hand out an owned snapshot.
    #[cold]
    #[inline(never)]
    fn load_slow(&self) -> Snapshot {
        let version = self.version.load(Ordering::Acquire);
        if DEPTH.with(Cell::get) == 0 {
            let tables = self.current();
            let at = NonNull::from(&*tables);
            // SAFETY: only this thread accesses its slot; with depth 0 no
            // Snapshot points into it, and HOT is repointed right after.
            let old = SLOT.try_with(|s| unsafe { (*s.0.get()).replace(tables) });
            if let Ok(old) = old {
                HOT.with(|h| {
                    h.set(Hot {
                        id: self.id,
                        version,
                        tables: at.as_ptr(),
                    })
                });
                DEPTH.with(|d| d.set(1));
                // Dropped last: its segments' destructors may load tables.
                drop(old);
                return Snapshot {
                    tables: at,
                    owned: None,
                    _thread: PhantomData,
                };
            }
        }
        let owned = self.current();
        Snapshot {
            tables: NonNull::from(&*owned),
            owned: Some(owned),
            _thread: PhantomData,
        }
    }

    /// The thread's cached snapshot, without counting a borrow: for the
    /// short path of a request, which then stores nothing but the
    /// request's own bytes. `None` when the cache misses (the caller takes
    /// its general path, whose [`Self::load`] refills the cache).
    ///
    /// # Safety
    /// While the returned reference is in use, this thread must not call
    /// [`Self::load`] (of any instance) or [`forget_cached`], directly or
    /// through anything it calls: a load at depth 0 may replace the cached
    /// snapshot and free the tables the reference points to.
    #[inline(always)]
    pub unsafe fn peek(&self) -> Option<&Tables> {
        // SAFETY: HOT points into the snapshot that SLOT owns; SLOT is
        // replaced only by load_slow or forget_cached (which the caller
        // does not call meanwhile) and cleared HOT when it was dropped.
        self.hit().map(|t| unsafe { t.as_ref() })
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
        Arc::make_mut(&mut self.0.remote[rank])[seg] = s.map(RemoteEntry::new);
    }
}

/// Looks up a remote segment in a table snapshot and checks a byte range.
pub(crate) fn lookup_remote(
    tables: &Tables,
    rank: Rank,
    seg: SegId,
    offset: u64,
    size: u64,
    max: u32,
) -> Result<&dyn RemoteSegment> {
    if seg.0 as u32 >= max {
        return Err(Error::SegmentIdOutOfRange { seg, max });
    }
    let r = tables.remote[rank.0 as usize][seg.0 as usize]
        .as_ref()
        .ok_or(Error::UnknownSegment { rank, seg })?;
    check_bounds(Side::Remote, rank, seg, offset, size, r.size)?;
    Ok(&**r)
}

pub(crate) fn check_notification(
    r: &dyn RemoteSegment,
    rank: Rank,
    seg: SegId,
    id: NotifyId,
    value: u32,
) -> Result<()> {
    if id.0 >= r.notification_count() {
        return Err(Error::NotifyIdOutOfRange {
            rank,
            seg,
            id,
            num: 1,
            count: r.notification_count(),
        });
    }
    if value == 0 {
        return Err(Error::NotifyValueZero);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(t: &Snapshot) -> *const Tables {
        &**t
    }

    #[test]
    fn a_nested_load_never_replaces_the_snapshot_in_use() {
        let t = SegmentTables::new(2);
        let outer = t.load();
        assert!(outer.owned.is_none(), "the first load fills the cache");
        let outer_at = addr(&outer);
        t.update(|m| m.set_remote(1, 3, None));
        {
            // The version moved while `outer` borrows the cache: the nested
            // load must not replace it, so it gets its own, fresh snapshot.
            let nested = t.load();
            assert!(nested.owned.is_some());
            assert_ne!(addr(&nested), outer_at);
        }
        assert_eq!(addr(&outer), outer_at);
        assert_eq!(outer.remote.len(), 2);
        drop(outer);
        // Nobody uses the cache now: it is refreshed and lent out again,
        // also to nested loads of the same version.
        let again = t.load();
        assert!(again.owned.is_none());
        assert_ne!(addr(&again), outer_at);
        let nested = t.load();
        assert!(nested.owned.is_none());
        assert_eq!(addr(&nested), addr(&again));
    }

    #[test]
    fn peek_sees_only_the_current_snapshot_of_its_own_instance() {
        let t = SegmentTables::new(2);
        let other = SegmentTables::new(2);
        let peeked = |t: &SegmentTables| {
            // SAFETY: the reference is turned into an address at once,
            // before anything loads the tables again.
            unsafe { t.peek() }.map(|x| x as *const Tables)
        };
        assert_eq!(peeked(&t), None, "nothing of this instance cached yet");
        let s = t.load();
        assert_eq!(peeked(&t), Some(addr(&s)));
        assert_eq!(peeked(&other), None, "another instance's cache is not ours");
        drop(s);
        t.update(|m| m.set_remote(1, 3, None));
        assert_eq!(peeked(&t), None, "a moved version misses");
        let s = t.load();
        assert_eq!(peeked(&t), Some(addr(&s)));
        drop(s);
        forget_cached();
        assert_eq!(peeked(&t), None, "a forgotten cache misses");
    }

    #[test]
    fn another_instance_is_never_served_from_the_cache() {
        let a = SegmentTables::new(1);
        let b = SegmentTables::new(3);
        assert_eq!(a.load().remote.len(), 1);
        let sb = b.load();
        assert_eq!(sb.remote.len(), 3);
        // `a` while `b`'s snapshot borrows the cache: owned.
        let sa = a.load();
        assert!(sa.owned.is_some());
        assert_eq!(sa.remote.len(), 1);
    }
}
