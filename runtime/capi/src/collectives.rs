//! Groups, barrier, allreduce and allreduce with a C reduction.

use crate::types::*;
use crate::{call, non_null, put, timeout_of, Code, Ret, Runtime};
use gaspi::{Group, Rank, ReduceOp, Reducible};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::{Mutex, PoisonError};

fn group(g: gaspi_group_t) -> Group {
    Group(g.into())
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_group_create(g: *mut gaspi_group_t) -> gaspi_return_t {
    call("gaspi_group_create", |rt| {
        non_null(g)?;
        let created = rt.gaspi.group_create()?;
        put(g, created.0 as gaspi_group_t)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_group_delete(g: gaspi_group_t) -> gaspi_return_t {
    call("gaspi_group_delete", |rt| {
        rt.gaspi.group_delete(group(g))?;
        // An allreduce it left unfinished ends with it.
        unfinished().retain(|u| u.group != g);
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn gaspi_group_add(g: gaspi_group_t, rank: gaspi_rank_t) -> gaspi_return_t {
    call("gaspi_group_add", |rt| {
        Ok(rt.gaspi.group_add(group(g), Rank(rank.into()))?)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_group_commit(
    g: gaspi_group_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_group_commit", |rt| {
        // GASPI_GROUP_ALL is committed at init; committing it again
        // succeeds, as in GPI-2.
        if g == GASPI_GROUP_ALL {
            return Ok(());
        }
        Ok(rt.gaspi.group_commit(group(g), timeout_of(timeout_ms))?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_group_num(group_num: *mut gaspi_number_t) -> gaspi_return_t {
    call("gaspi_group_num", |rt| {
        let n = (0..rt.gaspi.group_max())
            .filter(|&g| rt.gaspi.group_size(Group(g)).is_ok())
            .count();
        put(group_num, n as gaspi_number_t)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_group_size(
    g: gaspi_group_t,
    group_size: *mut gaspi_number_t,
) -> gaspi_return_t {
    call("gaspi_group_size", |rt| {
        non_null(group_size)?;
        put(group_size, rt.gaspi.group_size(group(g))?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_group_ranks(
    g: gaspi_group_t,
    group_ranks: *mut gaspi_rank_t,
) -> gaspi_return_t {
    call("gaspi_group_ranks", |rt| {
        non_null(group_ranks)?;
        for (i, r) in rt.gaspi.group_ranks(group(g))?.iter().enumerate() {
            // SAFETY: the caller's array holds gaspi_group_size entries
            // (GASPI.h), which is the number of members written here.
            put(unsafe { group_ranks.add(i) }, r.0 as gaspi_rank_t)?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_group_max(group_max: *mut gaspi_number_t) -> gaspi_return_t {
    call("gaspi_group_max", |rt| put(group_max, rt.gaspi.group_max()))
}

#[no_mangle]
pub extern "C" fn gaspi_barrier(g: gaspi_group_t, timeout_ms: gaspi_timeout_t) -> gaspi_return_t {
    call("gaspi_barrier", |rt| {
        Ok(rt.gaspi.barrier(group(g), timeout_of(timeout_ms))?)
    })
}

/// What identifies an allreduce call for resumption: typed (operation,
/// datatype) or user-defined (element size), and the element count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Signature {
    Typed {
        op: gaspi_operation_t,
        ty: gaspi_datatype_t,
        num: gaspi_number_t,
    },
    User {
        elem_size: gaspi_size_t,
        num: gaspi_number_t,
    },
}

/// An allreduce of a group whose piece `next` timed out: repeating the
/// same call resumes there.
struct Unfinished {
    group: gaspi_group_t,
    call: Signature,
    next: usize,
}

/// The unfinished allreduces, at most one per group.
static UNFINISHED: Mutex<Vec<Unfinished>> = Mutex::new(Vec::new());

fn unfinished() -> std::sync::MutexGuard<'static, Vec<Unfinished>> {
    UNFINISHED.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Runs an allreduce of `pieces` consecutive pieces, `piece(i)` running
/// piece `i` as one allreduce of the runtime (whose single allreduce takes
/// at most `ALLREDUCE_ELEM_LIMIT` elements, fewer than a configured
/// `allreduce_elem_max` may allow). Every member runs the same pieces in
/// the same order. A piece that times out is remembered: the same call
/// repeated resumes at that piece (the runtime resumes the piece itself);
/// another allreduce of the group meanwhile gets `GASPI_ERR_ACTIVE_COLL`.
fn in_pieces(
    g: gaspi_group_t,
    call: Signature,
    pieces: usize,
    mut piece: impl FnMut(usize) -> Ret,
) -> Ret {
    let first = match unfinished().iter().find(|u| u.group == g) {
        Some(u) if u.call == call => u.next,
        Some(_) => return Err(Code(GASPI_ERR_ACTIVE_COLL)),
        None => 0,
    };
    for i in first..pieces {
        if let Err(code) = piece(i) {
            let mut u = unfinished();
            u.retain(|u| u.group != g);
            if code == Code(GASPI_TIMEOUT) {
                u.push(Unfinished {
                    group: g,
                    call,
                    next: i,
                });
            }
            return Err(code);
        }
    }
    if first > 0 {
        unfinished().retain(|u| u.group != g);
    }
    Ok(())
}

/// `gaspi_allreduce` over elements of type `T`: copies in (the C buffers
/// need not be aligned for `T`), reduces, copies out. Up to the default
/// `ALLREDUCE_ELEM_MAX` (2 KiB of 8-byte elements) the copies live on the
/// stack: no allocation per call; larger pieces (a configured
/// `allreduce_elem_max`) on the heap.
fn allreduce_as<T: Reducible>(
    rt: &Runtime,
    send: *const c_void,
    recv: *mut c_void,
    num: usize,
    op: ReduceOp,
    g: Group,
    timeout: gaspi_timeout_t,
) -> Ret {
    let send = send as *const T;
    let recv = recv as *mut T;
    let mut on_stack = [[T::zeroed(); gaspi::ALLREDUCE_ELEM_MAX]; 2];
    let mut on_heap = Vec::new();
    let (input, output) = if num <= gaspi::ALLREDUCE_ELEM_MAX {
        let [input, output] = &mut on_stack;
        (&mut input[..num], &mut output[..num])
    } else {
        on_heap.resize(2 * num, T::zeroed());
        on_heap.split_at_mut(num)
    };
    for (i, x) in input.iter_mut().enumerate() {
        // SAFETY: buffer_send holds `num` elements of the datatype
        // (GASPI.h's contract), is not null (checked by the caller), and
        // read_unaligned asks no alignment.
        *x = unsafe { send.add(i).read_unaligned() };
    }
    rt.gaspi
        .allreduce(input, output, op, g, timeout_of(timeout))?;
    for (i, v) in output.iter().enumerate() {
        // SAFETY: buffer_receive holds `num` elements (GASPI.h), is not
        // null (checked by the caller); write_unaligned asks no alignment.
        unsafe { recv.add(i).write_unaligned(*v) };
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_allreduce(
    buffer_send: gaspi_pointer_t,
    buffer_receive: gaspi_pointer_t,
    num: gaspi_number_t,
    operation: gaspi_operation_t,
    datatype: gaspi_datatype_t,
    g: gaspi_group_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_allreduce", |rt| {
        non_null(buffer_send)?;
        non_null(buffer_receive)?;
        if num == 0 || num > rt.allreduce_elem_max {
            return Err(Code(GASPI_ERR_INV_NUM));
        }
        let op = match operation {
            GASPI_OP_MIN => ReduceOp::Min,
            GASPI_OP_MAX => ReduceOp::Max,
            GASPI_OP_SUM => ReduceOp::Sum,
            _ => return Err(Code(GASPI_ERROR)),
        };
        let size = match datatype {
            GASPI_TYPE_INT | GASPI_TYPE_UINT | GASPI_TYPE_FLOAT => 4,
            GASPI_TYPE_DOUBLE | GASPI_TYPE_LONG | GASPI_TYPE_ULONG => 8,
            _ => return Err(Code(GASPI_ERROR)),
        };
        let call = Signature::Typed {
            op: operation,
            ty: datatype,
            num,
        };
        let per = rt.gaspi.config().allreduce_elem_max as usize;
        let num = num as usize;
        in_pieces(g, call, num.div_ceil(per), |i| {
            let (first, n) = (i * per, per.min(num - i * per));
            // SAFETY: both buffers hold `num` elements of the datatype
            // (GASPI.h's contract) and first + n <= num.
            let (s, r) = unsafe {
                (
                    (buffer_send as *const u8).add(first * size) as *const c_void,
                    (buffer_receive as *mut u8).add(first * size) as *mut c_void,
                )
            };
            let (g, t) = (group(g), timeout_ms);
            match datatype {
                GASPI_TYPE_INT => allreduce_as::<i32>(rt, s, r, n, op, g, t),
                GASPI_TYPE_UINT => allreduce_as::<u32>(rt, s, r, n, op, g, t),
                GASPI_TYPE_FLOAT => allreduce_as::<f32>(rt, s, r, n, op, g, t),
                GASPI_TYPE_DOUBLE => allreduce_as::<f64>(rt, s, r, n, op, g, t),
                GASPI_TYPE_LONG => allreduce_as::<i64>(rt, s, r, n, op, g, t),
                _ => allreduce_as::<u64>(rt, s, r, n, op, g, t),
            }
        })
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_allreduce_user(
    buffer_send: gaspi_pointer_t,
    buffer_receive: gaspi_pointer_t,
    num: gaspi_number_t,
    element_size: gaspi_size_t,
    reduce_operation: gaspi_reduce_operation_t,
    reduce_state: gaspi_reduce_state_t,
    g: gaspi_group_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_allreduce_user", |rt| {
        non_null(buffer_send)?;
        non_null(buffer_receive)?;
        let reduce_fn = reduce_operation.ok_or(Code(GASPI_ERR_NULLPTR))?;
        if num == 0 || num > rt.allreduce_elem_max {
            return Err(Code(GASPI_ERR_INV_NUM));
        }
        // As GPI-2: at most allreduce_elem_max 8-byte elements' worth of
        // bytes; and an element must fit one piece (the runtime's buffer).
        if element_size == 0
            || element_size > rt.gaspi.config().allreduce_elem_max as u64 * 8
            || num as u64 * element_size > crate::process::allreduce_buf_size(rt.allreduce_elem_max)
        {
            return Err(Code(GASPI_ERR_INV_SIZE));
        }
        let elem = element_size as usize;
        let piece_max = rt.gaspi.config().allreduce_elem_max as usize;
        let per = piece_max.min(piece_max * 8 / elem);
        let call = Signature::User {
            elem_size: element_size,
            num,
        };
        let num = num as usize;
        in_pieces(g, call, num.div_ceil(per), |i| {
            let (first, n) = (i * per, per.min(num - i * per));
            // SAFETY: both buffers hold num * element_size bytes (GASPI.h's
            // contract) and (first + n) * elem <= num * elem.
            let (s, r) = unsafe {
                (
                    (buffer_send as *const u8).add(first * elem),
                    (buffer_receive as *mut u8).add(first * elem),
                )
            };
            let state = (reduce_fn, reduce_state, timeout_ms);
            allreduce_user_piece(rt, s, r, n * elem, element_size, state, group(g))
        })
    })
}

/// The C reduction of `gaspi_allreduce_user`, known not to be null.
type ReduceFn = unsafe extern "C" fn(
    gaspi_pointer_t,
    gaspi_pointer_t,
    gaspi_pointer_t,
    gaspi_reduce_state_t,
    gaspi_number_t,
    gaspi_size_t,
    gaspi_timeout_t,
) -> gaspi_return_t;

/// One piece of `gaspi_allreduce_user`: `bytes` bytes at `send` reduced
/// into `recv` with the C callback.
fn allreduce_user_piece(
    rt: &Runtime,
    send: *const u8,
    recv: *mut u8,
    bytes: usize,
    element_size: gaspi_size_t,
    (reduce_fn, reduce_state, timeout_ms): (ReduceFn, gaspi_reduce_state_t, gaspi_timeout_t),
    g: Group,
) -> Ret {
    {
        // SAFETY: `send` holds `bytes` bytes (the caller's piece of
        // buffer_send) and is not null; it is copied at once, so the
        // receive buffer may be the same memory.
        let input = unsafe { std::slice::from_raw_parts(send, bytes) }.to_vec();
        let mut output = vec![0u8; bytes];
        let failed: Cell<Option<gaspi_return_t>> = Cell::new(None);
        let elem = element_size as usize;
        let reduce = |acc: &mut [u8], x: &[u8]| {
            // Operands are copies: the callback may not write them, and
            // its result never aliases them.
            let mut one = acc.to_vec();
            let mut two = x.to_vec();
            // SAFETY: a C function pointer of the reduction's type (GASPI.h);
            // the three buffers hold acc.len() bytes, `num` elements each.
            let code = unsafe {
                reduce_fn(
                    one.as_mut_ptr() as gaspi_pointer_t,
                    two.as_mut_ptr() as gaspi_pointer_t,
                    acc.as_mut_ptr() as gaspi_pointer_t,
                    reduce_state,
                    (acc.len() / elem) as gaspi_number_t,
                    element_size,
                    timeout_ms,
                )
            };
            if code != GASPI_SUCCESS {
                failed.set(Some(code));
            }
        };
        rt.gaspi.allreduce_user(
            &input,
            &mut output,
            elem,
            &reduce,
            g,
            timeout_of(timeout_ms),
        )?;
        if let Some(code) = failed.get() {
            tracing::warn!("gaspi_allreduce_user: the reduction returned {code}");
            return Err(Code(code));
        }
        // SAFETY: `recv` holds `bytes` bytes (the caller's piece of
        // buffer_receive) and is not null; `output` is this function's own
        // buffer, so no overlap.
        unsafe { std::ptr::copy_nonoverlapping(output.as_ptr(), recv, bytes) };
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_piece_that_times_out_is_resumed_by_the_same_call_and_blocks_others() {
        let call = Signature::Typed {
            op: GASPI_OP_SUM,
            ty: GASPI_TYPE_INT,
            num: 30_000,
        };
        let other = Signature::Typed {
            op: GASPI_OP_MAX,
            ty: GASPI_TYPE_INT,
            num: 30_000,
        };
        let g: gaspi_group_t = 200; // a group no other test uses
        let mut ran = Vec::new();
        // Pieces 0 and 1 complete, piece 2 times out.
        let first = in_pieces(g, call, 4, |i| {
            ran.push(i);
            if i == 2 {
                Err(Code(GASPI_TIMEOUT))
            } else {
                Ok(())
            }
        });
        assert_eq!(first, Err(Code(GASPI_TIMEOUT)));
        assert_eq!(ran, [0, 1, 2]);
        // Another allreduce of the group is refused, running nothing.
        let refused = in_pieces(g, other, 4, |_| panic!("must not run"));
        assert_eq!(refused, Err(Code(GASPI_ERR_ACTIVE_COLL)));
        // The same call resumes at piece 2 and finishes.
        ran.clear();
        assert_eq!(
            in_pieces(g, call, 4, |i| {
                ran.push(i);
                Ok(())
            }),
            Ok(())
        );
        assert_eq!(ran, [2, 3]);
        // Done: the next call starts at piece 0; an error other than a
        // timeout forgets the call.
        ran.clear();
        let failed = in_pieces(g, other, 4, |i| {
            ran.push(i);
            Err(Code(GASPI_ERROR))
        });
        assert_eq!((failed, ran.as_slice()), (Err(Code(GASPI_ERROR)), &[0][..]));
        assert_eq!(in_pieces(g, call, 1, |_| Ok(())), Ok(()));
    }
}
