//! Groups of ranks, and the per-group state that collectives resume from.
//!
//! A group is built locally (`group_create`, `group_add`) and then
//! committed by all its members together (`group_commit`). Committing is
//! where members find out whether they agree: each member sends every other
//! member a hash of (group id, member list) over the control connections
//! and waits for theirs; a different hash is an error naming that member.
//! Before sending, a member clears the group's collective words in its own
//! system segment (a group id may be reused after `group_delete`, and old
//! epochs must not release new barriers); since every member waits for
//! every other member's hash, nobody can signal a collective of the new
//! group into a member that has not cleared yet.

use crate::base::Base;
use crate::model::error::{Error, Result};
use crate::model::ids::{Group, Rank};
use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// What identifies an allreduce call for resumption: operation, element
/// type, element size, element count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Signature {
    pub op: u8,
    pub ty: u8,
    pub elem_size: usize,
    pub count: usize,
}

/// Where a collective of a group stands, so that a call that returned
/// `Timeout` can be resumed by calling it again.
#[derive(Debug, Clone, Default)]
pub(crate) struct BarrierProgress {
    /// Epoch of the last barrier started (0: none yet).
    pub epoch: u32,
    /// Next round of the barrier in progress, `None` when idle.
    pub round: Option<u32>,
}

/// Where an allreduce of a group stands (see `collectives/allreduce.rs`).
#[derive(Debug, Clone, Default)]
pub(crate) struct AllreduceProgress {
    /// Epoch of the last allreduce started (0: none yet).
    pub epoch: u32,
    /// The call in progress: its signature and whether this member's
    /// contribution is sent; `None` when idle.
    pub running: Option<(Signature, bool)>,
}

/// One group.
#[derive(Debug, Clone)]
pub(crate) struct GroupState {
    /// Members, ascending.
    pub members: Vec<Rank>,
    pub committed: bool,
    /// A commit in progress has sent this rank's hash to the members.
    pub commit_sent: bool,
    pub barrier: BarrierProgress,
    pub allreduce: AllreduceProgress,
}

impl GroupState {
    pub fn new(members: Vec<Rank>, committed: bool) -> GroupState {
        GroupState {
            members,
            committed,
            commit_sent: false,
            barrier: BarrierProgress::default(),
            allreduce: AllreduceProgress::default(),
        }
    }

    /// Fails when a collective other than `me` is unfinished on the group.
    pub fn check_idle_except(&self, group: Group, me: &'static str) -> Result<()> {
        let running = if self.barrier.round.is_some() {
            "barrier"
        } else if self.allreduce.running.is_some() {
            "allreduce"
        } else {
            return Ok(());
        };
        if running == me {
            return Ok(());
        }
        Err(Error::CollectiveInProgress { group, running })
    }
}

/// All groups of this rank.
#[derive(Debug)]
pub(crate) struct GroupTable {
    pub groups: Mutex<Vec<Option<GroupState>>>,
    /// Commit hashes received: (group, from) -> hash.
    pub(crate) commits: Mutex<HashMap<(u32, u32), u64>>,
    commit_cv: Condvar,
}

impl GroupTable {
    /// A table with `Group::ALL` committed.
    pub fn new(max: u32, size: u32) -> GroupTable {
        let mut groups: Vec<Option<GroupState>> = (0..max).map(|_| None).collect();
        groups[0] = Some(GroupState::new((0..size).map(Rank).collect(), true));
        GroupTable {
            groups: Mutex::new(groups),
            commits: Mutex::new(HashMap::new()),
            commit_cv: Condvar::new(),
        }
    }

    /// Runs `f` on a committed group that contains `me`.
    pub fn with_committed<R>(
        &self,
        group: Group,
        me: Rank,
        f: impl FnOnce(&mut GroupState) -> R,
    ) -> Result<R> {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        let g = groups
            .get_mut(group.0 as usize)
            .and_then(|g| g.as_mut())
            .filter(|g| g.committed)
            .ok_or(Error::BadGroup { group })?;
        if g.members.binary_search(&me).is_err() {
            return Err(Error::NotGroupMember { group });
        }
        Ok(f(g))
    }

    /// Runs `f` on an existing group, committed or not.
    pub fn with_group<R>(
        &self,
        group: Group,
        f: impl FnOnce(&mut Option<GroupState>) -> Result<R>,
    ) -> Result<R> {
        let mut groups = self.groups.lock().unwrap_or_else(|e| e.into_inner());
        let slot = groups
            .get_mut(group.0 as usize)
            .filter(|g| g.is_some())
            .ok_or(Error::BadGroup { group })?;
        f(slot)
    }

    /// Records a member's commit hash (progress engine).
    pub fn commit_received(&self, group: u32, from: Rank, hash: u64) {
        self.commits
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert((group, from.0), hash);
        self.commit_cv.notify_all();
    }

    /// Wakes commit waiters (a peer's health changed).
    pub fn wake(&self) {
        let _g = self.commits.lock().unwrap_or_else(|e| e.into_inner());
        self.commit_cv.notify_all();
    }
}

/// Hash of a group's identity, the same on every member that agrees.
pub(crate) fn group_hash(group: Group, members: &[Rank]) -> u64 {
    // FNV-1a over the id and the ranks.
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for v in std::iter::once(group.0).chain(members.iter().map(|r| r.0)) {
        for b in v.to_le_bytes() {
            h ^= b as u64;
            h = h.wrapping_mul(0x100_0000_01b3);
        }
    }
    h
}

/// Clears this rank's collective words of `group` in its system segment.
pub(crate) fn clear_words(base: &Base, group: Group) {
    let area = &base.system.notifications;
    for w in crate::base::group_words(base.config.group_max, base.size, group) {
        let _ = area.reset(w);
    }
}

pub(crate) fn wait_hashes(
    base: &Base,
    table: &GroupTable,
    group: Group,
    members: &[Rank],
    hash: u64,
    deadline: Option<Instant>,
) -> Result<()> {
    let mut commits = table.commits.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let mut missing = false;
        for &m in members.iter().filter(|&&m| m != base.rank) {
            match commits.get(&(group.0, m.0)) {
                Some(&h) if h != hash => return Err(Error::GroupMismatch { group, rank: m }),
                Some(_) => {}
                None => {
                    base.peers.peer_ok(m)?;
                    missing = true;
                }
            }
        }
        if !missing {
            return Ok(());
        }
        let nap = crate::model::error::nap(deadline, Duration::from_millis(50), "group_commit")?;
        commits = table
            .commit_cv
            .wait_timeout(commits, nap)
            .unwrap_or_else(|e| e.into_inner())
            .0;
    }
}
