//! Ranks started by other launchers (Slurm, Open MPI, PMI) find each other
//! from their environment alone, without gaspi-run.

use gaspi_tests::{clean_env, fresh_tag, rank_bin, run_all, shm_files, Outcome, TempDir};
use std::os::unix::fs::PermissionsExt;
use std::process::Command;
use std::time::Duration;

/// Starts `n` ranks, rank `r` with the variables `vars(r, job_id)` and a key
/// file in a fresh directory, each running a ring that checks its identity.
/// Retries with another job id when the port derived from it was taken.
fn launch(n: u32, launcher: &str, vars: impl Fn(u32, &str) -> Vec<(String, String)>) {
    let before = shm_files();
    for attempt in 1..=3 {
        let dir = TempDir::new(launcher);
        let key = dir.path().join("keys").join("job.key");
        let job_id = format!("{}", rand::random::<u32>());
        let tag = fresh_tag();
        let cmds = (0..n)
            .map(|r| {
                let mut cmd = Command::new(rank_bin!());
                clean_env(&mut cmd);
                cmd.env("GASPI_KEY_FILE", &key);
                for (k, v) in vars(r, &job_id) {
                    cmd.env(k, v);
                }
                let (r, n) = (r.to_string(), n.to_string());
                cmd.args([
                    "ring",
                    "--rounds",
                    "5",
                    "--expect-size",
                    &n,
                    "--expect-rank",
                    &r,
                    "--expect-local-rank",
                    &r,
                    "--expect-launcher",
                    launcher,
                ]);
                cmd
            })
            .collect();
        let outs: Vec<Outcome> = run_all(cmds, &tag, Duration::from_secs(90));
        let port_taken = outs[0].code != 0 && outs[0].stderr.contains("binding the rendezvous");
        if port_taken && attempt < 3 {
            eprintln!("the derived rendezvous port was taken; retrying with another job id");
            continue;
        }
        for (r, o) in outs.iter().enumerate() {
            o.assert_success();
            assert_eq!(
                o.stdout_lines_with(&format!("ok ring of 5 rounds, rank {r} of {n}")),
                1,
                "{}",
                o.dump()
            );
            o.assert_nothing_left(&before);
        }
        let mode = std::fs::metadata(&key)
            .expect("the ranks created the key file")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the key file is readable by others");
        return;
    }
}

fn vars(pairs: &[(&str, String)]) -> Vec<(String, String)> {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect()
}

#[test]
fn ranks_started_with_slurm_variables_meet_and_run_a_ring() {
    let n = 4;
    launch(n, "slurm", |r, job| {
        vars(&[
            ("SLURM_PROCID", r.to_string()),
            ("SLURM_NTASKS", n.to_string()),
            ("SLURM_LOCALID", r.to_string()),
            ("SLURM_LAUNCH_NODE_IPADDR", "127.0.0.1".into()),
            ("SLURM_JOB_ID", job.into()),
            ("SLURM_STEP_ID", "0".into()),
        ])
    });
}

#[test]
fn ranks_started_with_open_mpi_variables_meet_and_run_a_ring() {
    let n = 3;
    launch(n, "open-mpi", |r, job| {
        vars(&[
            ("OMPI_COMM_WORLD_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_SIZE", n.to_string()),
            ("OMPI_COMM_WORLD_LOCAL_RANK", r.to_string()),
            ("OMPI_COMM_WORLD_LOCAL_SIZE", n.to_string()),
            ("OMPI_MCA_ess_base_jobid", job.into()),
        ])
    });
}

#[test]
fn ranks_started_with_pmi_variables_meet_and_run_a_ring() {
    let n = 2;
    launch(n, "pmi", |r, job| {
        vars(&[
            ("PMI_RANK", r.to_string()),
            ("PMI_SIZE", n.to_string()),
            ("MPI_LOCALNRANKS", n.to_string()),
            ("MPI_LOCALRANKID", r.to_string()),
            ("PMI_KVSNAME", format!("kvs_{job}_0")),
        ])
    });
}

#[test]
fn open_mpi_ranks_on_several_hosts_without_a_rendezvous_address_are_refused() {
    let dir = TempDir::new("ompi-multi");
    let mut cmd = Command::new(rank_bin!());
    clean_env(&mut cmd);
    cmd.env("GASPI_KEY_FILE", dir.path().join("job.key"))
        .env("OMPI_COMM_WORLD_RANK", "0")
        .env("OMPI_COMM_WORLD_SIZE", "2")
        .env("OMPI_COMM_WORLD_LOCAL_RANK", "0")
        .env("OMPI_COMM_WORLD_LOCAL_SIZE", "1")
        .env("OMPI_MCA_ess_base_jobid", "77")
        .args(["ring"]);
    let out = run_all(vec![cmd], &fresh_tag(), Duration::from_secs(30)).remove(0);
    assert_ne!(out.code, 0, "{}", out.dump());
    assert!(
        out.stderr.contains("Config(") && out.stderr.contains("GASPI_RENDEZVOUS"),
        "expected a configuration error naming GASPI_RENDEZVOUS:\n{}",
        out.dump()
    );
}
