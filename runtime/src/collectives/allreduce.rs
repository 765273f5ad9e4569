//! Allreduce over the system segments: gather to the group's root, reduce
//! in member order, scatter the result.
//!
//! Every member writes its contribution into slot [its position] of the
//! root's (the group's first member's) system segment and notifies the
//! slot's word with the allreduce's epoch; the root waits for every slot,
//! reduces them in member order (so floating-point results are the same on
//! every run and equal to a sequential reduction in that order), writes the
//! result into every member's result slot and notifies its result word with
//! the epoch; members wait for it. Two round trips of latency, no double
//! buffering needed: a member sends epoch e+1 only after it has read the
//! result of epoch e, and the root writes result e+1 only after it has read
//! every contribution e+1.
//!
//! Resumable: the group's state records the epoch and whether this member
//! has sent; a call that timed out continues when called again with the
//! same signature (operation, type, length). A different collective started
//! meanwhile is refused with `CollectiveInProgress`.

use super::barrier::reached;
use crate::base::{allreduce_slot, reduce_offset, reduce_word, Base, SYSTEM_SEG};
use crate::groups::GroupTable;
use crate::groups::Signature;
use crate::model::error::{Error, Result};
use crate::model::ids::{Group, Rank, Timeout};

pub use crate::model::config::{ALLREDUCE_BYTES_MAX, ALLREDUCE_ELEM_MAX};

/// Runs (or resumes) an allreduce of `send` into `recv` (bytes; `count`
/// elements of `elem_size`), reducing with `reduce(acc, other)`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn allreduce(
    base: &Base,
    groups: &GroupTable,
    send: &[u8],
    recv: &mut [u8],
    sig: Signature,
    reduce: &dyn Fn(&mut [u8], &[u8]),
    group: Group,
    timeout: Timeout,
) -> Result<()> {
    if sig.count == 0 {
        return Err(Error::ZeroSize {
            what: "an allreduce",
        });
    }
    let elem_max = base.config.allreduce_elem_max;
    if sig.count > elem_max as usize {
        return Err(Error::TooManyElements {
            what: "an allreduce",
            count: sig.count,
            max: elem_max,
        });
    }
    let bytes = sig.count * sig.elem_size;
    let bytes_max = elem_max as usize * 8;
    if bytes > bytes_max || sig.elem_size == 0 {
        return Err(Error::TooLarge {
            size: bytes as u64,
            max: bytes_max as u64,
        });
    }
    if send.len() != bytes || recv.len() != bytes {
        return Err(Error::LengthMismatch {
            send: send.len() / sig.elem_size.max(1),
            recv: recv.len() / sig.elem_size.max(1),
        });
    }
    let deadline = timeout.deadline();
    let me = base.rank;
    let (members, epoch, sent) = groups.with_committed(group, me, |g| {
        g.check_idle_except(group, "allreduce")?;
        let a = &mut g.allreduce;
        match a.running {
            Some((running, _)) if running != sig => Err(Error::CollectiveInProgress {
                group,
                running: "allreduce",
            }),
            Some((_, sent)) => Ok((g.members.clone(), a.epoch, sent)),
            None => {
                a.epoch = a.epoch.wrapping_add(1).max(1);
                a.running = Some((sig, false));
                Ok((g.members.clone(), a.epoch, false))
            }
        }
    })??;
    let pos = members.binary_search(&me).expect("member checked") as u32;
    // A member already known dead: fail at once, before sending anything.
    let dead = base.peers.collective_failure(&members, &[]);
    let result = if let Some(e) = dead {
        Err(e)
    } else if pos == 0 {
        root(base, &members, send, recv, reduce, group, epoch, deadline)
    } else {
        member(
            base, &members, pos, send, recv, group, epoch, sent, deadline,
        )
    }
    .map_err(|e| super::first_failure(base, &members, e));
    let save = |running: Option<(Signature, bool)>| {
        let _ = groups.with_committed(group, me, |g| g.allreduce.running = running);
    };
    match &result {
        // A member times out only while waiting for the result, after it
        // has sent its contribution.
        Err(Error::Timeout { .. }) => save(Some((sig, pos != 0))),
        _ => save(None),
    }
    result
}

fn system_of(
    base: &Base,
    rank: Rank,
) -> Result<std::sync::Arc<dyn crate::transport::RemoteSegment>> {
    base.peers.peer_ok(rank)?;
    base.ensure_system(rank)?;
    base.tables.load().remote[rank.0 as usize][SYSTEM_SEG]
        .as_ref()
        .map(|e| e.segment().clone())
        .ok_or_else(|| Error::NoTransport {
            rank,
            reason: "its system segment is not reachable from here".into(),
        })
}

/// Waits until words `words` of this rank's system segment reach `epoch`,
/// failing as soon as a member of the group is known dead or one of
/// `needed` is gone (`Peers::collective_failure`).
fn wait_word(
    base: &Base,
    words: &[u32],
    epoch: u32,
    members: &[Rank],
    needed: &[Rank],
    deadline: Option<std::time::Instant>,
) -> Result<()> {
    let area = &base.system.notifications;
    let all = || {
        words
            .iter()
            .all(|&w| reached(area.get(w).unwrap_or(0), epoch))
    };
    let waited = area.wait_until(deadline, || {
        if all() {
            return Some(Ok(()));
        }
        let failed = base.peers.collective_failure(members, needed)?;
        Some(if all() { Ok(()) } else { Err(failed) })
    });
    waited.unwrap_or(Err(Error::Timeout {
        op: "allreduce",
        peer: None,
    }))
}

