//! Groups: the calls. A group is built locally and committed by all its
//! members together (see `groups.rs`, which owns the table and the
//! commit's hash exchange).

use crate::context::Gaspi;
use crate::groups::{clear_words, group_hash, wait_hashes, GroupState};
use crate::model::error::{Error, Result};
use crate::model::ids::{Group, Rank, Timeout};

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
                max: self.inner.base.config.group_max,
            })?;
        groups[free] = Some(GroupState::new(Vec::new(), false));
        Ok(Group(free as u32))
    }

    /// Adds `rank` to an uncommitted group.
    pub fn group_add(&self, group: Group, rank: Rank) -> Result<()> {
        self.inner.base.peers.check_rank(rank)?;
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
        self.inner.base.config.group_max
    }

    /// Commits `group`: a collective of its members, which must all call it
    /// with the same member list (refused with `GroupMismatch` otherwise).
    /// After a `Timeout`, calling it again resumes it.
    pub fn group_commit(&self, group: Group, timeout: Timeout) -> Result<()> {
        let inner = &*self.inner;
        let deadline = timeout.deadline();
        let me = inner.base.rank;
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
                clear_words(&inner.base, group);
                g.commit_sent = true;
            }
            Ok((g.members.clone(), group_hash(group, &g.members), send))
        })?;
        if send {
            for &m in members.iter().filter(|&&m| m != me) {
                // Small and sent once per commit (a resumed call does not
                // send again), so it never waits for room: `net/connection.rs`.
                inner.base.peers.send(
                    m,
                    &crate::net::frame::Message::GroupCommit {
                        group: group.0,
                        hash,
                    },
                )?;
            }
        }
        let waited = wait_hashes(&inner.base, &inner.groups, group, &members, hash, deadline);
        let mut commits = inner
            .groups
            .commits
            .lock()
            .unwrap_or_else(|e| e.into_inner());
        match waited {
            Err(Error::Timeout { .. }) => Err(Error::Timeout {
                op: "group_commit",
                peer: None,
            }),
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
