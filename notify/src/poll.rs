//! The innermost polling loop of a waiter, in a form whose speed does not
//! depend on where the compiler happens to place it.
//!
//! Why this exists: on the 2-core x86 machines of this project, the
//! shared-memory ping-pong's half round trip moved between ~0.175 us and
//! ~0.200 us with unrelated edits elsewhere in the runtime (one
//! `black_box` in a statistics call was enough), and building with
//! `-C llvm-args=-align-loops=64` made every variant fast. The loop that
//! spins on a notification word sits on the critical path of every
//! message: when the peer's store invalidates the line, the core throws
//! away its speculative loads and refetches the loop, and a loop that
//! straddles fetch blocks comes back slower. Rust cannot align one loop,
//! so on x86-64 the loop is written in assembly behind a `.p2align 6`;
//! elsewhere it is the plain Rust loop.

use std::sync::atomic::{AtomicU32, Ordering};

/// Polls `word` up to `polls` times (at least once), with a pause before
/// each read; returns the first non-zero value seen, or 0.
///
/// The read that returns a non-zero value is an acquire: what the writer
/// stored before its release store of the word is visible afterwards.
///
/// ```
/// use std::sync::atomic::AtomicU32;
/// let w = AtomicU32::new(0);
/// assert_eq!(gaspi_notify::poll::poll_word(&w, 16), 0);
/// w.store(7, std::sync::atomic::Ordering::Release);
/// assert_eq!(gaspi_notify::poll::poll_word(&w, 16), 7);
/// ```
#[inline]
pub fn poll_word(word: &AtomicU32, polls: u32) -> u32 {
    #[cfg(target_arch = "x86_64")]
    {
        let value: u32;
        // SAFETY: the assembly only reads the 4 aligned bytes of `word`
        // (an AtomicU32 we borrow, so valid for reads) and writes the two
        // registers declared as outputs. An aligned 4-byte `mov` is atomic
        // on x86-64 and, under x86's ordering (TSO), no later load is
        // performed before it, so it acts as an acquire load; the block is
        // not `nomem`/`pure`, so the compiler neither caches nor moves
        // memory accesses across it. `pause` has no effect on state.
        unsafe {
            std::arch::asm!(
                ".p2align 6",
                "2:",
                "pause",
                "mov {value:e}, dword ptr [{word}]",
                "test {value:e}, {value:e}",
                "jnz 3f",
                "dec {polls:e}",
                "jnz 2b",
                "3:",
                word = in(reg) word.as_ptr(),
                polls = inout(reg) polls.max(1) => _,
                value = out(reg) value,
                options(nostack, readonly),
            );
        }
        // The load above was an acquire in hardware; this makes it one for
        // the compiler too (later reads are not hoisted above it).
        std::sync::atomic::compiler_fence(Ordering::Acquire);
        value
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        for _ in 0..polls.max(1) {
            std::hint::spin_loop();
            let v = word.load(Ordering::Acquire);
            if v != 0 {
                return v;
            }
        }
        0
    }
}
