//! Configuration, start and end of a rank, information about the job,
//! error strings, the error-state vector, statistics and time.

use crate::types::*;
use crate::{call, entry, non_null, put, timeout_of, Code, Ret, Runtime, RUNTIME};
use gaspi::{Config, Gaspi, Rank, RankState};
use std::ffi::{c_char, CStr, CString};
use std::sync::{Mutex, OnceLock, PoisonError, TryLockError};
use std::time::{Duration, Instant};

/// The configuration `gaspi_config_set` gave, applied at `gaspi_proc_init`.
static PENDING: Mutex<Option<gaspi_config_t>> = Mutex::new(None);

/// The environment's configuration (`GASPI_*` variables), or the defaults
/// when the environment holds an unreadable value (init reports it).
fn env_config() -> Config {
    Config::from_env().unwrap_or_default()
}

/// GPI-2 1.6's limits that `gaspi_config_set` enforces (its
/// `GPI2_CONFIG.c`): a configuration GPI-2 refuses is refused here too.
const QUEUE_SIZE_MAX_LIMIT: u32 = 4096;
const TRANSFER_SIZE_MAX_LIMIT: u64 = 1 << 30;
const PASSIVE_TRANSFER_SIZE_MAX_LIMIT: u32 = 65_535;
const RW_LIST_ELEM_MAX_LIMIT: u32 = 255;
/// Group ids are `gaspi_group_t`, one byte: at most 256 groups.
const GROUP_MAX_LIMIT: u32 = 256;

/// `config` as GPI-2's struct, with GPI-2 1.6's values for what this
/// runtime does not use; `allreduce_elem_max` is the C interface's own
/// setting (`gaspi_allreduce` runs larger reductions in pieces).
fn c_config(config: &Config, allreduce_elem_max: u32) -> gaspi_config_t {
    gaspi_config_t {
        logger: 1,
        sn_port: 12121,
        net_info: 0,
        user_net: 0,
        sn_persistent: 1,
        sn_timeout: 30000,
        dev_config: gaspi_dev_config_t {
            network_type: GASPI_ETHERNET,
            ..Default::default()
        },
        network: GASPI_ETHERNET,
        queue_size_max: config.queue_size_max,
        queue_num: config.queue_num,
        group_max: config.group_max,
        segment_max: config.segment_max,
        transfer_size_max: config.transfer_size_max,
        notification_num: config.notification_num,
        passive_queue_size_max: config.queue_size_max,
        passive_transfer_size_max: gaspi::PASSIVE_MAX as gaspi_number_t,
        allreduce_buf_size: allreduce_buf_size(allreduce_elem_max),
        allreduce_elem_max,
        rw_list_elem_max: config.rw_list_elem_max,
        build_infrastructure: GASPI_TOPOLOGY_STATIC,
        user_defined: std::ptr::null_mut(),
    }
}

/// `gaspi_allreduce_buf_size` for a configured `allreduce_elem_max`:
/// room for that many 8-byte elements, as GPI-2 reports it.
pub(crate) fn allreduce_buf_size(allreduce_elem_max: u32) -> gaspi_size_t {
    allreduce_elem_max as gaspi_size_t * 8
}

/// The default `allreduce_elem_max` (GPI-2 1.6's, and the runtime's
/// largest single allreduce).
const ALLREDUCE_ELEM_MAX_DEFAULT: u32 = gaspi::ALLREDUCE_ELEM_MAX as u32;

/// `base` with the fields of `c` that this runtime uses. The runtime's
/// single allreduce takes up to `ALLREDUCE_ELEM_LIMIT` elements; a larger
/// `allreduce_elem_max` is served in pieces of that size (`collectives.rs`).
fn apply(mut base: Config, c: &gaspi_config_t) -> Config {
    base.allreduce_elem_max = c.allreduce_elem_max.clamp(1, gaspi::ALLREDUCE_ELEM_LIMIT);
    base.queue_size_max = c.queue_size_max;
    base.queue_num = c.queue_num;
    base.group_max = c.group_max;
    base.segment_max = c.segment_max;
    base.transfer_size_max = c.transfer_size_max;
    base.notification_num = c.notification_num;
    base.rw_list_elem_max = c.rw_list_elem_max;
    base
}

