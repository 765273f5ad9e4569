//! Debian's Slurm for real: a slurmctld and a slurmd started by the test
//! (one node, `auth/none`, inside a network namespace of its own so that
//! its ports cannot meet another test's), and `srun -n 4` running a job of
//! ranks that find each other from Slurm's variables alone, then the same
//! for a C program linked against the GPI-2 compatible `libGPI2.so`
//! (where a C compiler exists). Needs root,
//! iproute2 and slurm-wlm: skipped with a printed reason where they are
//! missing.

use gaspi_tests::{
    capi_library, clean_env, compile_c, rank_bin, shm_files, skip, NetNamespaces, Running, TempDir,
};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The daemons, killed when dropped.
struct Daemons(Vec<Child>);

impl Drop for Daemons {
    fn drop(&mut self) {
        for d in &mut self.0 {
            let _ = d.kill();
            let _ = d.wait();
        }
    }
}

/// The one node's configuration, shared with the start-up benchmark
/// (`bench/slurm-node.sh`): `tests/slurm/slurm.conf.in` with the daemons'
/// directory and a node of 4 CPUs.
fn slurm_conf(dir: &Path) -> String {
    include_str!("../slurm/slurm.conf.in")
        .replace("@DIR@", &dir.display().to_string())
        .replace("@CPUS@", "4")
}

