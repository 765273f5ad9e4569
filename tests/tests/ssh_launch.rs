//! `gaspi-run -m HOSTFILE` over real ssh: an sshd in each of two network
//! namespaces ("hosts"), a key made for the test, the launcher started on
//! host 0 as a user would on a login node. Needs root, iproute2 and
//! openssh-server: skipped with a printed reason where they are missing.

use gaspi_tests::{
    clean_env, gaspi_run, gpi2_launcher, leftover_processes, rank_bin, shm_files, skip,
    wait_no_leftovers, NetNamespaces, Outcome, Running, Sshd, TempDir,
};
use std::process::Command;
use std::time::{Duration, Instant};

/// Two hosts with an sshd each, and a hostfile giving each 2 slots.
struct Cluster {
    hosts: NetNamespaces,
    sshd: Sshd,
    _dir: TempDir,
    hostfile: std::path::PathBuf,
}

fn cluster(test: &str) -> Option<Cluster> {
    let hosts = match NetNamespaces::create(2) {
        Ok(h) => h,
        Err(why) => {
            skip(test, &why);
            return None;
        }
    };
    let sshd = match Sshd::start(&hosts) {
        Ok(s) => s,
        Err(why) => {
            skip(test, &why);
            return None;
        }
    };
    let dir = TempDir::new("hostfile");
    let hostfile = dir.path().join("hosts");
    std::fs::write(
        &hostfile,
        format!(
            "# two hosts of the test\n{} slots=2\n\n{}:2   # the second\n",
            hosts.addrs[0], hosts.addrs[1]
        ),
    )
    .expect("writing the hostfile");
    Some(Cluster {
        hosts,
        sshd,
        _dir: dir,
        hostfile,
    })
}

impl Cluster {
    /// `gaspi-run -m hostfile -n 4 --tag-output ARGS`, run on host 0.
    fn gaspi_run(&self, launcher_args: &[&str], args: &[&str]) -> Command {
        let mut cmd = self.hosts.command(0, &gaspi_run(&rank_bin!()));
        clean_env(&mut cmd);
        cmd.env("GASPI_SSH", self.sshd.ssh_command())
            .env("GASPI_LOG", "info")
            .arg("-m")
            .arg(&self.hostfile)
            .args(["-n", "4", "--tag-output"])
            .args(launcher_args)
            .arg(rank_bin!())
            .args(args);
        cmd
    }
}

/// The tagged lines of rank `r` in `text`.
fn lines_of(text: &str, r: u32) -> Vec<&str> {
    let prefix = format!("[{r}] ");
    text.lines().filter(|l| l.starts_with(&prefix)).collect()
}

#[test]
fn gaspi_run_m_starts_ranks_on_two_hosts_over_ssh() {
    let Some(c) = cluster("gaspi_run_m_starts_ranks_on_two_hosts_over_ssh") else {
        return;
    };
    let before = shm_files();
    for args in [
        vec!["all-to-all", "--rounds", "3"],
        vec![
            "ring",
            "--rounds",
            "5",
            "--expect-size",
            "4",
            "--expect-launcher",
            "gaspi-run",
        ],
    ] {
        let tag = gaspi_tests::fresh_tag();
        let out: Outcome =
            Running::spawn(c.gaspi_run(&[], &args), &tag).finish(Duration::from_secs(120));
        out.assert_success();
        for r in 0..4 {
            // Two ranks a host: shared memory to the other of its host,
            // TCP to the two of the other host.
            let logs = lines_of(&out.stderr, r);
            assert!(
                logs.iter()
                    .any(|l| l.contains(&format!("GASPI rank {r} of 4"))
                        && l.contains("shm to 1 ranks, tcp to 2 ranks")),
                "rank {r} does not report shm to 1 and tcp to 2 ranks:\n{}",
                out.dump()
            );
        }
        if args[0] == "ring" {
            for r in 0..4 {
                assert_eq!(
                    lines_of(&out.stdout, r)
                        .iter()
                        .filter(|l| l.contains(&format!("ok ring of 5 rounds, rank {r} of 4")))
                        .count(),
                    1,
                    "{}",
                    out.dump()
                );
            }
        }
        out.assert_nothing_left(&before);
    }
}

