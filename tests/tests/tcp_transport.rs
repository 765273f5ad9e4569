//! The TCP transport on one host: every rank reaches every other through
//! the progress engines over TCP (`GASPI_TRANSPORT=tcp`), and the same
//! scenarios that check the shared-memory transport must pass unchanged:
//! data movement and its ordering, reads and read notifications, lists,
//! atomics from every rank, passive messages, groups, collectives, bad
//! input refused, a dead peer named. Across real network namespaces:
//! `tcp_namespaces.rs`.

use gaspi_tests::{rank_bin, shm_files, Job};
use std::path::{Path, PathBuf};

fn model_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gaspi-model-rank"))
}

/// Runs `args` of `program` on `ranks` ranks over TCP; every rank must
/// succeed and print `ok`.
fn over_tcp(program: &Path, ranks: u32, args: &[&str], env: &[(&str, &str)]) {
    let before = shm_files();
    let mut job = Job::new(program, ranks)
        .env("GASPI_TRANSPORT", "tcp")
        .env("GASPI_LOG", "info")
        .args(args);
    for (k, v) in env {
        job = job.env(k, v);
    }
    let out = job.run();
    out.assert_success();
    assert!(
        out.stdout.lines().filter(|l| l.contains(" ok")).count() >= ranks as usize,
        "{}",
        out.dump()
    );
    // Every rank said it reaches every other over TCP.
    let tcp_line = format!("shm to 0 ranks, tcp to {} ranks", ranks - 1);
    assert_eq!(
        out.stderr.matches(&tcp_line).count(),
        ranks as usize,
        "not every rank used TCP:\n{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn all_to_all_blocks_arrive_whole_over_tcp() {
    over_tcp(&rank_bin!(), 4, &["all-to-all", "--rounds", "3"], &[]);
}

#[test]
fn ping_pong_over_tcp_with_8_ranks() {
    over_tcp(&rank_bin!(), 8, &["ping-pong", "--rounds", "50"], &[]);
}

#[test]
fn notifications_never_overtake_their_data_over_tcp() {
    over_tcp(&rank_bin!(), 4, &["ordering", "--iters", "20"], &[]);
}

#[test]
fn bad_input_is_refused_over_tcp() {
    over_tcp(
        &rank_bin!(),
        4,
        &["bad-inputs"],
        &[
            ("GASPI_QUEUE_NUM", "2"),
            ("GASPI_QUEUE_SIZE_MAX", "8"),
            ("GASPI_SEGMENT_MAX", "16"),
            ("GASPI_NOTIFICATION_NUM", "64"),
            ("GASPI_TRANSFER_SIZE_MAX", "65536"),
        ],
    );
    over_tcp(&rank_bin!(), 4, &["deleted-segment", "--iters", "10"], &[]);
}

#[test]
fn timeouts_and_barriers_over_tcp() {
    over_tcp(&rank_bin!(), 4, &["timeouts"], &[]);
    over_tcp(&rank_bin!(), 4, &["barrier-overtaken"], &[]);
    over_tcp(&rank_bin!(), 4, &["ring", "--rounds", "20"], &[]);
}

#[test]
fn the_rest_of_the_model_over_tcp() {
    for scenario in [
        "read-notify",
        "lists",
        "lists-bad",
        "queues",
        "fetch-add",
        "compare-swap",
        "groups",
        "allreduce",
        "resume",
        "passive",
    ] {
        over_tcp(&model_bin(), 4, &[scenario], &[]);
    }
}

#[test]
fn a_dead_peer_is_named_over_tcp() {
    let before = shm_files();
    let out = Job::new(&rank_bin!(), 4)
        .env("GASPI_TRANSPORT", "tcp")
        .launcher_args(&["--keep-going"])
        .args(&["dead-peer", "--victim", "2", "--keep-going"])
        .run();
    out.assert_code(128 + 9);
    assert_eq!(out.stdout_lines_with("ok survivor"), 3, "{}", out.dump());
    out.assert_nothing_left(&before);
}

#[test]
fn ranks_connect_on_first_use_and_news_of_a_death_reaches_those_never_connected() {
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_gaspi-fault-rank"));
    let before = shm_files();
    let out = Job::new(&bin, 8)
        .env("GASPI_TRANSPORT", "tcp")
        .launcher_args(&["--keep-going"])
        .args(&["first-use"])
        .run();
    out.assert_code(128 + 9);
    assert_eq!(out.stdout_lines_with("ok first-use"), 7, "{}", out.dump());
    // Of 8 ranks, rank 7's ring neighbours and barrier partners are 0, 1,
    // 3, 5, 6: ranks 2 and 4 never sent to it nor it to them, and learnt
    // of its death from rank 0.
    assert!(
        out.stdout_lines_with("without being connected") >= 2,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}
