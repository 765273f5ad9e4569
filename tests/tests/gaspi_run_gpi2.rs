//! `gaspi_run`: GPI-2's launcher command line (`-m MACHINEFILE [-n N]
//! PROGRAM ARGS`) over this runtime's launcher. A machinefile that names
//! only this host (one line per rank, `localhost` or the host's own name)
//! starts the ranks locally.

use gaspi_tests::{clean_env, gpi2_launcher, rank_bin, shm_files, TempDir};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Runs `gaspi_run ARGS`; kills it (and fails the test) after 60 s.
fn gaspi_run(args: &[&str]) -> Output {
    let mut cmd = Command::new(gpi2_launcher(&rank_bin!()));
    clean_env(&mut cmd);
    let mut child = cmd
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("starting gaspi_run");
    let deadline = Instant::now() + Duration::from_secs(60);
    while child.try_wait().expect("waiting").is_none() {
        if Instant::now() > deadline {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collecting");
            panic!("gaspi_run {args:?} did not finish within 60 s: {out:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().expect("collecting")
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

fn machinefile(dir: &Path, lines: &[&str]) -> String {
    let path = dir.join("machinefile");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    path.to_string_lossy().into_owned()
}

#[test]
fn a_local_machinefile_starts_one_rank_per_line_or_the_first_n() {
    let before = shm_files();
    let dir = TempDir::new("gaspi_run");
    let rank = rank_bin!();
    let rank = rank.to_str().unwrap();
    // GPI-2's form: the host repeated once per rank, comments allowed.
    let m = machinefile(
        dir.path(),
        &["# three ranks", "localhost", "localhost", "localhost"],
    );
    let out = gaspi_run(&["-m", &m, rank, "hello"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    for r in 0..3 {
        assert!(
            stdout.contains(&format!("hello from rank {r} of 3")),
            "{stdout}"
        );
    }
    let out = gaspi_run(&["-m", &m, "-n", "2", rank, "hello"]);
    assert!(out.status.success(), "{out:?}");
    let stdout = text(&out.stdout);
    assert_eq!(stdout.matches(" of 2").count(), 2, "{stdout}");
    assert!(!stdout.contains(" of 3"), "{stdout}");
    // -N is accepted (ignored, with a note).
    let out = gaspi_run(&["-N", "-m", &m, "-n", "1", rank, "hello"]);
    assert!(out.status.success(), "{out:?}");
    assert!(text(&out.stdout).contains("hello from rank 0 of 1"));
    assert!(text(&out.stderr).contains("-N (NUMA pinning) ignored"));
    // The host's own name counts as local too.
    let own = nix::unistd::gethostname().unwrap();
    let own = own.to_string_lossy();
    let m2 = machinefile(dir.path(), &[&own, &own]);
    let out = gaspi_run(&["-m", &m2, rank, "hello"]);
    assert!(out.status.success(), "{out:?}");
    assert_eq!(text(&out.stdout).matches(" of 2").count(), 2, "{out:?}");
    assert_eq!(shm_files(), before, "shared memory left behind");
}

#[test]
fn bad_gpi2_command_lines_are_refused_with_the_reason() {
    let dir = TempDir::new("gaspi_run_bad");
    let rank = rank_bin!();
    let rank = rank.to_str().unwrap();
    let m = machinefile(dir.path(), &["localhost", "localhost"]);
    for (args, why) in [
        (vec!["-m", &m, "-n", "3", rank, "hello"], "lists 2 ranks"),
        (
            vec!["-m", &m, "-n", "0", rank, "hello"],
            "not a positive number",
        ),
        (
            vec!["-m", &m, "-b", "x", rank, "hello"],
            "-b (another binary",
        ),
        (vec!["-m", &m, "-d", rank, "hello"], "-d (rank 0 under gdb)"),
        (vec![rank, "hello"], "a machinefile (-m) is required"),
        (vec!["-m", &m], "no program given"),
        (vec!["-m", "/nonexistent/machinefile", rank], "machinefile"),
        (vec!["-x", "-m", &m, rank], "unknown option -x"),
    ] {
        let out = gaspi_run(&args);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {out:?}");
        let stderr = text(&out.stderr);
        assert!(stderr.contains(why), "{args:?}: {stderr}");
        assert!(text(&out.stdout).is_empty(), "{args:?}: nothing may run");
    }
}