#[allow(clippy::too_many_arguments)]
fn root(
    base: &Base,
    members: &[Rank],
    send: &[u8],
    recv: &mut [u8],
    reduce: &dyn Fn(&mut [u8], &[u8]),
    group: Group,
    epoch: u32,
    deadline: Option<std::time::Instant>,
) -> Result<()> {
    let (gmax, size) = (base.config.group_max, base.size);
    let slot = allreduce_slot(base.config.allreduce_elem_max);
    let n = members.len() as u32;
    let words: Vec<u32> = (1..n).map(|p| reduce_word(gmax, size, group, p)).collect();
    wait_word(base, &words, epoch, members, &members[1..], deadline)?;
    // Reduce in member order into an 8-byte aligned accumulator.
    let len = send.len();
    let mut acc_words = vec![0u64; len.div_ceil(8)];
    let acc = &mut bytemuck::cast_slice_mut::<u64, u8>(&mut acc_words)[..len];
    acc.copy_from_slice(send);
    for p in 1..n {
        let off = reduce_offset(size, group, p, slot) as usize;
        // SAFETY: the slot lies inside the system segment's data (sized for
        // group_max groups of size + 1 slots of `slot` >= len bytes); member p
        // wrote it before the release store of its word we observed, and
        // writes the next contribution only after it has read our result.
        let other = unsafe { std::slice::from_raw_parts(base.system.data().add(off), len) };
        reduce(acc, other);
    }
    let off = reduce_offset(size, group, size, slot);
    let word = reduce_word(gmax, size, group, size);
    for &m in &members[1..] {
        let sys = system_of(base, m)?;
        sys.put(off, acc.as_ptr(), len, crate::transport::Via::INTERNAL)?;
        sys.notify(word, epoch, crate::transport::Via::INTERNAL)?;
    }
    recv.copy_from_slice(acc);
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn member(
    base: &Base,
    members: &[Rank],
    pos: u32,
    send: &[u8],
    recv: &mut [u8],
    group: Group,
    epoch: u32,
    sent: bool,
    deadline: Option<std::time::Instant>,
) -> Result<()> {
    let (gmax, size) = (base.config.group_max, base.size);
    let slot = allreduce_slot(base.config.allreduce_elem_max);
    let root = members[0];
    if !sent {
        let sys = system_of(base, root)?;
        sys.put(
            reduce_offset(size, group, pos, slot),
            send.as_ptr(),
            send.len(),
            crate::transport::Via::INTERNAL,
        )?;
        sys.notify(
            reduce_word(gmax, size, group, pos),
            epoch,
            crate::transport::Via::INTERNAL,
        )?;
    }
    let word = reduce_word(gmax, size, group, size);
    wait_word(base, &[word], epoch, members, &[root], deadline)?;
    let off = reduce_offset(size, group, size, slot) as usize;
    // SAFETY: the result slot lies inside the system segment's data; the
    // root wrote it before the release store of the word we observed and
    // writes the next result only after our next contribution.
    let result = unsafe { std::slice::from_raw_parts(base.system.data().add(off), recv.len()) };
    recv.copy_from_slice(result);
    Ok(())
}

/// The built-in reductions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReduceOp {
    /// Smallest value (for floats: `f64::min`, which ignores NaN).
    Min,
    /// Largest value (for floats: `f64::max`, which ignores NaN).
    Max,
    /// Sum (integers wrap; floats add in member order).
    Sum,
}

mod sealed {
    pub trait Sealed {}
}

/// Element types of the built-in reductions: i32, u32, f32, f64, i64, u64.
pub trait Reducible: bytemuck::Pod + sealed::Sealed {
    #[doc(hidden)]
    const TYPE_ID: u8;
    /// `acc[i] = op(acc[i], x[i])`.
    fn reduce(op: ReduceOp, acc: &mut [Self], x: &[Self]);
}

macro_rules! int_reducible {
    ($($t:ty = $id:literal),*) => {$(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
            const TYPE_ID: u8 = $id;
            fn reduce(op: ReduceOp, acc: &mut [Self], x: &[Self]) {
                for (a, &b) in acc.iter_mut().zip(x) {
                    *a = match op {
                        ReduceOp::Min => (*a).min(b),
                        ReduceOp::Max => (*a).max(b),
                        ReduceOp::Sum => a.wrapping_add(b),
                    };
                }
            }
        }
    )*};
}
int_reducible!(i32 = 1, u32 = 2, i64 = 3, u64 = 4);

macro_rules! float_reducible {
    ($($t:ty = $id:literal),*) => {$(
        impl sealed::Sealed for $t {}
        impl Reducible for $t {
            const TYPE_ID: u8 = $id;
            fn reduce(op: ReduceOp, acc: &mut [Self], x: &[Self]) {
                for (a, &b) in acc.iter_mut().zip(x) {
                    *a = match op {
                        ReduceOp::Min => a.min(b),
                        ReduceOp::Max => a.max(b),
                        ReduceOp::Sum => *a + b,
                    };
                }
            }
        }
    )*};
}
float_reducible!(f32 = 5, f64 = 6);
