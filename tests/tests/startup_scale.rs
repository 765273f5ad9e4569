//! Start-up without a star through rank 0 (issue 43, decision 0065): the
//! start barrier over a tree, endpoints fetched from rank 0's directory on
//! first use. The jobs here are small, with the tree's fan-out and the
//! whole-table limit lowered (`GASPI_STARTUP_FANOUT`,
//! `GASPI_ENDPOINTS_EAGER_MAX`) so that they take the paths of a large job:
//! a tree of several levels, every endpoint but the tree's looked up.

use gaspi_tests::{rank_bin, shm_files, Job, Outcome};
use std::time::Duration;

/// SIGKILL's exit code as gaspi-run reports it.
const KILLED: i32 = 128 + 9;

/// A job that takes the large-job paths with `ranks` ranks: fan-out 2 (a
/// tree of several levels), no whole table.
fn tree_job(ranks: u32) -> Job {
    Job::new(&rank_bin!(), ranks)
        .env("GASPI_STARTUP_FANOUT", "2")
        .env("GASPI_ENDPOINTS_EAGER_MAX", "0")
}

/// Runs `job` (a ring) with its rank 0 stopped for a second as soon as it
/// exists; the job must start and end cleanly all the same.
fn ring_with_rank0_stopped(job: Job, ranks: u32) -> Outcome {
    let before = shm_files();
    let job = job.args(&["ring", "--rounds", "3", "--expect-size", &ranks.to_string()]);
    let tag = job.tag.clone();
    let running = job.spawn();
    gaspi_tests::stop_for_a_second(&tag, "GASPI_RANK=0", Duration::from_secs(20));
    let out = running.finish(Duration::from_secs(60));
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok ring of 3 rounds") as u32,
        ranks,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
    out
}

#[test]
fn a_job_whose_rank_0_is_stopped_for_a_second_at_start_still_starts() {
    ring_with_rank0_stopped(Job::new(&rank_bin!(), 4), 4);
}

#[test]
fn a_tree_job_whose_rank_0_is_stopped_for_a_second_at_start_still_starts() {
    ring_with_rank0_stopped(tree_job(12), 12);
}

#[test]
fn a_tree_job_with_endpoints_on_first_use_moves_data_between_every_pair_and_says_its_bootstrap() {
    let before = shm_files();
    let out = tree_job(9)
        .env("GASPI_LOG", "info")
        .args(&["all-to-all", "--rounds", "3"])
        .run();
    out.assert_success();
    let lines = out
        .stderr
        .lines()
        .filter(|l| {
            l.contains(
                "bootstrap gaspi rendezvous (endpoints on first use from rank 0, tree fan-out 2)",
            )
        })
        .count();
    assert_eq!(lines, 9, "every rank names its bootstrap:\n{}", out.dump());
    out.assert_nothing_left(&before);
}

#[test]
fn a_small_job_gets_the_whole_table_and_says_so() {
    let out = Job::new(&rank_bin!(), 3)
        .env("GASPI_LOG", "info")
        .args(&["ring", "--rounds", "2"])
        .run();
    out.assert_success();
    assert_eq!(
        out.stderr
            .matches("bootstrap gaspi rendezvous (whole table, tree fan-out 16)")
            .count(),
        3,
        "{}",
        out.dump()
    );
}

fn survivors_see_the_death_in_a_tree_job(ranks: u32, victim: u32) {
    let before = shm_files();
    let out = tree_job(ranks)
        .launcher_args(&["--keep-going"])
        .args(&[
            "dead-peer",
            "--victim",
            &victim.to_string(),
            "--how",
            "self-kill",
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
fn news_of_a_death_inside_the_tree_reaches_every_survivor() {
    // Rank 2 is an inner rank of the tree (children 5 and 6).
    survivors_see_the_death_in_a_tree_job(8, 2);
}

#[test]
fn news_of_rank_0s_death_reaches_every_survivor_of_a_tree_job() {
    survivors_see_the_death_in_a_tree_job(8, 0);
}
