//! A rank that dies: the survivors learn of it, the launcher cleans up.

use gaspi_tests::{rank_bin, shm_files, Job};
use std::time::Duration;

/// SIGKILL's exit code as gaspi-run reports it.
const KILLED: i32 = 128 + 9;

fn survivors_see_the_death(ranks: u32, victim: u32, how: &str) {
    let before = shm_files();
    let out = Job::new(&rank_bin!(), ranks)
        .launcher_args(&["--keep-going"])
        .args(&[
            "dead-peer",
            "--victim",
            &victim.to_string(),
            "--how",
            how,
            "--keep-going",
        ])
        .run();
    out.assert_code(KILLED);
    assert_eq!(
        out.stdout_lines_with("ok survivor") as u32,
        ranks - 1,
        "not every survivor saw the death reported:\n{}",
        out.dump()
    );
    assert!(!out.stderr.contains("FAILED"), "{}", out.dump());
    out.assert_nothing_left(&before);
}

#[test]
fn with_keep_going_every_call_that_needs_a_rank_killed_by_sigkill_fails_naming_it_with_2_ranks() {
    survivors_see_the_death(2, 1, "self-kill");
}

#[test]
fn with_keep_going_every_call_that_needs_a_rank_killed_by_sigkill_fails_naming_it_when_rank_0_dies()
{
    survivors_see_the_death(4, 0, "self-kill");
}

#[test]
fn with_keep_going_every_call_that_needs_a_rank_killed_by_sigkill_fails_naming_it_with_8_ranks() {
    survivors_see_the_death(8, 5, "self-kill");
}

#[test]
fn a_rank_stopped_by_proc_kill_is_reported_dead_to_every_survivor() {
    survivors_see_the_death(4, 2, "proc-kill");
}

#[test]
fn without_keep_going_the_launcher_stops_the_job_when_a_rank_dies_and_leaves_nothing_behind() {
    let before = shm_files();
    // The survivors sleep 120 s: only the launcher can end them in time.
    let out = Job::new(&rank_bin!(), 4)
        .args(&["dead-peer", "--victim", "2"])
        .timeout(Duration::from_secs(60))
        .run();
    out.assert_code(KILLED);
    assert!(
        out.elapsed < Duration::from_secs(30),
        "the job took {:?}: the survivors were not stopped\n{}",
        out.elapsed,
        out.dump()
    );
    assert_eq!(
        out.stdout_lines_with("survivor: sleeping"),
        3,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn waiting_on_a_queue_whose_requests_completed_succeeds_after_the_target_terminated_in_order() {
    let out = Job::new(&rank_bin!(), 2)
        .args(&["wait-after-peer-term"])
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok wait after the peer's term"),
        1,
        "{}",
        out.dump()
    );
}

#[test]
fn a_writer_whose_target_dies_while_helping_copy_gets_an_error_naming_it_not_a_hang() {
    let before = shm_files();
    let out = Job::new(&rank_bin!(), 2)
        .launcher_args(&["--keep-going"])
        .args(&["assisted-copy-victim"])
        .env("GASPI_COPY_ASSIST_MIN", "65536")
        .env("GASPI_SPIN_US", "20000")
        .run();
    out.assert_code(KILLED);
    assert_eq!(
        out.stdout_lines_with("victim: the first block arrived intact"),
        1,
        "{}",
        out.dump()
    );
    assert_eq!(out.stdout_lines_with("ok writer:"), 1, "{}", out.dump());
    assert!(!out.stderr.contains("FAILED"), "{}", out.dump());
    out.assert_nothing_left(&before);
}
