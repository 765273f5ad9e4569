//! The PMIx bootstrap under a real PMIx server: Open MPI's `mpirun` (its
//! daemon runs one) starts ranks of the test program, which write and
//! notify between every pair and check the data. In a build with the
//! feature `gaspi/pmix` every rank's start-up line must name the PMIx
//! bootstrap; in a build without it, the ranks must still start (from
//! Open MPI's variables, our own rendezvous) and the line must say that a
//! PMIx server was there but this build has no PMIx bootstrap (decision
//! 0084). `srun --mpi=pmix` is in `slurm.rs`, two hosts in
//! `ssh_launch.rs`. Skipped with a printed reason without Open MPI.

use gaspi_tests::{clean_env, pmix_expectation, rank_bin, shm_files, skip, Running};
use std::path::Path;
use std::process::Command;
use std::time::Duration;

/// `mpirun -n N PROGRAM ARGS` on this host, as root, oversubscribed.
fn mpirun(n: u32, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new("/usr/bin/mpirun");
    clean_env(&mut cmd);
    cmd.env("GASPI_LOG", "info")
        .args([
            "--allow-run-as-root",
            "--oversubscribe",
            "--bind-to",
            "none",
        ])
        .args(["-n", &n.to_string()])
        .args(["-x", "GASPI_LOG", "-x", gaspi_tests::TAG_VAR]);
    for (k, v) in env {
        cmd.env(k, v).args(["-x", k]);
    }
    cmd.arg(rank_bin!()).args(args);
    cmd
}

#[test]
fn mpirun_starts_ranks_through_pmix_that_write_to_every_rank() {
    let name = "mpirun_starts_ranks_through_pmix_that_write_to_every_rank";
    if !Path::new("/usr/bin/mpirun").exists() {
        return skip(
            name,
            "Open MPI's mpirun is not installed (apt-get install openmpi-bin)",
        );
    }
    let (says, launcher) = pmix_expectation("open-mpi");
    if !gaspi_launch::PMIX_BUILT {
        eprintln!(
            "{name}: this build has no feature gaspi/pmix: checking the fallback to Open MPI's \
             variables"
        );
    }
    let before = shm_files();
    let n = 6;
    let tag = gaspi_tests::fresh_tag();
    let out = Running::spawn(
        mpirun(
            n,
            &[
                "ring",
                "--rounds",
                "5",
                "--expect-size",
                &n.to_string(),
                "--expect-launcher",
                launcher,
            ],
            &[],
        ),
        &tag,
    )
    .finish(Duration::from_secs(120));
    out.assert_success();
    for r in 0..n {
        assert_eq!(
            out.stdout_lines_with(&format!("ok ring of 5 rounds, rank {r} of {n}")),
            1,
            "{}",
            out.dump()
        );
    }
    out.assert_every_rank_says(n as usize, says);
    out.assert_nothing_left(&before);

    // Every rank writes checked blocks to every other (each endpoint
    // fetched on first use) and reads them back.
    let tag = gaspi_tests::fresh_tag();
    let out = Running::spawn(mpirun(n, &["all-to-all", "--rounds", "2"], &[]), &tag)
        .finish(Duration::from_secs(120));
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok all-to-all"),
        n as usize,
        "{}",
        out.dump()
    );
    out.assert_every_rank_says(n as usize, says);
    out.assert_nothing_left(&before);
}

#[test]
fn gaspi_bootstrap_own_under_mpirun_uses_our_rendezvous_and_says_why() {
    let name = "gaspi_bootstrap_own_under_mpirun_uses_our_rendezvous_and_says_why";
    if !Path::new("/usr/bin/mpirun").exists() {
        return skip(
            name,
            "Open MPI's mpirun is not installed (apt-get install openmpi-bin)",
        );
    }
    let before = shm_files();
    let keys = gaspi_tests::TempDir::new("pmix-own");
    let key = keys.path().join("job.key");
    let key = key.to_string_lossy();
    let n = 3;
    let tag = gaspi_tests::fresh_tag();
    let out = Running::spawn(
        mpirun(
            n,
            &[
                "ring",
                "--rounds",
                "3",
                "--expect-size",
                &n.to_string(),
                "--expect-launcher",
                "open-mpi",
            ],
            &[("GASPI_BOOTSTRAP", "own"), ("GASPI_KEY_FILE", &key)],
        ),
        &tag,
    )
    .finish(Duration::from_secs(120));
    out.assert_success();
    let why = match gaspi_launch::PMIX_BUILT {
        true => "a PMIx server started this process, but GASPI_BOOTSTRAP=own",
        false => "a PMIx server started this process, but this build has no PMIx bootstrap",
    };
    assert_eq!(out.stderr_lines_with(why), n as usize, "{}", out.dump());
    assert_eq!(
        out.stderr_lines_with("bootstrap gaspi rendezvous"),
        n as usize,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

/// The check that a job whose rank 0 is slow to start still
/// starts, under the PMIx bootstrap (`startup_scale.rs` has it for our own
/// rendezvous): 12 ranks under `mpirun`, a start-up tree of fan-out 2 (so
/// of several levels), rank 0 stopped with SIGSTOP for a second as soon as
/// its process exists. Every rank must start through PMIx, run its ring
/// and end. Skipped without Open MPI or without the feature `gaspi/pmix`.
#[test]
fn mpirun_pmix_job_whose_rank_0_is_stopped_for_a_second_at_start_still_starts() {
    let name = "mpirun_pmix_job_whose_rank_0_is_stopped_for_a_second_at_start_still_starts";
    if !Path::new("/usr/bin/mpirun").exists() {
        return skip(
            name,
            "Open MPI's mpirun is not installed (apt-get install openmpi-bin)",
        );
    }
    if !gaspi_launch::PMIX_BUILT {
        return skip(
            name,
            "this build has no feature gaspi/pmix, so no PMIx bootstrap to stop rank 0 under \
             (startup_scale.rs covers our own rendezvous)",
        );
    }
    let (says, launcher) = pmix_expectation("open-mpi");
    let before = shm_files();
    let n = 12;
    let tag = gaspi_tests::fresh_tag();
    let running = Running::spawn(
        mpirun(
            n,
            &[
                "ring",
                "--rounds",
                "3",
                "--expect-size",
                &n.to_string(),
                "--expect-launcher",
                launcher,
            ],
            &[("GASPI_STARTUP_FANOUT", "2"), ("GASPI_BOOTSTRAP", "pmix")],
        ),
        &tag,
    );
    gaspi_tests::stop_for_a_second(&tag, "OMPI_COMM_WORLD_RANK=0", Duration::from_secs(30));
    let out = running.finish(Duration::from_secs(120));
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok ring of 3 rounds") as usize,
        n as usize,
        "{}",
        out.dump()
    );
    out.assert_every_rank_says(n as usize, says);
    out.assert_nothing_left(&before);
}
