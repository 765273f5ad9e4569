//! Groups of ranks, and the per-group state that collectives resume from.

use crate::error::{Error, Result};
use crate::types::{Group, Rank};
use std::sync::Mutex;

/// Where a collective of a group stands, so that a call that returned
/// `Timeout` can be resumed by calling it again.
#[derive(Debug, Clone, Default)]
pub(crate) struct BarrierProgress {
    /// Epoch of the last barrier started (0: none yet).
    pub epoch: u32,
    /// Next round of the barrier in progress, `None` when idle.
    pub round: Option<u32>,
}

/// One group.
#[derive(Debug, Clone)]
pub(crate) struct GroupState {
    /// Members, ascending.
    pub members: Vec<Rank>,
    pub committed: bool,
    pub barrier: BarrierProgress,
}

/// All groups of this rank.
#[derive(Debug)]
pub(crate) struct GroupTable {
    pub groups: Mutex<Vec<Option<GroupState>>>,
}

impl GroupTable {
    /// A table with `Group::ALL` committed.
    pub fn new(max: u32, size: u32) -> GroupTable {
        let mut groups: Vec<Option<GroupState>> = (0..max).map(|_| None).collect();
        groups[0] = Some(GroupState {
            members: (0..size).map(Rank).collect(),
            committed: true,
            barrier: BarrierProgress::default(),
        });
        GroupTable {
            groups: Mutex::new(groups),
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
}
