//! Bad input is refused with a typed error before anything changes.

use gaspi_tests::{clean_env, fresh_tag, rank_bin, shm_files, Job, Running};
use std::process::Command;
use std::time::Duration;

fn bad_inputs(ranks: u32) {
    let before = shm_files();
    let out = Job::new(&rank_bin!(), ranks)
        .args(&["bad-inputs"])
        .env("GASPI_QUEUE_NUM", "2")
        .env("GASPI_QUEUE_SIZE_MAX", "8")
        .env("GASPI_SEGMENT_MAX", "16")
        .env("GASPI_NOTIFICATION_NUM", "64")
        .env("GASPI_TRANSFER_SIZE_MAX", "65536")
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok bad inputs refused, nothing changed") as u32,
        ranks,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn every_bad_input_is_refused_with_its_typed_error_and_changes_nothing_with_2_ranks() {
    bad_inputs(2);
}

#[test]
fn every_bad_input_is_refused_with_its_typed_error_and_changes_nothing_with_4_ranks() {
    bad_inputs(4);
}

fn deleted_segment(ranks: u32) {
    let out = Job::new(&rank_bin!(), ranks)
        .args(&["deleted-segment", "--iters", "30"])
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok deleted segments refused") as u32,
        ranks,
        "{}",
        out.dump()
    );
}

#[test]
fn a_peer_segment_deleted_before_a_barrier_is_unknown_after_it_with_2_ranks() {
    deleted_segment(2);
}

#[test]
fn a_peer_segment_deleted_before_a_barrier_is_unknown_after_it_with_4_ranks() {
    deleted_segment(4);
}

/// Runs the rank program directly (no launcher) with `env`.
fn direct(args: &[&str], env: &[(&str, &str)]) -> gaspi_tests::Outcome {
    let mut cmd = Command::new(rank_bin!());
    clean_env(&mut cmd);
    cmd.args(args);
    for (k, v) in env {
        cmd.env(k, v);
    }
    Running::spawn(cmd, &fresh_tag()).finish(Duration::from_secs(30))
}

#[test]
fn invalid_configurations_are_refused_at_init_and_a_valid_one_runs_alone() {
    let out = direct(&["bad-config"], &[]);
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok invalid configurations refused"),
        1,
        "{}",
        out.dump()
    );
}

#[test]
fn an_unreadable_gaspi_setting_in_the_environment_is_refused() {
    let out = direct(
        &["bad-config", "--expect-env-error"],
        &[("GASPI_QUEUE_SIZE_MAX", "lots")],
    );
    out.assert_success();
    assert!(
        out.stdout.contains("GASPI_QUEUE_SIZE_MAX"),
        "{}",
        out.dump()
    );
}

#[test]
fn an_unreadable_gpu_batch_setting_in_the_environment_is_refused() {
    let out = direct(
        &["bad-config", "--expect-env-error"],
        &[("GASPI_GPU_BATCH_MIN", "64k")],
    );
    out.assert_success();
    assert!(out.stdout.contains("GASPI_GPU_BATCH_MIN"), "{}", out.dump());
}

#[test]
fn a_gaspi_run_rank_without_a_rendezvous_address_is_refused() {
    let out = direct(
        &["bad-config", "--expect-env-error"],
        &[
            ("GASPI_RANK", "1"),
            ("GASPI_SIZE", "2"),
            ("GASPI_JOB_KEY", "k"),
        ],
    );
    out.assert_success();
    assert!(out.stdout.contains("GASPI_RENDEZVOUS"), "{}", out.dump());
}
