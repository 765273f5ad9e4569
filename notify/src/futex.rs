//! The two futex calls the waiters need, on words that may live in memory
//! shared between processes (so the non-private futex operations).

use std::sync::atomic::AtomicU32;
use std::time::Duration;

/// Sleeps while `word` still holds `expected`, at most `timeout`.
///
/// Spurious returns are fine: every caller re-checks its condition.
pub fn wait(word: &AtomicU32, expected: u32, timeout: Duration) {
    let ts = libc::timespec {
        tv_sec: timeout.as_secs() as libc::time_t,
        tv_nsec: timeout.subsec_nanos() as libc::c_long,
    };
    // SAFETY: `word` is a valid, aligned u32 for the duration of the call
    // (a reference), and `ts` outlives the call. FUTEX_WAIT only reads the
    // word and compares it; it never writes user memory. Errors (EAGAIN when
    // the value changed, ETIMEDOUT, EINTR) all mean "go and re-check".
    unsafe {
        libc::syscall(
            libc::SYS_futex,
            word.as_ptr(),
            libc::FUTEX_WAIT,
            expected,
            &ts as *const libc::timespec,
        );
    }
}

/// Wakes every thread (of any process) sleeping on `word`.
pub fn wake_all(word: &AtomicU32) {
    // SAFETY: `word` is a valid aligned u32; FUTEX_WAKE does not access the
    // memory beyond using its address as the key.
    unsafe {
        libc::syscall(libc::SYS_futex, word.as_ptr(), libc::FUTEX_WAKE, i32::MAX);
    }
}