#[test]
fn a_rank_killed_on_the_remote_host_fails_the_job_with_its_code_and_nothing_is_left() {
    let name = "a_rank_killed_on_the_remote_host_fails_the_job_with_its_code_and_nothing_is_left";
    let Some(c) = cluster(name) else {
        return;
    };
    let before = shm_files();
    let tag = gaspi_tests::fresh_tag();
    // Rank 3 (on host 1) kills itself with SIGKILL; the survivors would
    // sleep 120 s and exit 3 unless the launcher stops them first.
    let out = Running::spawn(c.gaspi_run(&[], &["dead-peer", "--victim", "3"]), &tag)
        .finish(Duration::from_secs(90));
    out.assert_code(128 + libc::SIGKILL);
    assert!(
        out.elapsed < Duration::from_secs(60),
        "the launcher did not stop the survivors:\n{}",
        out.dump()
    );
    assert!(
        out.stderr.contains("rank 3 exited with code 137 first"),
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn a_killed_launcher_leaves_no_rank_on_any_host() {
    let Some(c) = cluster("a_killed_launcher_leaves_no_rank_on_any_host") else {
        return;
    };
    let tag = gaspi_tests::fresh_tag();
    // Rank 0 sleeps 60 s; the others wait for it in a barrier.
    let mut job = Running::spawn(
        c.gaspi_run(&[], &["idle-wait", "--sleep-ms", "60000"]),
        &tag,
    );
    // Every rank and its agent are up: 4 ranks, 4 agents, carrying the
    // job's tag (forwarded, as every GASPI_* variable is).
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let procs = leftover_processes(&tag);
        let starts = |what: &std::path::Path| {
            let what = what.to_string_lossy().into_owned();
            procs.iter().filter(move |(_, cmd)| cmd.starts_with(&what))
        };
        let ranks = starts(&rank_bin!()).count();
        let agents = starts(&gaspi_run(&rank_bin!()))
            .filter(|(_, cmd)| cmd.contains(" --agent "))
            .count();
        if ranks == 4 && agents == 4 {
            break;
        }
        assert!(
            Instant::now() < until,
            "the ranks did not all start: {procs:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    // The launcher (ip netns exec execs it) dies without a word.
    job.signal(libc::SIGKILL);
    let t = Instant::now();
    let left = wait_no_leftovers(&tag, Duration::from_secs(15));
    assert!(
        left.is_empty(),
        "left behind after the launcher died: {left:?}"
    );
    eprintln!(
        "every remote rank gone {:?} after the launcher was killed",
        t.elapsed()
    );
    // Its own exit may still be under way on a loaded machine.
    let until = Instant::now() + Duration::from_secs(10);
    let code = loop {
        match job.try_finish() {
            Some(code) => break Some(code),
            None if Instant::now() < until => std::thread::sleep(Duration::from_millis(20)),
            None => break None,
        }
    };
    assert_eq!(code, Some(128 + libc::SIGKILL));
}

#[test]
fn open_mpi_mpirun_starts_ranks_on_two_hosts_without_gaspi_run() {
    let name = "open_mpi_mpirun_starts_ranks_on_two_hosts_without_gaspi_run";
    if !std::path::Path::new("/usr/bin/mpirun").exists() {
        return skip(
            name,
            "Open MPI's mpirun is not installed (apt-get install openmpi-bin)",
        );
    }
    let Some(c) = cluster(name) else {
        return;
    };
    let before = shm_files();
    let keys = TempDir::new("ompi-key");
    let tag = gaspi_tests::fresh_tag();
    let (a, b) = (c.hosts.addrs[0], c.hosts.addrs[1]);
    let mut cmd = c.hosts.command(0, std::path::Path::new("/usr/bin/mpirun"));
    clean_env(&mut cmd);
    // Open MPI launches its daemon on host 1 with this ssh command; the
    // ranks find rank 0's rendezvous from GASPI_RENDEZVOUS and share the
    // key file of the (common) file system.
    cmd.env("GASPI_KEY_FILE", keys.path().join("job.key"))
        .env("GASPI_LOG", "info")
        .args(["--allow-run-as-root", "-n", "4", "--host"])
        .arg(format!("{a}:2,{b}:2"))
        .args(["--mca", "plm_rsh_agent"])
        .arg(c.sshd.ssh_command())
        .args(["-x", &format!("GASPI_RENDEZVOUS={a}:47123")])
        // Open MPI's variables and our own rendezvous, even in a build
        // with the PMIx bootstrap (which has a test of its own below).
        .args(["-x", "GASPI_BOOTSTRAP=own"])
        .args(["-x", "GASPI_KEY_FILE", "-x", "GASPI_LOG"])
        .args(["-x", gaspi_tests::TAG_VAR])
        .arg(rank_bin!())
        .args([
            "ring",
            "--rounds",
            "5",
            "--expect-size",
            "4",
            "--expect-launcher",
            "open-mpi",
        ]);
    let out = Running::spawn(cmd, &tag).finish(Duration::from_secs(120));
    out.assert_success();
    for r in 0..4 {
        assert_eq!(
            out.stdout_lines_with(&format!("ok ring of 5 rounds, rank {r} of 4")),
            1,
            "{}",
            out.dump()
        );
    }
    let mixed = out
        .stderr
        .lines()
        .filter(|l| l.contains("launcher OpenMpi") && l.contains("shm to 1 ranks, tcp to 2 ranks"))
        .count();
    assert_eq!(
        mixed,
        4,
        "every rank must reach 1 by shm and 2 by tcp:\n{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

/// Open MPI's mpirun across the two hosts, its daemons' PMIx servers
/// serving the ranks: in a build with the feature gaspi/pmix they take
/// rank, size, job key and endpoints from PMIx (no rendezvous address, no
/// key file used), each start-up line names the PMIx bootstrap, and every
/// rank writes checked blocks to every other across the hosts. Without
/// the feature they fall back to Open MPI's variables and the given
/// rendezvous, and say so (decision 0084).
#[test]
fn mpirun_across_two_hosts_starts_ranks_through_pmix() {
    let name = "mpirun_across_two_hosts_starts_ranks_through_pmix";
    if !std::path::Path::new("/usr/bin/mpirun").exists() {
        return skip(
            name,
            "Open MPI's mpirun is not installed (apt-get install openmpi-bin)",
        );
    }
    let Some(c) = cluster(name) else {
        return;
    };
    let (says, launcher) = gaspi_tests::pmix_expectation("open-mpi");
    let before = shm_files();
    let keys = TempDir::new("ompi-pmix-key");
    let (a, b) = (c.hosts.addrs[0], c.hosts.addrs[1]);
    for args in [
        &[
            "ring",
            "--rounds",
            "5",
            "--expect-size",
            "4",
            "--expect-launcher",
            launcher,
        ][..],
        &["all-to-all", "--rounds", "2"][..],
    ] {
        let tag = gaspi_tests::fresh_tag();
        let mut cmd = c.hosts.command(0, std::path::Path::new("/usr/bin/mpirun"));
        clean_env(&mut cmd);
        cmd.env("GASPI_KEY_FILE", keys.path().join("job.key"))
            .env("GASPI_LOG", "info")
            .args(["--allow-run-as-root", "-n", "4", "--host"])
            .arg(format!("{a}:2,{b}:2"))
            .args(["--mca", "plm_rsh_agent"])
            .arg(c.sshd.ssh_command())
            // Read only by the fallback (a build without gaspi/pmix).
            .args(["-x", &format!("GASPI_RENDEZVOUS={a}:47125")])
            .args(["-x", "GASPI_KEY_FILE", "-x", "GASPI_LOG"])
            .args(["-x", gaspi_tests::TAG_VAR])
            .arg(rank_bin!())
            .args(args);
        let out = Running::spawn(cmd, &tag).finish(Duration::from_secs(120));
        out.assert_success();
        let ok = match args[0] {
            "ring" => "ok ring of 5 rounds",
            _ => "ok all-to-all",
        };
        assert_eq!(out.stdout_lines_with(ok), 4, "{}", out.dump());
        out.assert_every_rank_says(4, says);
        out.assert_nothing_left(&before);
    }
}

#[test]
fn ctrl_c_and_timeout_stop_every_remote_rank_and_leave_nothing() {
    let Some(c) = cluster("ctrl_c_and_timeout_stop_every_remote_rank_and_leave_nothing") else {
        return;
    };
    let before = shm_files();
    let tag = gaspi_tests::fresh_tag();
    let mut job = Running::spawn(c.gaspi_run(&[], &["sleep-forever"]), &tag);
    job.wait_for_lines("ready", 4, Duration::from_secs(60));
    job.signal(libc::SIGINT);
    let out = job.finish(Duration::from_secs(60));
    out.assert_code(130);
    assert!(
        out.elapsed < Duration::from_secs(40),
        "the ranks were not stopped:\n{}",
        out.dump()
    );
    out.assert_nothing_left(&before);

    let tag = gaspi_tests::fresh_tag();
    let out = Running::spawn(c.gaspi_run(&["--timeout", "3"], &["sleep-forever"]), &tag)
        .finish(Duration::from_secs(60));
    out.assert_code(124);
    assert!(out.stderr.contains("job timed out"), "{}", out.dump());
    assert_eq!(out.stdout_lines_with("ready"), 4, "{}", out.dump());
    out.assert_nothing_left(&before);
}

#[test]
fn a_host_that_ssh_cannot_reach_fails_the_job_at_once() {
    let Some(c) = cluster("a_host_that_ssh_cannot_reach_fails_the_job_at_once") else {
        return;
    };
    let before = shm_files();
    let tag = gaspi_tests::fresh_tag();
    // Nothing listens on port 2222: ssh to host 1 fails (host 0, where
    // the launcher runs, starts its ranks without ssh), so ranks 2 and 3
    // never start and the job fails with ssh's code.
    let mut cmd = c.gaspi_run(&[], &["ring"]);
    cmd.env("GASPI_SSH", format!("{} -p 2222", c.sshd.ssh_command()));
    let out = Running::spawn(cmd, &tag).finish(Duration::from_secs(60));
    out.assert_code(255);
    assert!(out.stderr.contains("Connection refused"), "{}", out.dump());
    assert!(out.elapsed < Duration::from_secs(20), "{}", out.dump());
    out.assert_nothing_left(&before);
}

#[test]
fn gpi2s_gaspi_run_with_a_machinefile_of_repeated_hosts_starts_ranks_on_both() {
    let name = "gpi2s_gaspi_run_with_a_machinefile_of_repeated_hosts_starts_ranks_on_both";
    let Some(c) = cluster(name) else {
        return;
    };
    let before = shm_files();
    // GPI-2's machinefile: one line per rank, a host repeated.
    let machinefile = c._dir.path().join("machinefile");
    let (a, b) = (&c.hosts.addrs[0], &c.hosts.addrs[1]);
    std::fs::write(&machinefile, format!("{a}\n{a}\n{b}\n{b}\n")).unwrap();
    // gaspi_run needs gaspi-run beside it (the remote agent).
    gaspi_run(&rank_bin!());
    let mut cmd = c.hosts.command(0, &gpi2_launcher(&rank_bin!()));
    clean_env(&mut cmd);
    cmd.env("GASPI_SSH", c.sshd.ssh_command())
        .env("GASPI_LOG", "info")
        .arg("-m")
        .arg(&machinefile)
        .arg(rank_bin!())
        .args(["ring", "--rounds", "3", "--expect-size", "4"]);
    let tag = gaspi_tests::fresh_tag();
    let out: Outcome = Running::spawn(cmd, &tag).finish(Duration::from_secs(120));
    out.assert_success();
    for r in 0..4 {
        assert_eq!(
            out.stdout
                .lines()
                .filter(|l| l.contains(&format!("ok ring of 3 rounds, rank {r} of 4")))
                .count(),
            1,
            "{}",
            out.dump()
        );
    }
    // Two ranks on each host: each reaches one rank by shared memory.
    assert_eq!(
        out.stderr.matches("shm to 1 ranks, tcp to 2 ranks").count(),
        4,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

/// `gaspi-run -m` run on host 0 with a hostfile naming host 0 (by its
/// address) and host 1: host 0's ranks start there without ssh, host 1's
/// over ssh (the ssh command logs each destination it is given).
#[test]
fn this_hosts_entries_of_a_hostfile_start_without_ssh_and_the_others_over_it() {
    let name = "this_hosts_entries_of_a_hostfile_start_without_ssh_and_the_others_over_it";
    let Some(c) = cluster(name) else {
        return;
    };
    let dir = TempDir::new("ssh-log");
    let log = dir.path().join("destinations");
    let wrapper = dir.path().join("ssh");
    std::fs::write(
        &wrapper,
        format!(
            "#!/bin/sh\n# The destination is the first word that is not an option.\nfor a in \"$@\"; do case \"$a\" in -*) ;; *) echo \"$a\" >> {log}; break;; esac; done\nexec {ssh} \"$@\"\n",
            log = log.display(),
            ssh = c.sshd.ssh_command()
        ),
    )
    .expect("writing the ssh wrapper");
    {
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755))
            .expect("making the wrapper executable");
    }
    let mut cmd = c.gaspi_run(&[], &["ring", "--rounds", "3", "--expect-size", "4"]);
    // The wrapper takes the options itself (they are in it, before "$@").
    cmd.env("GASPI_SSH", &wrapper);
    let out = Running::spawn(cmd, &gaspi_tests::fresh_tag()).finish(Duration::from_secs(120));
    out.assert_success();
    let used = std::fs::read_to_string(&log).unwrap_or_default();
    let dests: Vec<&str> = used.lines().collect();
    assert_eq!(
        dests,
        vec![c.hosts.addrs[1].to_string(); 2],
        "ssh was asked for {dests:?}; host 0 ({}) must start its ranks itself:\n{}",
        c.hosts.addrs[0],
        out.dump()
    );
}
