//! Dissemination barrier over the system segments.
//!
//! With `n` members, round `k` (of `ceil(log2 n)`) has member `p` signal
//! member `p + 2^k` and wait for member `p - 2^k` (mod n). The signal is the
//! barrier's epoch stored into word `64 * group + k` of the partner's system
//! segment; a waiter accepts any value not older than its epoch (wrapping
//! comparison), so a fast partner that already signals the next barrier
//! still releases this one. Only one rank ever writes a given word, so
//! stores never race.

use crate::base::{Base, SYSTEM_SEG};
use crate::groups::GroupTable;
use crate::model::error::{Error, Result};
use crate::model::ids::{Group, Rank, Timeout};

/// True when `seen` is epoch `want` or a later one.
pub(crate) fn reached(seen: u32, want: u32) -> bool {
    seen != 0 && (seen.wrapping_sub(want) as i32) >= 0
}

/// Runs (or resumes) a barrier on `group`.
pub(crate) fn barrier(
    base: &Base,
    groups: &GroupTable,
    group: Group,
    timeout: Timeout,
) -> Result<()> {
    let deadline = timeout.deadline();
    let me = base.rank;
    let (members, epoch, start) = groups.with_committed(group, me, |g| {
        g.check_idle_except(group, "barrier")?;
        let b = &mut g.barrier;
        if b.round.is_none() {
            b.epoch = b.epoch.wrapping_add(1).max(1);
            b.round = Some(0);
        }
        Ok::<_, Error>((g.members.clone(), b.epoch, b.round.unwrap_or(0)))
    })??;
    // A member already known dead: fail at once, before signalling.
    if let Some(e) = base.peers.collective_failure(&members, &[]) {
        save(base, groups, group, None);
        return Err(e);
    }
    let n = members.len();
    let pos = members.binary_search(&me).expect("member checked");
    let rounds = usize::BITS - (n.max(1) - 1).leading_zeros();
    let result = (|| {
        for k in start..rounds {
            let dist = 1usize << k;
            let to = members[(pos + dist) % n];
            let from = members[(pos + n - dist % n) % n];
            let word = group.0 * 64 + k;
            signal(base, to, word, epoch)?;
            let waited = base.system.notifications.wait_until(deadline, || {
                let seen = base.system.notifications.get(word).unwrap_or(0);
                if reached(seen, epoch) {
                    return Some(Ok(()));
                }
                // Every survivor's connection sees a death, so checking all
                // members ends the barrier everywhere, not only next to it.
                // A member that terminated in order may simply have left
                // this barrier before us (it had everyone's signals); only
                // the partner we wait for must not have terminated.
                let failed = base.peers.collective_failure(&members, &[from])?;
                // A partner may have signalled and then terminated between
                // the two checks: its signal counts.
                let seen = base.system.notifications.get(word).unwrap_or(0);
                Some(if reached(seen, epoch) {
                    Ok(())
                } else {
                    Err(failed)
                })
            });
            match waited {
                Some(Ok(())) => save(base, groups, group, Some(k + 1)),
                Some(Err(e)) => return Err(e),
                None => {
                    save(base, groups, group, Some(k));
                    return Err(Error::Timeout {
                        op: "barrier",
                        peer: None,
                    });
                }
            }
        }
        Ok(())
    })()
    .map_err(|e| super::first_failure(base, &members, e));
    match &result {
        Err(Error::Timeout { .. }) => {}
        // Done, or failed for good: the next barrier starts afresh.
        _ => save(base, groups, group, None),
    }
    result
}

fn save(base: &Base, groups: &GroupTable, group: Group, round: Option<u32>) {
    let _ = groups.with_committed(group, base.rank, |g| g.barrier.round = round);
}

fn signal(base: &Base, to: Rank, word: u32, epoch: u32) -> Result<()> {
    match base.peers.peer_ok(to) {
        Ok(()) => {}
        // A partner that terminated in order had left this barrier, so it
        // had our signal already (this is a resumed round): nothing to send.
        Err(Error::PeerTerminated { .. }) => return Ok(()),
        Err(e) => return Err(e),
    }
    base.ensure_system(to)?;
    let tables = base.tables.load();
    let seg = tables.remote[to.0 as usize][SYSTEM_SEG]
        .as_ref()
        .ok_or_else(|| Error::NoTransport {
            rank: to,
            reason: "its system segment is not reachable from here".into(),
        })?;
    seg.notify(word, epoch, crate::transport::Via::INTERNAL)
}

#[cfg(test)]
mod tests {
    use super::reached;

    #[test]
    fn epochs_compare_with_wraparound() {
        assert!(reached(5, 5));
        assert!(reached(6, 5));
        assert!(!reached(4, 5));
        assert!(!reached(0, 5));
        assert!(reached(1, u32::MAX));
    }
}
