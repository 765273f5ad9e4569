//! gaspi-run and self-launch: exit codes, output tags, Ctrl-C, job keys.

use gaspi_tests::{clean_env, free_port, fresh_tag, rank_bin, shm_files, Job, Running};
use std::process::Command;
use std::time::Duration;

#[test]
fn gaspi_run_returns_the_first_non_zero_exit_code_in_time_not_in_rank_order() {
    let before = shm_files();
    // Rank 2 exits 3 at once, rank 1 exits 5 later: 3 is the first.
    let out = Job::new(&rank_bin!(), 4)
        .launcher_args(&["--keep-going"])
        .args(&[
            "exit-code",
            "--fail-rank",
            "2",
            "--code",
            "3",
            "--late-rank",
            "1",
            "--late-code",
            "5",
            "--late-ms",
            "500",
        ])
        .run();
    out.assert_code(3);
    assert!(
        out.stdout.contains("rank 1: exiting with 5"),
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn gaspi_run_returns_the_failing_code_and_stops_the_other_ranks() {
    let before = shm_files();
    // Without --keep-going the rank that would exit 9 after 60 s is stopped.
    let out = Job::new(&rank_bin!(), 3)
        .args(&[
            "exit-code",
            "--fail-rank",
            "1",
            "--code",
            "7",
            "--late-rank",
            "0",
            "--late-code",
            "9",
            "--late-ms",
            "60000",
        ])
        .timeout(Duration::from_secs(50))
        .run();
    out.assert_code(7);
    assert!(!out.stdout.contains("exiting with 9"), "{}", out.dump());
    out.assert_nothing_left(&before);
}

#[test]
fn gaspi_run_returns_0_when_every_rank_succeeds() {
    let out = Job::new(&rank_bin!(), 3).args(&["hello"]).run();
    out.assert_code(0);
    assert_eq!(
        out.stdout_lines_with("hello from rank"),
        3,
        "{}",
        out.dump()
    );
}

#[test]
fn tag_output_prefixes_every_line_with_its_rank() {
    let n = 4;
    let out = Job::new(&rank_bin!(), n)
        .launcher_args(&["--tag-output"])
        .args(&["hello"])
        .run();
    out.assert_success();
    let mut seen = vec![0; n as usize];
    for line in out.stdout.lines().filter(|l| !l.is_empty()) {
        let (prefix, rest) = line
            .split_once("] ")
            .unwrap_or_else(|| panic!("untagged stdout line {line:?}:\n{}", out.dump()));
        let r: usize = prefix
            .strip_prefix('[')
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("bad tag in {line:?}"));
        assert_eq!(rest, format!("hello from rank {r} of {n}"), "line {line:?}");
        seen[r] += 1;
    }
    assert_eq!(seen, vec![1; n as usize], "{}", out.dump());
    for r in 0..n {
        assert!(
            out.stderr
                .lines()
                .any(|l| l == format!("[{r}] note from rank {r}")),
            "rank {r}'s stderr line is not tagged:\n{}",
            out.dump()
        );
    }
}

#[test]
fn output_is_not_prefixed_without_tag_output() {
    let out = Job::new(&rank_bin!(), 2).args(&["hello"]).run();
    out.assert_success();
    for r in 0..2 {
        assert!(
            out.stdout
                .lines()
                .any(|l| l == format!("hello from rank {r} of 2")),
            "{}",
            out.dump()
        );
    }
}

fn standalone(args: &[&str]) -> gaspi_tests::Outcome {
    let mut cmd = Command::new(rank_bin!());
    clean_env(&mut cmd);
    cmd.args(args);
    Running::spawn(cmd, &fresh_tag()).finish(Duration::from_secs(60))
}

#[test]
fn a_program_asking_for_standalone_ranks_launches_itself_without_gaspi_run() {
    let before = shm_files();
    let out = standalone(&["standalone", "--ranks", "3"]);
    out.assert_success();
    for r in 0..3 {
        assert_eq!(
            out.stdout_lines_with(&format!("standalone rank {r} of 3")),
            1,
            "{}",
            out.dump()
        );
    }
    out.assert_nothing_left(&before);
}

#[test]
fn a_self_launched_job_exits_with_the_code_of_its_failing_rank() {
    let out = standalone(&[
        "standalone",
        "--ranks",
        "2",
        "--fail-rank",
        "1",
        "--code",
        "7",
    ]);
    out.assert_code(7);
}

#[test]
fn ctrl_c_to_gaspi_run_stops_every_rank_and_leaves_nothing_behind() {
    let before = shm_files();
    let job = Job::new(&rank_bin!(), 4).args(&["sleep-forever"]);
    let mut running = job.spawn();
    running.wait_for_lines("ready", 4, Duration::from_secs(60));
    running.signal(libc::SIGINT);
    let out = running.finish(Duration::from_secs(90));
    out.assert_code(130);
    assert!(
        out.elapsed < Duration::from_secs(80),
        "the ranks were not stopped: {}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

/// The self-launch runs the launch crate's launcher inside the program,
/// with the handler of SIGINT / SIGTERM that the library installs itself
/// (no `cli` feature, no ctrlc): interrupted, it stops its ranks and
/// returns 130, as `gaspi-run` does.
#[test]
fn an_interrupted_self_launched_job_stops_every_rank_and_leaves_nothing_behind() {
    for sig in [libc::SIGINT, libc::SIGTERM] {
        let before = shm_files();
        let mut cmd = Command::new(rank_bin!());
        clean_env(&mut cmd);
        cmd.args(["sleep-forever", "--ranks", "3"]);
        let mut running = Running::spawn(cmd, &fresh_tag());
        running.wait_for_lines("ready", 3, Duration::from_secs(60));
        running.signal(sig);
        let out = running.finish(Duration::from_secs(90));
        out.assert_code(130);
        // Its own report, not the shell's 128 + SIGINT of a launcher killed
        // by the signal (whose ranks would die with it unstopped).
        assert!(
            out.stderr
                .contains("gaspi-run: interrupted, stopping 3 ranks"),
            "signal {sig}: the launcher did not stop the ranks itself: {}",
            out.dump()
        );
        assert!(
            out.elapsed < Duration::from_secs(80),
            "signal {sig}: the ranks were not stopped: {}",
            out.dump()
        );
        out.assert_nothing_left(&before);
    }
}

#[test]
fn a_rank_with_the_wrong_job_key_is_refused_at_the_rendezvous() {
    let before = shm_files();
    let port = free_port();
    let tag = fresh_tag();
    let rank = |r: u32, key: &str| {
        let mut cmd = Command::new(rank_bin!());
        clean_env(&mut cmd);
        cmd.env("GASPI_RANK", r.to_string())
            .env("GASPI_SIZE", "2")
            .env("GASPI_RENDEZVOUS", format!("127.0.0.1:{port}"))
            .env("GASPI_JOB_KEY", key)
            .env("GASPI_INIT_TIMEOUT_MS", "60000")
            .args(["ring", "--rounds", "2", "--expect-size", "2"]);
        Running::spawn(cmd, &tag)
    };
    let mut rank0 = rank(0, "the-right-key");
    let impostor = rank(1, "a-wrong-key").finish(Duration::from_secs(45));
    assert_ne!(
        impostor.code,
        0,
        "the impostor joined:\n{}",
        impostor.dump()
    );
    assert!(
        impostor.stderr.contains("Bootstrap("),
        "expected a bootstrap error:\n{}",
        impostor.dump()
    );
    assert_eq!(
        rank0.try_finish(),
        None,
        "rank 0 gave up after the impostor"
    );
    // The rendezvous is still open to the right rank 1.
    let rank1 = rank(1, "the-right-key").finish(Duration::from_secs(45));
    rank1.assert_success();
    let rank0 = rank0.finish(Duration::from_secs(60));
    rank0.assert_success();
    assert_eq!(
        rank0.stdout_lines_with("ok ring of 2 rounds"),
        1,
        "{}",
        rank0.dump()
    );
    rank0.assert_nothing_left(&before);
}

/// The rank named by the launcher's first `gaspi-run: rank R exited` report,
/// and whether that report calls it the first. The launcher writes each of
/// its lines at once, but a rank's line written piecemeal may surround it,
/// so it is looked for anywhere.
fn first_rank_exit_logged(stderr: &str) -> Option<(u32, bool)> {
    let (_, rest) = stderr.split_once("gaspi-run: rank ")?;
    let line = rest.lines().next()?;
    let (rank, what) = line.split_once(" exited")?;
    Some((rank.parse().ok()?, what.ends_with(" first")))
}

#[test]
fn gaspi_run_returns_the_code_of_the_rank_that_failed_first_when_the_others_fail_at_once() {
    // Rank 2 exits 3; the others exit 5 as soon as their barrier fails,
    // a few milliseconds later: the job's code is 3, every time.
    let before = shm_files();
    for run in 1..=5 {
        let out = Job::new(&rank_bin!(), 4)
            .args(&[
                "barrier-fail",
                "--fail-rank",
                "2",
                "--code",
                "3",
                "--others-code",
                "5",
            ])
            .run();
        assert_eq!(out.code, 3, "run {run}: wrong exit code:\n{}", out.dump());
        assert_eq!(
            first_rank_exit_logged(&out.stderr),
            Some((2, true)),
            "run {run}: the launcher did not name rank 2 first:\n{}",
            out.dump()
        );
        out.assert_nothing_left(&before);
    }
}