#[test]
fn srun_starts_four_ranks_that_meet_and_run_a_ring() {
    let name = "srun_starts_four_ranks_that_meet_and_run_a_ring";
    for tool in [
        "/usr/sbin/slurmctld",
        "/usr/sbin/slurmd",
        "/usr/bin/srun",
        "/usr/bin/nsenter",
    ] {
        if !Path::new(tool).exists() {
            return skip(
                name,
                &format!("{tool} is missing (apt-get install slurm-wlm)"),
            );
        }
    }
    let host = match NetNamespaces::create(1) {
        Ok(h) => h,
        Err(why) => return skip(name, &why),
    };
    let dir = TempDir::new("slurm");
    let d = dir.path();
    for sub in ["state", "spool"] {
        std::fs::create_dir_all(d.join(sub)).expect("creating slurm's directories");
    }
    let conf = d.join("slurm.conf");
    std::fs::write(&conf, slurm_conf(d)).expect("writing slurm.conf");
    // In the host's network namespace but not through `ip netns exec`,
    // which mounts a sysfs of its own and so hides /sys/fs/cgroup, which
    // slurmd needs.
    let in_host = |program: &str| -> Command {
        let mut cmd = Command::new("nsenter");
        cmd.arg(format!("--net=/run/netns/{}", host.names[0]))
            .arg(program);
        cmd
    };
    let daemon = |program: &str, extra: &[&str]| -> Child {
        let mut cmd = in_host(program);
        cmd.args(["-D", "-f"])
            .arg(&conf)
            .args(extra)
            .env("SLURM_CONF", &conf)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        cmd.spawn()
            .unwrap_or_else(|e| panic!("starting {program}: {e}"))
    };
    let mut daemons = Daemons(vec![daemon("/usr/sbin/slurmctld", &["-i"])]);
    daemons
        .0
        .push(daemon("/usr/sbin/slurmd", &["-N", "localhost"]));
    // The node registers with the controller within a few seconds.
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        let state = in_host("/usr/bin/sinfo")
            .args(["-h", "-o", "%T"])
            .env("SLURM_CONF", &conf)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        if state == "idle" {
            break;
        }
        if Instant::now() >= until {
            let log = |f: &str| std::fs::read_to_string(d.join(f)).unwrap_or_default();
            panic!(
                "the slurm node is {state:?}, not idle\n--- slurmctld.log ---\n{}\n--- slurmd.log ---\n{}",
                log("slurmctld.log"),
                log("slurmd.log")
            );
        }
        std::thread::sleep(Duration::from_millis(200));
    }
    let before = shm_files();
    let tag = gaspi_tests::fresh_tag();
    let mut cmd = in_host("/usr/bin/srun");
    clean_env(&mut cmd);
    cmd.env("SLURM_CONF", &conf)
        .env("GASPI_KEY_FILE", d.join("job.key"))
        .args(["-n", "4", "--mpi=none", "--kill-on-bad-exit=1"])
        .arg(rank_bin!())
        .args([
            "ring",
            "--rounds",
            "5",
            "--expect-size",
            "4",
            "--expect-launcher",
            "slurm",
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
    out.assert_nothing_left(&before);

    // srun --mpi=pmix: Slurm's PMIx plugin serves the ranks, which take
    // rank, size and endpoints from it in a build with the feature
    // gaspi/pmix, and fall back to Slurm's variables (saying so) without
    // it (decision 0084).
    srun_mpi_pmix(&in_host, &conf, d, &before);

    // A GASPI program in C, unchanged, under srun as well.
    if Command::new("cc").arg("--version").output().is_err() {
        skip(
            "srun_starts_four_ranks_that_meet_and_run_a_ring (C part)",
            "no C compiler (cc) on this machine",
        );
        drop(daemons);
        return;
    }
    let lib = capi_library(&rank_bin!());
    for so in ["libGPI2.so", "libGPI2.so.0"] {
        std::os::unix::fs::symlink(&lib, d.join(so)).expect("symlink");
    }
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("capi/pingpong.c");
    let program = d.join("pingpong");
    compile_c("cc", "-std=c11", &source, d, &program).unwrap_or_else(|e| panic!("{e}"));
    let tag = gaspi_tests::fresh_tag();
    let mut cmd = in_host("/usr/bin/srun");
    clean_env(&mut cmd);
    cmd.env("SLURM_CONF", &conf)
        .env("GASPI_KEY_FILE", d.join("job.key"))
        .env("GASPI_LOG", "info")
        .args(["-n", "3", "--mpi=none", "--kill-on-bad-exit=1"])
        .arg(&program);
    let out = Running::spawn(cmd, &tag).finish(Duration::from_secs(120));
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("200 rounds checked"),
        3,
        "{}",
        out.dump()
    );
    let by_slurm = out
        .stderr
        .lines()
        .filter(|l| l.contains("launcher Slurm"))
        .count();
    assert_eq!(
        by_slurm,
        3,
        "each rank must see Slurm's launch:\n{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
    drop(daemons);
}

/// `srun --mpi=pmix -n 4`: a ring and an all-to-all whose every rank's
/// start-up line names the PMIx bootstrap (or, in a build without it, the
/// fallback). Skipped with a printed reason where Slurm has no PMIx plugin.
fn srun_mpi_pmix(
    in_host: &dyn Fn(&str) -> Command,
    conf: &Path,
    d: &Path,
    before: &std::collections::BTreeSet<std::path::PathBuf>,
) {
    let name = "srun_starts_four_ranks_that_meet_and_run_a_ring (PMIx part)";
    let plugins = in_host("/usr/bin/srun")
        .arg("--mpi=list")
        .env("SLURM_CONF", conf)
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout).into_owned() + &String::from_utf8_lossy(&o.stderr)
        })
        .unwrap_or_default();
    if !plugins.contains("pmix") {
        return skip(
            name,
            &format!("Slurm has no PMIx plugin (srun --mpi=list: {plugins:?})"),
        );
    }
    let (says, launcher) = gaspi_tests::pmix_expectation("slurm");
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
        let mut cmd = in_host("/usr/bin/srun");
        clean_env(&mut cmd);
        cmd.env("SLURM_CONF", conf)
            .env("GASPI_KEY_FILE", d.join("job.key"))
            .env("GASPI_LOG", "info")
            .args(["-n", "4", "--mpi=pmix", "--kill-on-bad-exit=1"])
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
        out.assert_nothing_left(before);
    }
}
