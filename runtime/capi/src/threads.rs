//! `GASPI_Threads.h`: GPI-2 1.6's helper for several threads of one rank:
//! an announced number of threads, ids handed out by registration, and a
//! barrier among those threads (`gaspi_threads_sync`), with a GASPI
//! barrier of the rank inside it (`gaspi_threads_sync_all`).
//!
//! The barrier is a mutex-protected round counter with a condition
//! variable: the last thread to arrive in a round (after running the GASPI
//! barrier, for `sync_all`) starts the next round and wakes the others,
//! which then return that round's result. Threads sleep rather than spin
//! while they wait, so a rank with more threads than cores still makes
//! progress. The pool needs no `gaspi_proc_init` (as in GPI-2); only
//! `sync_all`'s barrier does.

use crate::types::*;
use crate::{entry, put, Code};
use std::cell::Cell;
use std::ffi::c_void;
use std::sync::{Condvar, Mutex, PoisonError};

/// Most threads a rank may announce (GPI-2's limit; more are counted as
/// this many).
pub const THREADS_MAX: u32 = 1024;

/// The announced threads and the barrier's state.
struct Pool {
    /// Threads announced by `gaspi_threads_init(_user)`; 0: none (not
    /// initialized, or terminated).
    announced: u32,
    /// Ids handed out so far.
    registered: u32,
    /// Threads arrived in the current round of the barrier.
    arrived: u32,
    /// Number of the current round; a waiter leaves when it changes.
    round: u64,
    /// What the last finished round returns to its threads.
    result: gaspi_return_t,
}

static POOL: Mutex<Pool> = Mutex::new(Pool {
    announced: 0,
    registered: 0,
    arrived: 0,
    round: 0,
    result: GASPI_SUCCESS,
});
static ROUND_DONE: Condvar = Condvar::new();

thread_local! {
    /// (id, announced threads) as this thread registered; (-1, -1) before.
    static ME: Cell<(gaspi_int, gaspi_int)> = const { Cell::new((-1, -1)) };
}

fn pool() -> std::sync::MutexGuard<'static, Pool> {
    POOL.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `GASPI_ERROR` unless threads are announced.
