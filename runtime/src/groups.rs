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

use crate::context::{Gaspi, Inner};
use crate::model::error::{Error, Result};
use crate::model::ids::{Group, Rank, Timeout};
use std::collections::HashMap;
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

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
    pub running: Option<(crate::collectives::allreduce::Signature, bool)>,
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
    fn new(members: Vec<Rank>, committed: bool) -> GroupState {
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
    commits: Mutex<HashMap<(u32, u32), u64>>,
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
    fn with_group<R>(
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
fn group_hash(group: Group, members: &[Rank]) -> u64 {
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

impl Gaspi {
    /// Creates an empty, uncommitted group; at most `config.group_max`
    /// groups exist at once, `Group::ALL` included.
    pub fn group_create(&self) -> Result<Group> {
        let mut groups = self
            .inner
            .groups
            .groups
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        let free = groups
            .iter()
            .position(|g| g.is_none())
            .ok_or(Error::NoFreeGroup {
                max: self.inner.config.group_max,
            })?;
        groups[free] = Some(GroupState::new(Vec::new(), false));
        Ok(Group(free as u32))
    }

    /// Adds `rank` to an uncommitted group.
    pub fn group_add(&self, group: Group, rank: Rank) -> Result<()> {
        self.inner.peers.check_rank(rank)?;
        self.inner.groups.with_group(group, |slot| {
            let g = slot.as_mut().expect("checked");
            if g.committed || group == Group::ALL {
                return Err(Error::GroupCommitted { group });
            }
            match g.members.binary_search(&rank) {
                Ok(_) => Err(Error::AlreadyMember { group, rank }),
                Err(at) => {
                    g.members.insert(at, rank);
                    Ok(())
                }
            }
        })
    }

    /// Deletes a group (not `Group::ALL`); its id may be created again.
    pub fn group_delete(&self, group: Group) -> Result<()> {
        if group == Group::ALL {
            return Err(Error::GroupCommitted { group });
        }
        self.inner.groups.with_group(group, |slot| {
            *slot = None;
            Ok(())
        })
    }

    /// Number of members of a group.
    pub fn group_size(&self, group: Group) -> Result<u32> {
        self.group_ranks(group).map(|m| m.len() as u32)
    }

    /// Members of a group, ascending.
    pub fn group_ranks(&self, group: Group) -> Result<Vec<Rank>> {
        self.inner.groups.with_group(group, |slot| {
            Ok(slot.as_ref().expect("checked").members.clone())
        })
    }

    /// Most groups that may exist at once.
    pub fn group_max(&self) -> u32 {
        self.inner.config.group_max
    }

    /// Commits `group`: a collective of its members, which must all call it
    /// with the same member list (refused with `GroupMismatch` otherwise).
    /// After a `Timeout`, calling it again resumes it.
    pub fn group_commit(&self, group: Group, timeout: Timeout) -> Result<()> {
        let inner = &*self.inner;
        let deadline = timeout.deadline();
        let me = inner.rank;
        let (members, hash, send) = inner.groups.with_group(group, |slot| {
            let g = slot.as_mut().expect("checked");
            if g.committed {
                return Err(Error::GroupCommitted { group });
            }
            if g.members.binary_search(&me).is_err() {
                return Err(Error::NotGroupMember { group });
            }
            let send = !g.commit_sent;
            if send {
                clear_words(inner, group);
                g.commit_sent = true;
            }
            Ok((g.members.clone(), group_hash(group, &g.members), send))
        })?;
        if send {
            for &m in members.iter().filter(|&&m| m != me) {
                // Small and sent once per commit (a resumed call does not
                // send again), so it never waits for room: `net/connection.rs`.
                inner.peers.send(
                    m,
                    &crate::net::frame::Message::GroupCommit {
                        group: group.0,
                        hash,
                    },
                )?;
            }
        }
        let waited = wait_hashes(inner, group, &members, hash, deadline);
        let mut commits = inner
            .groups
            .commits
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match waited {
            Err(Error::Timeout { .. }) => Err(Error::Timeout { op: "group_commit" }),
            other => {
                // Done or failed for good: forget the hashes of this round.
                for &m in &members {
                    commits.remove(&(group.0, m.0));
                }
                drop(commits);
                let ok = other.is_ok();
                inner.groups.with_group(group, |slot| {
                    let g = slot.as_mut().expect("checked");
                    g.commit_sent = false;
                    g.committed = ok;
                    Ok(())
                })?;
                other
            }
        }
    }
}

/// Clears this rank's collective words of `group` in its system segment.
fn clear_words(inner: &Inner, group: Group) {
    let area = &inner.system.notifications;
    for w in crate::context::group_words(inner.config.group_max, inner.size, group) {
        let _ = area.reset(w);
    }
}

fn wait_hashes(
    inner: &Inner,
    group: Group,
    members: &[Rank],
    hash: u64,
    deadline: Option<Instant>,
) -> Result<()> {
    let table = &inner.groups;
    let mut commits = table.commits.lock().unwrap_or_else(|e| e.into_inner());
    loop {
        let mut missing = false;
        for &m in members.iter().filter(|&&m| m != inner.rank) {
            match commits.get(&(group.0, m.0)) {
                Some(&h) if h != hash => return Err(Error::GroupMismatch { group, rank: m }),
                Some(_) => {}
                None => {
                    inner.peers.peer_ok(m)?;
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
