//! Eight ranks on two cores: waiting must not burn a core.

use gaspi_tests::{rank_bin, shm_files, Job};
use std::time::Duration;

#[test]
fn eight_ranks_on_two_cores_finish_barriers_and_a_ring_promptly() {
    let before = shm_files();
    // 60 s is the hang guard, far above what a sleeping waiter needs; ranks
    // that spin instead of sleeping starve the ones they wait for.
    let out = Job::new(&rank_bin!(), 8)
        .args(&[
            "ring",
            "--rounds",
            "200",
            "--expect-size",
            "8",
            "--expect-launcher",
            "gaspi-run",
        ])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok ring of 200 rounds"),
        8,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn ranks_waiting_in_barrier_and_notify_waitsome_sleep_instead_of_burning_a_core() {
    let before = shm_files();
    // A spinning waiter would use about 2/8 of the wall time (8 ranks on 2
    // cores); a sleeping one close to nothing. The bound is 5%.
    let out = Job::new(&rank_bin!(), 8)
        .args(&[
            "idle-wait",
            "--sleep-ms",
            "1500",
            "--max-cpu-fraction",
            "0.1",
        ])
        .run();
    out.assert_success();
    assert_eq!(out.stdout_lines_with("ok idle wait"), 8, "{}", out.dump());
    out.assert_nothing_left(&before);
}
