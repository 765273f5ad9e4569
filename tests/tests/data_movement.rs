//! Data arrives intact and notifications never overtake their data.

use gaspi_tests::{rank_bin, shm_files, Job};

/// Runs `args` on `ranks` ranks through gaspi-run; every rank must print
/// `ok_line` once and nothing may be left behind.
fn run(ranks: u32, args: &[&str], ok_line: &str, expect_ok: u32) {
    let before = shm_files();
    let out = Job::new(&rank_bin!(), ranks).args(args).run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with(ok_line) as u32,
        expect_ok,
        "not every rank reported {ok_line:?}:\n{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn all_to_all_write_notify_delivers_every_random_block_intact_with_2_ranks() {
    run(
        2,
        &["all-to-all", "--rounds", "5"],
        "ok all-to-all: 5 blocks",
        2,
    );
}

#[test]
fn all_to_all_write_notify_delivers_every_random_block_intact_with_4_ranks() {
    run(
        4,
        &["all-to-all", "--rounds", "4"],
        "ok all-to-all: 12 blocks",
        4,
    );
}

#[test]
fn all_to_all_write_notify_delivers_every_random_block_intact_with_8_ranks() {
    run(
        8,
        &["all-to-all", "--rounds", "3", "--max-block", "16384"],
        "ok all-to-all: 21 blocks",
        8,
    );
}

#[test]
fn ping_pong_returns_every_byte_intact_with_2_ranks() {
    run(2, &["ping-pong", "--rounds", "300"], "ok ping-pong with", 2);
}

#[test]
fn ping_pong_returns_every_byte_intact_in_pairs_of_4_ranks() {
    run(4, &["ping-pong", "--rounds", "200"], "ok ping-pong with", 4);
}

#[test]
fn ping_pong_returns_every_byte_intact_in_pairs_of_8_ranks() {
    run(8, &["ping-pong", "--rounds", "100"], "ok ping-pong with", 8);
}

#[test]
fn a_notification_is_never_visible_before_its_payload_with_1_writer() {
    run(
        2,
        &["ordering", "--iters", "60"],
        "ok ordering: 60 messages verified",
        1,
    );
}

#[test]
fn a_notification_is_never_visible_before_its_payload_with_3_writers_to_one_target() {
    run(
        4,
        &["ordering", "--iters", "40"],
        "ok ordering: 120 messages verified",
        1,
    );
}

#[test]
fn a_notification_is_never_visible_before_its_payload_with_7_writers_to_one_target() {
    run(
        8,
        &["ordering", "--iters", "25"],
        "ok ordering: 175 messages verified",
        1,
    );
}

/// Runs the assisted-copy scenario with `env`; both ranks must report ok.
fn assisted_copy(env: &[(&str, &str)], args: &[&str]) {
    let before = shm_files();
    let mut job = Job::new(&rank_bin!(), 2)
        .args(&["assisted-copy"])
        .args(args);
    for (k, v) in env {
        job = job.env(k, v);
    }
    let out = job.run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok assisted-copy:"),
        2,
        "not every rank reported ok:\n{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn large_writes_copied_with_the_waiting_targets_help_arrive_intact() {
    // A long spin keeps the waiters awake (helping) where they get a core;
    // how much they helped is reported, not asserted (a busy machine may
    // not run them in time; bench/ab-copy-assist.sh measures it).
    assisted_copy(
        &[
            ("GASPI_COPY_ASSIST_MIN", "65536"),
            ("GASPI_SPIN_US", "20000"),
        ],
        &[],
    );
}

#[test]
fn with_assisted_copies_off_nobody_helps_and_large_writes_arrive_intact() {
    assisted_copy(
        &[("GASPI_COPY_ASSIST_MIN", "0"), ("GASPI_SPIN_US", "20000")],
        &["--assist-off"],
    );
}

/// Runs the assisted-copy-stalled scenario with the helper's stall `how`
/// (`sigstop`, or `until` a file rank 0 creates once it waits for rank 1).
fn assisted_copy_stalled(how: &str) {
    let before = shm_files();
    let dir = gaspi_tests::TempDir::new("stalled-helper");
    let how = match how {
        "until" => format!("until:{}", dir.path().join("release").display()),
        other => other.to_string(),
    };
    let out = Job::new(&rank_bin!(), 2)
        .args(&["assisted-copy-stalled"])
        .env("GASPI_COPY_ASSIST_MIN", "65536")
        .env("GASPI_SPIN_US", "20000")
        .env("GASPI_TEST_HELPER_STALL", &how)
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok stalled target:"),
        2,
        "not every rank reported ok:\n{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

/// The helper's thread stalls mid-chunk until the writer no longer needs
/// it: the writer takes the chunk back and copies it itself (a writer that
/// waited for its helper would hang until the job's hang guard).
#[test]
fn a_writer_whose_helper_stalls_mid_chunk_copies_the_chunk_itself() {
    assisted_copy_stalled("until");
}

#[test]
fn a_writer_whose_target_is_stopped_by_sigstop_mid_chunk_does_not_wait_for_it() {
    assisted_copy_stalled("sigstop");
}