fn announced() -> Result<u32, Code> {
    match pool().announced {
        0 => {
            tracing::debug!("gaspi_threads: gaspi_threads_init(_user) was not called");
            Err(Code(GASPI_ERROR))
        }
        n => Ok(n),
    }
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_threads_get_tid(tid: *mut gaspi_int) -> gaspi_return_t {
    entry("gaspi_threads_get_tid", || {
        announced()?;
        put(tid, ME.with(|m| m.get().0))
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_threads_get_total(num: *mut gaspi_int) -> gaspi_return_t {
    entry("gaspi_threads_get_total", || {
        announced()?;
        put(num, ME.with(|m| m.get().1))
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_threads_get_num_cores(cores: *mut gaspi_int) -> gaspi_return_t {
    entry("gaspi_threads_get_num_cores", || {
        let n = crate::ext::allowed_cpus().len();
        if n == 0 {
            return Err(Code(GASPI_ERROR));
        }
        put(cores, n as gaspi_int)
    })
}

#[no_mangle]
pub extern "C" fn gaspi_threads_init_user(use_nr_of_threads: u32) -> gaspi_return_t {
    entry("gaspi_threads_init_user", || {
        let mut p = pool();
        if p.announced != 0 {
            tracing::debug!("gaspi_threads_init_user: threads are announced already");
            return Err(Code(GASPI_ERROR));
        }
        if use_nr_of_threads == 0 {
            tracing::debug!("gaspi_threads_init_user: 0 threads");
            return Err(Code(GASPI_ERROR));
        }
        p.announced = use_nr_of_threads.min(THREADS_MAX);
        p.registered = 0;
        p.arrived = 0;
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_threads_init(num: *mut gaspi_int) -> gaspi_return_t {
    entry("gaspi_threads_init", || {
        let mut cores: gaspi_int = 0;
        // SAFETY: `cores` is a local out value.
        let code = unsafe { gaspi_threads_get_num_cores(&mut cores) };
        if code != GASPI_SUCCESS {
            return Err(Code(code));
        }
        put(num, cores)?;
        match gaspi_threads_init_user(cores as u32) {
            GASPI_SUCCESS => Ok(()),
            code => Err(Code(code)),
        }
    })
}

#[no_mangle]
pub extern "C" fn gaspi_threads_term() -> gaspi_return_t {
    entry("gaspi_threads_term", || {
        let mut p = pool();
        p.announced = 0;
        p.registered = 0;
        p.arrived = 0;
        // Threads waiting in a round leave it.
        ROUND_DONE.notify_all();
        Ok(())
    })
}

/// A thread's entry point, as `pthread_create` takes it.
type StartRoutine = extern "C" fn(*mut c_void) -> *mut c_void;

#[no_mangle]
pub unsafe extern "C" fn gaspi_threads_run(
    function: Option<StartRoutine>,
    arg: *mut c_void,
) -> gaspi_return_t {
    entry("gaspi_threads_run", || {
        announced()?;
        let function = function.ok_or(Code(GASPI_ERR_NULLPTR))?;
        // A pthread rather than a std::thread: the C function may end its
        // thread with pthread_exit, which must not unwind through Rust.
        let mut thread: libc::pthread_t = 0;
        // SAFETY: `thread` is a valid out value, a null attribute asks for
        // the defaults, and `function` is the caller's thread function,
        // called with `arg` as GASPI_Threads.h states.
        let rc = unsafe { libc::pthread_create(&mut thread, std::ptr::null(), function, arg) };
        if rc != 0 {
            tracing::warn!(
                "gaspi_threads_run: pthread_create: {}",
                std::io::Error::from_raw_os_error(rc)
            );
            return Err(Code(GASPI_ERROR));
        }
        // Nobody joins it: its resources go when it returns.
        // SAFETY: `thread` was just created and is neither joined nor
        // detached yet.
        unsafe { libc::pthread_detach(thread) };
        Ok(())
    })
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_threads_register(tid: *mut gaspi_int) -> gaspi_return_t {
    entry("gaspi_threads_register", || {
        crate::non_null(tid)?;
        let (id, total) = {
            let mut p = pool();
            if p.announced == 0 {
                tracing::debug!("gaspi_threads_register: gaspi_threads_init(_user) was not called");
                return Err(Code(GASPI_ERROR));
            }
            if p.registered >= p.announced {
                tracing::debug!(
                    "gaspi_threads_register: all {} announced threads are registered",
                    p.announced
                );
                return Err(Code(GASPI_ERROR));
            }
            p.registered += 1;
            ((p.registered - 1) as gaspi_int, p.announced as gaspi_int)
        };
        ME.with(|m| m.set((id, total)));
        put(tid, id)
    })
}

/// One round of the barrier among the announced threads. The last thread
/// to arrive runs `last` (with the pool locked, so no thread of the next
/// round can arrive meanwhile) and every thread of the round returns its
/// result.
fn sync_round(last: impl FnOnce() -> gaspi_return_t) -> gaspi_return_t {
    let mut p = pool();
    if p.announced <= 1 {
        drop(p);
        return last();
    }
    p.arrived += 1;
    if p.arrived >= p.announced {
        p.result = last();
        p.arrived = 0;
        p.round = p.round.wrapping_add(1);
        ROUND_DONE.notify_all();
        return p.result;
    }
    let round = p.round;
    while p.round == round && p.announced != 0 {
        p = ROUND_DONE.wait(p).unwrap_or_else(PoisonError::into_inner);
    }
    p.result
}

#[no_mangle]
pub extern "C" fn gaspi_threads_sync() {
    let _ = entry("gaspi_threads_sync", || {
        sync_round(|| GASPI_SUCCESS);
        Ok(())
    });
}

#[no_mangle]
pub extern "C" fn gaspi_threads_sync_all(
    g: gaspi_group_t,
    timeout_ms: gaspi_timeout_t,
) -> gaspi_return_t {
    entry("gaspi_threads_sync_all", || {
        match sync_round(|| crate::collectives::gaspi_barrier(g, timeout_ms)) {
            GASPI_SUCCESS => Ok(()),
            code => Err(Code(code)),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;

    /// One test for the whole pool: it is process-global.
    #[test]
    fn registered_threads_get_ids_and_meet_in_every_round() {
        let mut tid = 7;
        // SAFETY: `tid` is a local out value.
        assert_eq!(unsafe { gaspi_threads_register(&mut tid) }, GASPI_ERROR);
        assert_eq!(gaspi_threads_init_user(0), GASPI_ERROR);
        assert_eq!(gaspi_threads_init_user(3), GASPI_SUCCESS);
        assert_eq!(gaspi_threads_init_user(3), GASPI_ERROR);
        let passed = Arc::new(AtomicU32::new(0));
        let threads: Vec<_> = (0..3)
            .map(|_| {
                let passed = passed.clone();
                std::thread::spawn(move || {
                    let (mut id, mut total) = (-1, -1);
                    // SAFETY: local out values.
                    unsafe {
                        assert_eq!(gaspi_threads_register(&mut id), GASPI_SUCCESS);
                        assert_eq!(gaspi_threads_get_total(&mut total), GASPI_SUCCESS);
                    }
                    assert_eq!(total, 3);
                    for round in 0..50 {
                        passed.fetch_add(1, Ordering::SeqCst);
                        gaspi_threads_sync();
                        // Every thread arrived in this round before any left.
                        assert_eq!(passed.load(Ordering::SeqCst), 3 * (round + 1));
                        gaspi_threads_sync();
                    }
                    id
                })
            })
            .collect();
        let mut ids: Vec<gaspi_int> = threads.into_iter().map(|t| t.join().unwrap()).collect();
        ids.sort();
        assert_eq!(ids, vec![0, 1, 2]);
        // A fourth registration is refused: it could never meet the others.
        // SAFETY: local out value.
        assert_eq!(unsafe { gaspi_threads_register(&mut tid) }, GASPI_ERROR);
        // sync_all's barrier needs gaspi_proc_init: every thread gets its code.
        let codes: Vec<_> = (0..3)
            .map(|_| std::thread::spawn(|| gaspi_threads_sync_all(0, GASPI_BLOCK)))
            .collect();
        for c in codes {
            assert_eq!(c.join().unwrap(), GASPI_ERR_NOINIT);
        }
        assert_eq!(gaspi_threads_term(), GASPI_SUCCESS);
        let mut cores = 0;
        // SAFETY: local out value.
        assert_eq!(unsafe { gaspi_threads_init(&mut cores) }, GASPI_SUCCESS);
        assert!(cores >= 1);
        assert_eq!(gaspi_threads_term(), GASPI_SUCCESS);
    }
}
