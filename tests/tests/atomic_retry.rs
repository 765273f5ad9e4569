//! Atomics repeated while they time out apply once (issue 23, decision 0029).
//!
//! GASPI programs repeat a call while it returns `GASPI_TIMEOUT`; GPI-2's
//! `fetch_add_test` does it with `GASPI_TEST`. Over TCP an atomic that
//! timed out used to be applied anyway and the repeat applied it again (or
//! a `Test` loop never completed). Four ranks add to a counter on every
//! rank with `fetch_add` and with a compare-and-swap loop, every call
//! `Timeout::Test` and repeated while it times out; every counter must end
//! at exactly the number of increments.

use gaspi_tests::{rank_bin, shm_files, Job};
use std::time::Duration;

fn run(env: &[(&str, &str)], extra: &[&str]) {
    let before = shm_files();
    let mut job = Job::new(&rank_bin!(), 4)
        .args(&["atomic-retry", "--count", "50"])
        .args(extra)
        .timeout(Duration::from_secs(60));
    for (k, v) in env {
        job = job.env(k, v);
    }
    let out = job.run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok atomic retry"),
        4,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn atomics_repeated_while_they_time_out_over_tcp_apply_once() {
    run(&[("GASPI_TRANSPORT", "tcp")], &["--expect-timeouts"]);
}

#[test]
fn atomics_on_bound_memory_repeated_while_they_time_out_apply_once() {
    // Bound memory cannot be mapped: same-host atomics go to the owner.
    run(&[], &["--bound", "--expect-timeouts"]);
}

#[test]
fn atomics_on_shared_memory_in_a_test_loop_apply_once() {
    // Mapped words: hardware atomics, which never time out.
    run(&[], &[]);
}
