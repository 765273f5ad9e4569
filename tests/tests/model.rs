//! The rest of the GASPI model, each call tested through real jobs of
//! `gaspi-model-rank` (one subcommand per scenario, `bin/model_rank.rs`)
//! started by `gaspi-run` with 2, 4 and 8 ranks. Every scenario checks its
//! own results inside the ranks and exits non-zero when anything is wrong.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

fn rank_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gaspi-model-rank"))
}

/// `gaspi-run` of the same profile as the rank program; built with cargo
/// when it is not there yet.
fn launcher() -> PathBuf {
    static L: OnceLock<PathBuf> = OnceLock::new();
    L.get_or_init(|| {
        let bin = rank_bin();
        let dir = bin.parent().expect("a parent directory");
        let launcher = dir.join("gaspi-run");
        if !launcher.exists() {
            let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
            let mut cmd = Command::new(cargo);
            cmd.args([
                "build",
                "--quiet",
                "-p",
                "gaspi-launch",
                "--bin",
                "gaspi-run",
            ]);
            if dir.file_name().is_some_and(|n| n == "release") {
                cmd.arg("--release");
            }
            if let Some(target) = dir.parent() {
                cmd.arg("--target-dir").arg(target);
            }
            let ok = cmd.status().map(|s| s.success()).unwrap_or(false);
            assert!(ok && launcher.exists(), "could not build gaspi-run");
        }
        launcher
    })
    .clone()
}

/// Runs `scenario` on `ranks` ranks; panics with the job's output unless
/// every rank succeeded.
fn job(ranks: u32, scenario: &str, args: &[&str]) -> String {
    run(ranks, scenario, args, false)
}

/// Runs a job whose ranks may fail (one is killed); returns its output.
fn job_keep_going(ranks: u32, scenario: &str) -> String {
    run(ranks, scenario, &[], true)
}

fn run(ranks: u32, scenario: &str, args: &[&str], keep_going: bool) -> String {
    let mut cmd = Command::new(launcher());
    if keep_going {
        cmd.arg("--keep-going");
    }
    for (k, _) in std::env::vars_os() {
        if k.to_string_lossy().starts_with("GASPI_") {
            cmd.env_remove(&k);
        }
    }
    let out = cmd
        .args([
            "-n",
            &ranks.to_string(),
            "--tag-output",
            "--timeout",
            "120",
            "--",
        ])
        .arg(rank_bin())
        .arg(scenario)
        .args(args)
        .output()
        .expect("starting gaspi-run");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        keep_going || out.status.success(),
        "{scenario} on {ranks} ranks failed ({}):\n{text}",
        out.status
    );
    text
}

macro_rules! on_ranks {
    ($name:ident, $scenario:literal, [$($n:literal),*]) => {
        #[test]
        fn $name() {
            for n in [$($n),*] {
                job(n, $scenario, &[]);
            }
        }
    };
}

on_ranks!(
    read_notify_sets_the_local_word_after_the_data,
    "read-notify",
    [2, 4]
);
on_ranks!(
    list_variants_move_every_element_to_its_place,
    "lists",
    [2, 4, 8]
);
on_ranks!(list_calls_refuse_bad_input_before_writing, "lists-bad", [2]);
on_ranks!(queues_are_created_deleted_and_purged, "queues", [2]);
on_ranks!(fetch_add_from_every_rank_sums_exactly, "fetch-add", [2, 8]);
on_ranks!(
    compare_swap_elects_exactly_one_winner,
    "compare-swap",
    [2, 4, 8]
);
on_ranks!(
    groups_with_holes_commit_barrier_and_reduce,
    "groups",
    [2, 4, 8]
);
on_ranks!(
    allreduce_matches_the_sequential_reference,
    "allreduce",
    [2, 4, 8]
);
on_ranks!(collectives_resume_after_timeout_test, "resume", [2, 4, 8]);
on_ranks!(
    passive_messages_arrive_whole_and_in_order,
    "passive",
    [2, 4, 8]
);

#[test]
fn the_state_vector_marks_a_killed_rank() {
    for n in [2u32, 4] {
        let out = job_keep_going(n, "kill");
        for r in 0..n - 1 {
            assert!(
                out.contains(&format!("rank {r} saw Rank({}) corrupt", n - 1)),
                "rank {r} did not see the kill:\n{out}"
            );
        }
        assert!(!out.contains("still alive"), "{out}");
    }
}
