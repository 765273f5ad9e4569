//! Every blocking call honours its timeout; collectives resume after one.

use gaspi_tests::{rank_bin, shm_files, Job};

fn timeouts(ranks: u32) {
    let before = shm_files();
    let out = Job::new(&rank_bin!(), ranks).args(&["timeouts"]).run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok timeouts") as u32,
        ranks,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn test_and_millisecond_timeouts_return_on_time_and_the_barrier_resumes_with_2_ranks() {
    timeouts(2);
}

#[test]
fn test_and_millisecond_timeouts_return_on_time_and_the_barrier_resumes_with_4_ranks() {
    timeouts(4);
}