/// The configuration init will use: the environment's (an unreadable
/// `GASPI_*` variable is an error, never a silent default), then
/// `gaspi_config_set`'s; and the `allreduce_elem_max` to serve.
fn pending_config() -> Result<(Config, u32), gaspi::Error> {
    let env = Config::from_env()?;
    let pending = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
    Ok(match &*pending {
        Some(c) => (apply(env, c), c.allreduce_elem_max),
        None => (env, ALLREDUCE_ELEM_MAX_DEFAULT),
    })
}

/// The checks GPI-2 1.6's `gaspi_config_set` makes, with its limits, and
/// the runtime's own bounds. `notification_num` 0 passes here, as in
/// GPI-2, but `gaspi_proc_init` refuses it (a segment needs a word).
fn check_config(c: &gaspi_config_t) -> Ret {
    let bad = |what: String| {
        tracing::debug!("gaspi_config_set: {what}");
        Err(Code(GASPI_ERR_CONFIG))
    };
    if !(1024..=65536).contains(&c.sn_port) {
        return bad(format!("sn_port {} is not in 1024..=65536", c.sn_port));
    }
    if c.queue_size_max == 0 || c.queue_size_max > QUEUE_SIZE_MAX_LIMIT {
        return bad(format!(
            "queue_size_max {} is not in 1..={QUEUE_SIZE_MAX_LIMIT}",
            c.queue_size_max
        ));
    }
    if c.queue_num == 0 || c.queue_num > 16 {
        return bad(format!("queue_num {} is not in 1..=16", c.queue_num));
    }
    if c.segment_max == 0 || c.segment_max > 255 {
        return bad(format!("segment_max {} is not in 1..=255", c.segment_max));
    }
    if c.transfer_size_max > TRANSFER_SIZE_MAX_LIMIT {
        return bad(format!(
            "transfer_size_max {} is above {TRANSFER_SIZE_MAX_LIMIT}",
            c.transfer_size_max
        ));
    }
    if c.passive_transfer_size_max > PASSIVE_TRANSFER_SIZE_MAX_LIMIT {
        return bad(format!(
            "passive_transfer_size_max {} is above {PASSIVE_TRANSFER_SIZE_MAX_LIMIT}",
            c.passive_transfer_size_max
        ));
    }
    if c.rw_list_elem_max == 0 || c.rw_list_elem_max > RW_LIST_ELEM_MAX_LIMIT {
        return bad(format!(
            "rw_list_elem_max {} is not in 1..={RW_LIST_ELEM_MAX_LIMIT}",
            c.rw_list_elem_max
        ));
    }
    if c.group_max == 0 || c.group_max > GROUP_MAX_LIMIT {
        return bad(format!(
            "group_max {} is not in 1..={GROUP_MAX_LIMIT} (group ids are one byte)",
            c.group_max
        ));
    }
    if c.allreduce_elem_max == 0 {
        return bad("allreduce_elem_max is 0".into());
    }
    // The runtime's own bounds (notification_num 0 is left to init).
    let mut probe = apply(Config::default(), c);
    probe.notification_num = probe.notification_num.max(1);
    probe.validate()?;
    Ok(())
}

