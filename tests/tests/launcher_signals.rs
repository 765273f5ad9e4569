//! The launcher interrupted (issue 24): `gaspi-run` sent SIGTERM or SIGINT
//! at any moment of a TCP job stops its ranks and exits, promptly, with
//! nothing left; and a hostfile of this host alone needs no ssh.

use gaspi_tests::{rank_bin, shm_files, Job, TempDir};
use std::time::{Duration, Instant};

/// A TCP job of two ranks, signalled 50 times in every phase of its life:
/// at once (the launcher still starting its ranks), a few milliseconds
/// in (the ranks starting up and meeting), while both sit in the job
/// (after both said `ready`), the moment one rank ends (its last line
/// printed, its `term` under way) and at delays spread over a short job.
/// Half the time the launcher alone gets the signal, half its whole
/// process group (as `timeout` sends it), SIGTERM and SIGINT in turn.
/// Every time the launcher exits and leaves no process and no
/// shared-memory file. Before the fix it could stay behind after its last
/// rank had ended, polling without a pause, for good.
///
/// The launcher gives interrupted ranks 500 ms before SIGKILL and exits
/// within a second; the bound checked here is far looser (a loaded 2-core
/// machine may not run it for a while): a hang is what it catches.
#[test]
fn a_tcp_job_interrupted_in_any_phase_stops_and_its_launcher_exits_leaving_nothing() {
    let before = shm_files();
    let mut slowest = Duration::ZERO;
    for k in 0..50u32 {
        let sleeping = k % 5 == 2;
        let args: &[&str] = if sleeping {
            &["sleep-forever"]
        } else {
            &["ring", "--rounds", "20"]
        };
        let mut running = Job::new(&rank_bin!(), 2)
            .env("GASPI_TRANSPORT", "tcp")
            .args(args)
            .spawn();
        let phase = match k % 5 {
            0 => "starting".to_string(),
            1 => {
                std::thread::sleep(Duration::from_millis(u64::from(k)));
                format!("{k} ms in")
            }
            2 => {
                running.wait_for_lines("ready", 2, Duration::from_secs(60));
                "running".to_string()
            }
            3 => {
                running.wait_for_lines("ok ring", 1, Duration::from_secs(60));
                "ending".to_string()
            }
            _ => {
                let ms = u64::from(k) * 6;
                std::thread::sleep(Duration::from_millis(ms));
                format!("{ms} ms in")
            }
        };
        let sig = if k % 4 < 2 {
            libc::SIGTERM
        } else {
            libc::SIGINT
        };
        let sent = Instant::now();
        if k % 2 == 0 {
            running.signal(sig);
        } else {
            running.signal_group(sig);
        }
        let out = running.finish(Duration::from_secs(20));
        let took = sent.elapsed();
        slowest = slowest.max(took);
        if took > Duration::from_millis(300) {
            eprintln!(
                "signal {sig} to the {} ({phase}): exit after {took:?}",
                if k % 2 == 0 { "launcher" } else { "group" }
            );
        }
        assert!(
            took < Duration::from_secs(10),
            "signal {sig} ({phase}): the launcher took {took:?} to exit\n{}",
            out.dump()
        );
        out.assert_nothing_left(&before);
    }
    eprintln!("the slowest exit after a signal took {slowest:?}");
}

/// `gaspi-run -m` with a hostfile naming this host as `localhost`,
/// `127.0.0.1` and its own name starts every rank here without ssh (the
/// ssh command is `false`: any use of it would fail the job).
#[test]
fn a_hostfile_of_this_host_starts_every_rank_here_without_ssh() {
    let dir = TempDir::new("local-hostfile");
    let hostfile = dir.path().join("hosts");
    let own = nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into());
    std::fs::write(&hostfile, format!("localhost slots=2\n127.0.0.1\n{own}\n"))
        .expect("writing the hostfile");
    let before = shm_files();
    let out = Job::new(&rank_bin!(), 4)
        .launcher_args(&["-m", &hostfile.to_string_lossy()])
        .env("GASPI_SSH", "false")
        .args(&["ring", "--rounds", "3", "--expect-size", "4"])
        .run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok ring of 3 rounds"),
        4,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}
