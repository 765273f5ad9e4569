//! Barriers at the end of a job.

use gaspi_tests::{rank_bin, Job};

/// The most common ending of a program: a barrier, then `term`. A rank that
/// leaves the barrier first and terminates must not make the barrier fail on
/// the ranks still in it (they all entered it). Ten jobs of 8 ranks on 2
/// cores give the slow ranks every chance to be overtaken.
#[test]
fn ranks_that_terminate_right_after_the_last_barrier_do_not_make_it_fail_for_the_others() {
    let mut failed = Vec::new();
    for _ in 0..10 {
        let out = Job::new(&rank_bin!(), 8)
            .args(&["barrier-then-term", "--rounds", "3"])
            .run();
        if out.code != 0 {
            failed.push(out.dump());
        }
    }
    assert!(
        failed.is_empty(),
        "{} of 10 jobs failed; the first:\n{}",
        failed.len(),
        failed[0]
    );
}

/// Deterministic form of the above: ranks 3 and 1 complete the barrier and
/// terminate while rank 2 still waits for rank 0, which entered the barrier
/// with `Timeout::Test` and resumes it 1 s later.
#[test]
fn a_barrier_completes_on_every_rank_even_when_some_leave_it_and_terminate_early() {
    let out = Job::new(&rank_bin!(), 4).args(&["barrier-overtaken"]).run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok barrier completed"),
        4,
        "{}",
        out.dump()
    );
}

/// Many barriers in a row stay in step on 2, 4 and 8 ranks.
#[test]
fn consecutive_barriers_stay_in_step_with_2_4_and_8_ranks() {
    for n in [2, 4, 8] {
        let out = Job::new(&rank_bin!(), n)
            .args(&["ring", "--rounds", "50", "--expect-size", &n.to_string()])
            .run();
        out.assert_success();
        assert_eq!(
            out.stdout_lines_with("ok ring of 50 rounds") as u32,
            n,
            "{}",
            out.dump()
        );
    }
}