fn initialized() -> bool {
    RUNTIME
        .read()
        .unwrap_or_else(PoisonError::into_inner)
        .is_some()
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_config_get(config: *mut gaspi_config_t) -> gaspi_return_t {
    entry("gaspi_config_get", || {
        non_null(config)?;
        let slot = RUNTIME.read().unwrap_or_else(PoisonError::into_inner);
        let c = match &*slot {
            Some(rt) => c_config(rt.gaspi.config(), rt.allreduce_elem_max),
            None => {
                let pending = PENDING.lock().unwrap_or_else(PoisonError::into_inner);
                match &*pending {
                    Some(c) => *c,
                    None => c_config(&env_config(), ALLREDUCE_ELEM_MAX_DEFAULT),
                }
            }
        };
        put(config, c)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_config_set(new_config: gaspi_config_t) -> gaspi_return_t {
    entry("gaspi_config_set", || {
        if initialized() {
            return Err(Code(GASPI_ERR_INITED));
        }
        check_config(&new_config)?;
        *PENDING.lock().unwrap_or_else(PoisonError::into_inner) = Some(new_config);
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_version(version: *mut f32) -> gaspi_return_t {
    entry("gaspi_version", || put(version, 1.6))
}

#[no_mangle]
pub extern "C" fn gaspi_proc_init(timeout_ms: gaspi_timeout_t) -> gaspi_return_t {
    entry("gaspi_proc_init", || {
        gaspi_launch::init_logging();
        let mut slot = RUNTIME.write().unwrap_or_else(PoisonError::into_inner);
        if slot.is_some() {
            return Err(Code(GASPI_ERR_INITED));
        }
        let (mut config, allreduce_elem_max) = pending_config()?;
        if timeout_ms != GASPI_BLOCK && timeout_ms != GASPI_TEST {
            config = config.init_timeout(Duration::from_millis(timeout_ms));
        }
        let gaspi = Gaspi::init(config)?;
        *slot = Some(Runtime {
            gaspi,
            devices: Mutex::new(Vec::new()),
            allreduce_elem_max,
        });
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn gaspi_proc_term(timeout_ms: gaspi_timeout_t) -> gaspi_return_t {
    entry("gaspi_proc_term", || {
        let deadline = timeout_of(timeout_ms).deadline();
        // Calls in other threads hold the read lock; wait for them up to
        // the timeout rather than free the context under them.
        let rt = loop {
            match RUNTIME.try_write() {
                Ok(mut slot) => break slot.take(),
                Err(TryLockError::Poisoned(p)) => break p.into_inner().take(),
                Err(TryLockError::WouldBlock) => {
                    if deadline.is_some_and(|d| Instant::now() >= d) {
                        return Err(Code(GASPI_TIMEOUT));
                    }
                    std::thread::sleep(Duration::from_micros(200));
                }
            }
        };
        let rt = rt.ok_or(Code(GASPI_ERR_NOINIT))?;
        rt.devices
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        rt.gaspi.term()?;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_proc_rank(rank: *mut gaspi_rank_t) -> gaspi_return_t {
    call("gaspi_proc_rank", |rt| {
        put(rank, rt.gaspi.rank().0 as gaspi_rank_t)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_proc_num(proc_num: *mut gaspi_rank_t) -> gaspi_return_t {
    call("gaspi_proc_num", |rt| {
        put(proc_num, rt.gaspi.size() as gaspi_rank_t)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_proc_kill(
    rank: gaspi_rank_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_proc_kill", |rt| {
        Ok(rt.gaspi.proc_kill(Rank(rank.into()))?)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_proc_ping(rank: gaspi_rank_t, tout: gaspi_timeout_t) -> gaspi_return_t {
    call("gaspi_proc_ping", |rt| {
        Ok(rt.gaspi.proc_ping(Rank(rank.into()), timeout_of(tout))?)
    })
}

/// A rank of the job, or `GASPI_ERR_INV_RANK`.
fn valid_rank(rt: &Runtime, rank: gaspi_rank_t) -> Ret {
    if u32::from(rank) < rt.gaspi.size() {
        Ok(())
    } else {
        Err(Code(GASPI_ERR_INV_RANK))
    }
}

#[no_mangle]
pub extern "C" fn gaspi_connect(
    rank: gaspi_rank_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_connect", |rt| valid_rank(rt, rank))
}

#[no_mangle]
pub extern "C" fn gaspi_disconnect(
    rank: gaspi_rank_t,
    _timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    call("gaspi_disconnect", |rt| valid_rank(rt, rank))
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_initialized(init: *mut gaspi_number_t) -> gaspi_return_t {
    entry("gaspi_initialized", || {
        put(init, initialized() as gaspi_number_t)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_proc_local_rank(local_rank: *mut gaspi_rank_t) -> gaspi_return_t {
    call("gaspi_proc_local_rank", |rt| {
        put(
            local_rank,
            rt.gaspi.config().launch.local_rank as gaspi_rank_t,
        )
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_proc_local_num(local_num: *mut gaspi_rank_t) -> gaspi_return_t {
    call("gaspi_proc_local_num", |rt| {
        let launch = &rt.gaspi.config().launch;
        put(local_num, launch.local_size.max(1) as gaspi_rank_t)
    })
}

/// The origin of `gaspi_time_ticks`.
fn epoch() -> Instant {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    *EPOCH.get_or_init(Instant::now)
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_time_ticks(ticks: *mut gaspi_cycles_t) -> gaspi_return_t {
    entry("gaspi_time_ticks", || {
        put(ticks, epoch().elapsed().as_nanos() as gaspi_cycles_t)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_cpu_frequency(cpu_mhz: *mut f32) -> gaspi_return_t {
    entry("gaspi_cpu_frequency", || put(cpu_mhz, 1000.0))
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_time_get(wtime: *mut gaspi_time_t) -> gaspi_return_t {
    // As in GPI-2, also before gaspi_proc_init: milliseconds from a fixed
    // origin (that of gaspi_time_ticks, the process's first time call).
    entry("gaspi_time_get", || {
        put(wtime, epoch().elapsed().as_secs_f64() as f32 * 1000.0)
    })
}

/// The text of each return code, as GPI-2 1.6 words it.
fn error_text(code: gaspi_return_t) -> &'static CStr {
    match code {
        GASPI_ERROR => c"general error",
        GASPI_SUCCESS => c"success",
        GASPI_TIMEOUT => c"timeout",
        GASPI_ERR_EMFILE => c"too many open files",
        GASPI_ERR_ENV => c"incorrect environment vars",
        GASPI_ERR_SN_PORT => c"Invalid/In use internal port",
        GASPI_ERR_CONFIG => c"Invalid parameter in configuration (gaspi_config_t)",
        GASPI_ERR_NOINIT => c"Invalid function before initialization",
        GASPI_ERR_INITED => c"Invalid function after initialization",
        GASPI_ERR_NULLPTR => c"NULL pointer reference",
        GASPI_ERR_INV_SEGSIZE => c"Invalid segment size",
        GASPI_ERR_INV_SEG => c"Invalid segment",
        GASPI_ERR_INV_GROUP => c"Invalid group",
        GASPI_ERR_INV_RANK => c"Invalid rank",
        GASPI_ERR_INV_QUEUE => c"Invalid queue",
        GASPI_ERR_INV_LOC_OFF => c"Invalid local offset",
        GASPI_ERR_INV_REM_OFF => c"Invalid remote offset",
        GASPI_ERR_INV_COMMSIZE => c"Invalid size for communication",
        GASPI_ERR_INV_NOTIF_VAL => c"Invalid notification value (must be > 0)",
        GASPI_ERR_INV_NOTIF_ID => c"Invalid notification id",
        GASPI_ERR_INV_NUM => c"Invalid number count",
        GASPI_ERR_INV_SIZE => c"Invalid size",
        GASPI_ERR_MANY_SEG => c"Too many segments",
        GASPI_ERR_MANY_GRP => c"Too many groups",
        GASPI_QUEUE_FULL => c"Queue is full",
        GASPI_ERR_UNALIGN_OFF => c"Unaligned (8 bytes) offset",
        GASPI_ERR_ACTIVE_COLL => c"Other collective is still active",
        GASPI_ERR_DEVICE => c"Device operation error",
        GASPI_ERR_SN => c"SN operation failed",
        GASPI_ERR_MEMALLOC => c"Memory allocation failed",
        _ => c"unknown",
    }
}

#[no_mangle]
pub extern "C" fn gaspi_error_str(error_code: gaspi_return_t) -> gaspi_string_t {
    // The caller must not write through it (as with GPI-2, whose header
    // types it `char *`).
    error_text(error_code).as_ptr() as gaspi_string_t
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_print_error(
    error_code: gaspi_return_t,
    error_message: *mut gaspi_string_t,
) -> gaspi_return_t {
    entry("gaspi_print_error", || {
        non_null(error_message)?;
        let text = error_text(error_code).to_bytes_with_nul();
        // SAFETY: malloc of a non-zero size; checked for null below.
        let copy = unsafe { libc::malloc(text.len()) } as *mut u8;
        if copy.is_null() {
            return Err(Code(GASPI_ERR_MEMALLOC));
        }
        // SAFETY: `copy` holds text.len() bytes, freshly allocated, so
        // the ranges do not overlap.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), copy, text.len()) };
        put(error_message, copy as gaspi_string_t)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_state_vec_get(state_vector: gaspi_state_vector) -> gaspi_return_t {
    call("gaspi_state_vec_get", |rt| {
        non_null(state_vector)?;
        for (i, s) in rt.gaspi.state_vec().iter().enumerate() {
            let v = match s {
                RankState::Corrupt => GASPI_STATE_CORRUPT,
                _ => GASPI_STATE_HEALTHY,
            };
            // SAFETY: by GASPI.h's contract the vector holds
            // gaspi_proc_num entries; state_vec has exactly that many.
            put(unsafe { state_vector.add(i) }, v)?;
        }
        Ok(())
    })
}

/// `gaspi_state_vector_t`.
type gaspi_state_vector = *mut gaspi_state_t;

// ----- statistics -----

/// Counters 0..4; then one per operation of [`gaspi::Statistics::calls`].
const FIXED_COUNTERS: [(&CStr, &CStr); 4] = [
    (
        c"bytes_written",
        c"bytes written into segments (write, write_notify, lists, passive_send)",
    ),
    (
        c"bytes_read",
        c"bytes read from segments (read, read_notify, lists, passive_receive)",
    ),
    (c"wait_time_ms", c"milliseconds blocked in waiting calls"),
    (
        c"bytes_copied_for_peers",
        c"bytes of peers' writes copied by this rank while it waited",
    ),
];

/// Names and descriptions of the per-operation counters, made once.
fn call_counters(rt: &Runtime) -> &'static [(CString, CString)] {
    static NAMES: OnceLock<Vec<(CString, CString)>> = OnceLock::new();
    NAMES.get_or_init(|| {
        rt.gaspi
            .statistics()
            .calls
            .iter()
            .map(|(op, _)| {
                let name = CString::new(format!("calls:{op}")).unwrap_or_default();
                let desc = CString::new(format!("calls of {op}")).unwrap_or_default();
                (name, desc)
            })
            .collect()
    })
}

#[no_mangle]
pub extern "C" fn gaspi_statistic_verbosity_level(
    _verbosity_level: gaspi_number_t,
) -> gaspi_return_t {
    call("gaspi_statistic_verbosity_level", |_| Ok(()))
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_statistic_counter_max(
    counter_max: *mut gaspi_number_t,
) -> gaspi_return_t {
    call("gaspi_statistic_counter_max", |rt| {
        let n = FIXED_COUNTERS.len() + call_counters(rt).len();
        put(counter_max, n as gaspi_number_t)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_statistic_counter_info(
    counter: gaspi_statistic_counter_t,
    counter_argument: *mut gaspi_statistic_argument_t,
    counter_name: *mut gaspi_string_t,
    counter_description: *mut gaspi_string_t,
    verbosity_level: *mut gaspi_number_t,
) -> gaspi_return_t {
    call("gaspi_statistic_counter_info", |rt| {
        non_null(counter_argument)?;
        non_null(counter_name)?;
        non_null(counter_description)?;
        non_null(verbosity_level)?;
        let c = counter as usize;
        let (name, desc): (&CStr, &CStr) = match FIXED_COUNTERS.get(c) {
            Some(&(n, d)) => (n, d),
            None => match call_counters(rt).get(c - FIXED_COUNTERS.len()) {
                Some((n, d)) => (n.as_c_str(), d.as_c_str()),
                None => return Err(Code(GASPI_ERR_INV_NUM)),
            },
        };
        put(counter_argument, GASPI_STATISTIC_ARGUMENT_NONE)?;
        put(counter_name, name.as_ptr() as *mut c_char)?;
        put(counter_description, desc.as_ptr() as *mut c_char)?;
        put(verbosity_level, 1)
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_statistic_counter_get(
    counter: gaspi_statistic_counter_t,
    _argument: gaspi_number_t,
    value: *mut libc::c_ulong,
) -> gaspi_return_t {
    call("gaspi_statistic_counter_get", |rt| {
        non_null(value)?;
        let s = rt.gaspi.statistics();
        let v = match counter as usize {
            0 => s.bytes_written,
            1 => s.bytes_read,
            2 => s.wait_time.as_millis() as u64,
            3 => s.bytes_copied_for_peers,
            c => match s.calls.get(c - FIXED_COUNTERS.len()) {
                Some(&(_, n)) => n,
                None => return Err(Code(GASPI_ERR_INV_NUM)),
            },
        };
        put(value, v)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_statistic_counter_reset(
    counter: gaspi_statistic_counter_t,
) -> gaspi_return_t {
    call("gaspi_statistic_counter_reset", |rt| {
        let max = FIXED_COUNTERS.len() + call_counters(rt).len();
        if counter as usize >= max {
            return Err(Code(GASPI_ERR_INV_NUM));
        }
        rt.gaspi.statistics_reset();
        Ok(())
    })
}
