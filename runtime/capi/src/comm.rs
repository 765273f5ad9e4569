//! Segments, one-sided calls and their lists, notifications, atomics,
//! passive messages and queues: each a thin mapping onto [`gaspi::Gaspi`].

use crate::types::*;
use crate::{call, non_null, put, timeout_of, Code, Ret, Runtime};
use gaspi::Timeout;
use gaspi::{ListElem, Memory, NotifyId, Queue, Rank, SegId};

fn seg(id: gaspi_segment_id_t) -> SegId {
    SegId(id)
}
fn rank(r: gaspi_rank_t) -> Rank {
    Rank(r.into())
}
fn queue(q: gaspi_queue_id_t) -> Queue {
    Queue(q.into())
}
fn group(g: gaspi_group_t) -> gaspi::Group {
    gaspi::Group(g.into())
}

// ----- segments -----

#[no_mangle]
pub extern "C" fn gaspi_segment_alloc(
    segment_id: gaspi_segment_id_t,
    size: gaspi_size_t,
    _alloc_policy: gaspi_alloc_t,
) -> gaspi_return_t {
    call("gaspi_segment_alloc", |rt| {
        rt.gaspi
            .segment_alloc(seg(segment_id), size, Memory::Host)?;
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn gaspi_segment_delete(segment_id: gaspi_segment_id_t) -> gaspi_return_t {
    call("gaspi_segment_delete", |rt| {
        Ok(rt.gaspi.segment_delete(seg(segment_id))?)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_segment_register(
    segment_id: gaspi_segment_id_t,
    r: gaspi_rank_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_segment_register", |rt| {
        Ok(rt
            .gaspi
            .segment_register(seg(segment_id), rank(r), timeout_of(timeout_ms))?)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_segment_create(
    segment_id: gaspi_segment_id_t,
    size: gaspi_size_t,
    g: gaspi_group_t,
    timeout_ms: gaspi_timeout_t,
    _alloc_policy: gaspi_alloc_t,
) -> gaspi_return_t {
    call("gaspi_segment_create", |rt| {
        rt.gaspi.segment_create(
            seg(segment_id),
            size,
            Memory::Host,
            group(g),
            timeout_of(timeout_ms),
        )?;
        Ok(())
    })
}

/// gaspi-rs extension (GASPI_Ext.h): `gaspi_segment_alloc` of a segment in
/// the memory of CUDA device `device`.
#[no_mangle]
pub extern "C" fn gaspi_segment_alloc_gpu(
    segment_id: gaspi_segment_id_t,
    size: gaspi_size_t,
    device: u32,
) -> gaspi_return_t {
    call("gaspi_segment_alloc_gpu", |rt| {
        rt.gaspi
            .segment_alloc(seg(segment_id), size, Memory::Gpu(device))?;
        Ok(())
    })
}

/// gaspi-rs extension (GASPI_Ext.h): `gaspi_segment_create` of a segment in
/// the memory of CUDA device `device`.
#[no_mangle]
pub extern "C" fn gaspi_segment_create_gpu(
    segment_id: gaspi_segment_id_t,
    size: gaspi_size_t,
    g: gaspi_group_t,
    timeout_ms: gaspi_timeout_t,
    device: u32,
) -> gaspi_return_t {
    call("gaspi_segment_create_gpu", |rt| {
        let t: Timeout = timeout_of(timeout_ms);
        rt.gaspi
            .segment_create(seg(segment_id), size, Memory::Gpu(device), group(g), t)?;
        Ok(())
    })
}

/// Binds `pointer` as segment `segment_id`: a GPU segment when the CUDA
/// driver reports it as device memory (`cudaMalloc`, `cuMemAlloc`), a host
/// segment otherwise (decision 0025).
fn bind(rt: &Runtime, segment_id: gaspi_segment_id_t, pointer: gaspi_pointer_t, size: u64) -> Ret {
    non_null(pointer)?;
    match gaspi::cuda::device_allocation(pointer as u64) {
        Ok(Some(alloc)) => {
            let end = (pointer as u64 - alloc.base).checked_add(size);
            if end.is_none_or(|end| end > alloc.len as u64) {
                tracing::debug!(
                    "gaspi_segment_bind: {size} bytes at {pointer:p} run past its GPU \
                     allocation of {} bytes",
                    alloc.len
                );
                return Err(Code(GASPI_ERR_INV_SEGSIZE));
            }
            // SAFETY: GASPI.h's contract of gaspi_segment_bind/use: the
            // memory stays allocated until the segment is deleted, which is
            // what segment_bind_gpu asks; the driver reported it as device
            // memory of this process.
            unsafe {
                rt.gaspi
                    .segment_bind_gpu(seg(segment_id), pointer as u64, size)
            }?;
        }
        // No driver, or memory the driver does not call device memory (host,
        // page-locked, managed): host memory, reached by the CPU.
        Ok(None) | Err(gaspi::cuda::GpuError::NoDriver { .. }) => {
            // SAFETY: GASPI.h's contract of gaspi_segment_bind/use: `pointer`
            // is host memory valid for reads and writes of `size` bytes
            // until the segment is deleted, which is what segment_bind asks.
            unsafe {
                rt.gaspi
                    .segment_bind(seg(segment_id), pointer as *mut u8, size)
            }?;
        }
        Err(e) => return Err(gaspi::Error::Gpu(e).into()),
    }
    Ok(())
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_segment_bind(
    segment_id: gaspi_segment_id_t,
    pointer: gaspi_pointer_t,
    size: gaspi_size_t,
    _memory_description: gaspi_memory_description_t,
) -> gaspi_return_t {
    call("gaspi_segment_bind", |rt| {
        bind(rt, segment_id, pointer, size)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_segment_use(
    segment_id: gaspi_segment_id_t,
    pointer: gaspi_pointer_t,
    size: gaspi_size_t,
    g: gaspi_group_t,
    timeout: gaspi_timeout_t,
    _memory_description: gaspi_memory_description_t,
) -> gaspi_return_t {
    call("gaspi_segment_use", |rt| {
        let members = rt.gaspi.group_ranks(group(g))?;
        let me = rt.gaspi.rank();
        if !members.contains(&me) {
            return Err(Code(GASPI_ERR_INV_GROUP));
        }
        bind(rt, segment_id, pointer, size)?;
        let t = timeout_of(timeout);
        let registered = members
            .iter()
            .filter(|&&r| r != me)
            .try_for_each(|&r| rt.gaspi.segment_register(seg(segment_id), r, t))
            .and_then(|()| rt.gaspi.barrier(group(g), t));
        if let Err(e) = registered {
            // Leave nothing half-made behind, as segment_create does.
            let _ = rt.gaspi.segment_delete(seg(segment_id));
            return Err(e.into());
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_segment_num(segment_num: *mut gaspi_number_t) -> gaspi_return_t {
    call("gaspi_segment_num", |rt| {
        put(segment_num, rt.gaspi.segment_list().len() as gaspi_number_t)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_segment_list(
    num: gaspi_number_t,
    segment_id_list: *mut gaspi_segment_id_t,
) -> gaspi_return_t {
    call("gaspi_segment_list", |rt| {
        non_null(segment_id_list)?;
        let ids = rt.gaspi.segment_list();
        if (num as usize) < ids.len() {
            return Err(Code(GASPI_ERR_INV_NUM));
        }
        for (i, id) in ids.iter().enumerate() {
            // SAFETY: the caller's list holds `num` entries (GASPI.h), and
            // i < ids.len() <= num.
            put(unsafe { segment_id_list.add(i) }, id.0)?;
        }
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_segment_ptr(
    segment_id: gaspi_segment_id_t,
    ptr: *mut gaspi_pointer_t,
) -> gaspi_return_t {
    call("gaspi_segment_ptr", |rt| {
        non_null(ptr)?;
        let p = rt.gaspi.segment_ptr(seg(segment_id))?;
        put(ptr, p as gaspi_pointer_t)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_segment_max(segment_max: *mut gaspi_number_t) -> gaspi_return_t {
    call("gaspi_segment_max", |rt| {
        put(segment_max, rt.gaspi.config().segment_max)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_segment_avail_local(
    avail_seg_id: *mut gaspi_segment_id_t,
) -> gaspi_return_t {
    call("gaspi_segment_avail_local", |rt| {
        non_null(avail_seg_id)?;
        let used = rt.gaspi.segment_list();
        let max = rt.gaspi.config().segment_max.min(256);
        let free = (0..max)
            .map(|i| SegId(i as u8))
            .find(|s| !used.contains(s))
            .ok_or(Code(GASPI_ERR_MANY_SEG))?;
        put(avail_seg_id, free.0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_segment_size(
    segment_id: gaspi_segment_id_t,
    r: gaspi_rank_t,
    size: *mut gaspi_size_t,
) -> gaspi_return_t {
    call("gaspi_segment_size", |rt| {
        non_null(size)?;
        put(size, rt.gaspi.segment_size_of(rank(r), seg(segment_id))?)
    })
}

// ----- one-sided -----

#[no_mangle]
pub extern "C" fn gaspi_write(
    segment_id_local: gaspi_segment_id_t,
    offset_local: gaspi_offset_t,
    r: gaspi_rank_t,
    segment_id_remote: gaspi_segment_id_t,
    offset_remote: gaspi_offset_t,
    size: gaspi_size_t,
    q: gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_write", |rt| {
        Ok(rt.gaspi.write(
            seg(segment_id_local),
            offset_local,
            rank(r),
            seg(segment_id_remote),
            offset_remote,
            size,
            queue(q),
        )?)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_read(
    segment_id_local: gaspi_segment_id_t,
    offset_local: gaspi_offset_t,
    r: gaspi_rank_t,
    segment_id_remote: gaspi_segment_id_t,
    offset_remote: gaspi_offset_t,
    size: gaspi_size_t,
    q: gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_read", |rt| {
        Ok(rt.gaspi.read(
            seg(segment_id_local),
            offset_local,
            rank(r),
            seg(segment_id_remote),
            offset_remote,
            size,
            queue(q),
        )?)
    })
}

/// The elements of a list call, from its five arrays of `num` entries.
/// A `num` of 0 or above `rw_list_elem_max` is refused before the arrays
/// are read: the runtime would refuse the list anyway, and a wrong `num`
/// must not make this read (or allocate for) that many entries.
fn list(
    rt: &Runtime,
    num: gaspi_number_t,
    segment_id_local: *const gaspi_segment_id_t,
    offset_local: *const gaspi_offset_t,
    segment_id_remote: *const gaspi_segment_id_t,
    offset_remote: *const gaspi_offset_t,
    size: *const gaspi_size_t,
) -> Result<Vec<ListElem>, Code> {
    if num == 0 || num > rt.gaspi.config().rw_list_elem_max {
        return Err(Code(GASPI_ERR_INV_NUM));
    }
    non_null(segment_id_local)?;
    non_null(offset_local)?;
    non_null(segment_id_remote)?;
    non_null(offset_remote)?;
    non_null(size)?;
    Ok((0..num as usize)
        .map(|i| {
            // SAFETY: each array holds `num` entries (GASPI.h's contract of
            // the list calls), none is null (checked above), and i < num.
            unsafe {
                ListElem::new(
                    SegId(segment_id_local.add(i).read()),
                    offset_local.add(i).read_unaligned(),
                    SegId(segment_id_remote.add(i).read()),
                    offset_remote.add(i).read_unaligned(),
                    size.add(i).read_unaligned(),
                )
            }
        })
        .collect())
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_write_list(
    num: gaspi_number_t,
    segment_id_local: *mut gaspi_segment_id_t,
    offset_local: *mut gaspi_offset_t,
    r: gaspi_rank_t,
    segment_id_remote: *mut gaspi_segment_id_t,
    offset_remote: *mut gaspi_offset_t,
    size: *mut gaspi_size_t,
    q: gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_write_list", |rt| {
        let elems = list(
            rt,
            num,
            segment_id_local,
            offset_local,
            segment_id_remote,
            offset_remote,
            size,
        )?;
        Ok(rt.gaspi.write_list(&elems, rank(r), queue(q))?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_read_list(
    num: gaspi_number_t,
    segment_id_local: *mut gaspi_segment_id_t,
    offset_local: *mut gaspi_offset_t,
    r: gaspi_rank_t,
    segment_id_remote: *mut gaspi_segment_id_t,
    offset_remote: *mut gaspi_offset_t,
    size: *mut gaspi_size_t,
    q: gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_read_list", |rt| {
        let elems = list(
            rt,
            num,
            segment_id_local,
            offset_local,
            segment_id_remote,
            offset_remote,
            size,
        )?;
        Ok(rt.gaspi.read_list(&elems, rank(r), queue(q))?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_write_list_notify(
    num: gaspi_number_t,
    segment_id_local: *mut gaspi_segment_id_t,
    offset_local: *mut gaspi_offset_t,
    r: gaspi_rank_t,
    segment_id_remote: *mut gaspi_segment_id_t,
    offset_remote: *mut gaspi_offset_t,
    size: *mut gaspi_size_t,
    segment_id_notification: gaspi_segment_id_t,
    notification_id: gaspi_notification_id_t,
    notification_value: gaspi_notification_t,
    q: gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_write_list_notify", |rt| {
        let elems = list(
            rt,
            num,
            segment_id_local,
            offset_local,
            segment_id_remote,
            offset_remote,
            size,
        )?;
        Ok(rt.gaspi.write_list_notify(
            &elems,
            rank(r),
            seg(segment_id_notification),
            NotifyId(notification_id),
            notification_value,
            queue(q),
        )?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_read_list_notify(
    num: gaspi_number_t,
    segment_id_local: *mut gaspi_segment_id_t,
    offset_local: *mut gaspi_offset_t,
    r: gaspi_rank_t,
    segment_id_remote: *mut gaspi_segment_id_t,
    offset_remote: *mut gaspi_offset_t,
    size: *mut gaspi_size_t,
    segment_id_notification: gaspi_segment_id_t,
    notification_id: gaspi_notification_id_t,
    q: gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_read_list_notify", |rt| {
        let elems = list(
            rt,
            num,
            segment_id_local,
            offset_local,
            segment_id_remote,
            offset_remote,
            size,
        )?;
        Ok(rt.gaspi.read_list_notify(
            &elems,
            rank(r),
            seg(segment_id_notification),
            NotifyId(notification_id),
            queue(q),
        )?)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_wait(q: gaspi_queue_id_t, timeout_ms: gaspi_timeout_t) -> gaspi_return_t {
    call("gaspi_wait", |rt| {
        Ok(rt.gaspi.wait(queue(q), timeout_of(timeout_ms))?)
    })
}

// ----- notifications -----

#[no_mangle]
pub extern "C" fn gaspi_notify(
    segment_id_remote: gaspi_segment_id_t,
    r: gaspi_rank_t,
    notification_id: gaspi_notification_id_t,
    notification_value: gaspi_notification_t,
    q: gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_notify", |rt| {
        Ok(rt.gaspi.notify(
            rank(r),
            seg(segment_id_remote),
            NotifyId(notification_id),
            notification_value,
            queue(q),
        )?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_notify_waitsome(
    segment_id_local: gaspi_segment_id_t,
    notification_begin: gaspi_notification_id_t,
    num: gaspi_number_t,
    first_id: *mut gaspi_notification_id_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_notify_waitsome", |rt| {
        non_null(first_id)?;
        if num == 0 {
            // As GPI-2: nothing to wait for, success at once (first_id is
            // not written), once the segment and the range are checked.
            rt.gaspi.segment_size(seg(segment_id_local))?;
            if notification_begin > rt.gaspi.config().notification_num {
                return Err(Code(GASPI_ERR_INV_NOTIF_ID));
            }
            return Ok(());
        }
        let id = rt.gaspi.notify_waitsome(
            seg(segment_id_local),
            NotifyId(notification_begin),
            num,
            timeout_of(timeout_ms),
        )?;
        put(first_id, id.0)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_notify_reset(
    segment_id_local: gaspi_segment_id_t,
    notification_id: gaspi_notification_id_t,
    old_notification_val: *mut gaspi_notification_t,
) -> gaspi_return_t {
    call("gaspi_notify_reset", |rt| {
        let old = rt
            .gaspi
            .notify_reset(seg(segment_id_local), NotifyId(notification_id))?;
        // A null old_notification_val discards the value, as in GPI-2.
        if old_notification_val.is_null() {
            return Ok(());
        }
        put(old_notification_val, old)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_write_notify(
    segment_id_local: gaspi_segment_id_t,
    offset_local: gaspi_offset_t,
    r: gaspi_rank_t,
    segment_id_remote: gaspi_segment_id_t,
    offset_remote: gaspi_offset_t,
    size: gaspi_size_t,
    notification_id: gaspi_notification_id_t,
    notification_value: gaspi_notification_t,
    q: gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_write_notify", |rt| {
        Ok(rt.gaspi.write_notify(
            seg(segment_id_local),
            offset_local,
            rank(r),
            seg(segment_id_remote),
            offset_remote,
            size,
            NotifyId(notification_id),
            notification_value,
            queue(q),
        )?)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_read_notify(
    segment_id_local: gaspi_segment_id_t,
    offset_local: gaspi_offset_t,
    r: gaspi_rank_t,
    segment_id_remote: gaspi_segment_id_t,
    offset_remote: gaspi_offset_t,
    size: gaspi_size_t,
    notification_id: gaspi_notification_id_t,
    q: gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_read_notify", |rt| {
        Ok(rt.gaspi.read_notify(
            seg(segment_id_local),
            offset_local,
            rank(r),
            seg(segment_id_remote),
            offset_remote,
            size,
            NotifyId(notification_id),
            queue(q),
        )?)
    })
}

// ----- atomics -----

#[no_mangle]
pub unsafe extern "C" fn gaspi_atomic_fetch_add(
    segment_id: gaspi_segment_id_t,
    offset: gaspi_offset_t,
    r: gaspi_rank_t,
    val_add: gaspi_atomic_value_t,
    val_old: *mut gaspi_atomic_value_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_atomic_fetch_add", |rt| {
        non_null(val_old)?;
        let old = rt.gaspi.atomic_fetch_add(
            seg(segment_id),
            offset,
            rank(r),
            val_add,
            timeout_of(timeout_ms),
        )?;
        put(val_old, old)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_atomic_compare_swap(
    segment_id: gaspi_segment_id_t,
    offset: gaspi_offset_t,
    r: gaspi_rank_t,
    comparator: gaspi_atomic_value_t,
    val_new: gaspi_atomic_value_t,
    val_old: *mut gaspi_atomic_value_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_atomic_compare_swap", |rt| {
        non_null(val_old)?;
        let old = rt.gaspi.atomic_compare_swap(
            seg(segment_id),
            offset,
            rank(r),
            comparator,
            val_new,
            timeout_of(timeout_ms),
        )?;
        put(val_old, old)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_atomic_max(max_value: *mut gaspi_atomic_value_t) -> gaspi_return_t {
    call("gaspi_atomic_max", |_| put(max_value, u64::MAX))
}

// ----- passive -----

#[no_mangle]
pub extern "C" fn gaspi_passive_send(
    segment_id_local: gaspi_segment_id_t,
    offset_local: gaspi_offset_t,
    r: gaspi_rank_t,
    size: gaspi_size_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_passive_send", |rt| {
        Ok(rt.gaspi.passive_send(
            seg(segment_id_local),
            offset_local,
            rank(r),
            size,
            timeout_of(timeout_ms),
        )?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_passive_receive(
    segment_id_local: gaspi_segment_id_t,
    offset_local: gaspi_offset_t,
    rem_rank: *mut gaspi_rank_t,
    _size: gaspi_size_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_passive_receive", |rt| {
        non_null(rem_rank)?;
        let (from, _len) = rt.gaspi.passive_receive(
            seg(segment_id_local),
            offset_local,
            timeout_of(timeout_ms),
        )?;
        put(rem_rank, from.0 as gaspi_rank_t)
    })
}

// ----- queues and limits -----

#[no_mangle]
pub extern "C" fn pgaspi_queue_purge(
    q: gaspi_queue_id_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_queue_purge", |rt| {
        Ok(rt.gaspi.queue_purge(queue(q), timeout_of(timeout_ms))?)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_queue_purge(
    q: gaspi_queue_id_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    pgaspi_queue_purge(q, timeout_ms)
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_queue_size(
    q: gaspi_queue_id_t,
    queue_size: *mut gaspi_number_t,
) -> gaspi_return_t {
    call("gaspi_queue_size", |rt| {
        non_null(queue_size)?;
        put(queue_size, rt.gaspi.queue_size(queue(q))?)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_queue_create(
    q: *mut gaspi_queue_id_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_queue_create", |rt| {
        non_null(q)?;
        let created = rt.gaspi.queue_create()?;
        put(q, created.0 as gaspi_queue_id_t)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_queue_delete(q: gaspi_queue_id_t) -> gaspi_return_t {
    call("gaspi_queue_delete", |rt| {
        Ok(rt.gaspi.queue_delete(queue(q))?)
    })
}

/// Exports a call that stores one value the running job knows.
macro_rules! query {
    ($name:ident, $t:ty, |$rt:ident| $value:expr) => {
        #[doc = concat!("`", stringify!($name), "` of GASPI.h.")]
        #[no_mangle]
        pub unsafe extern "C" fn $name(out: *mut $t) -> gaspi_return_t {
            call(stringify!($name), |$rt: &Runtime| put(out, ($value) as $t))
        }
    };
}

query!(gaspi_queue_num, gaspi_number_t, |rt| rt.gaspi.queue_num());
query!(gaspi_queue_size_max, gaspi_number_t, |rt| rt
    .gaspi
    .config()
    .queue_size_max);
query!(gaspi_queue_max, gaspi_number_t, |rt| rt.gaspi.queue_max());
// 0: size 0 is a valid transfer (decision 0030), as GPI-2 reports it.
query!(gaspi_transfer_size_min, gaspi_size_t, |_rt| 0);
query!(gaspi_transfer_size_max, gaspi_size_t, |rt| rt
    .gaspi
    .config()
    .transfer_size_max);
query!(gaspi_notification_num, gaspi_number_t, |rt| rt
    .gaspi
    .config()
    .notification_num);
query!(gaspi_passive_transfer_size_min, gaspi_size_t, |_rt| 1);
query!(gaspi_passive_transfer_size_max, gaspi_size_t, |_rt| {
    gaspi::PASSIVE_MAX
});
query!(gaspi_allreduce_buf_size, gaspi_size_t, |rt| {
    crate::process::allreduce_buf_size(rt.allreduce_elem_max)
});
query!(gaspi_allreduce_elem_max, gaspi_number_t, |rt| rt
    .allreduce_elem_max);
query!(gaspi_rw_list_elem_max, gaspi_number_t, |rt| rt
    .gaspi
    .config()
    .rw_list_elem_max);
query!(gaspi_network_type, gaspi_network_t, |_rt| GASPI_ETHERNET);
query!(gaspi_build_infrastructure, gaspi_number_t, |_rt| {
    GASPI_TOPOLOGY_STATIC
});
