//! Faults on the network (issue 24), across network-namespace hosts: a
//! partition shorter than the peer timeout is not death; a permanent cut
//! is death no earlier than the timeout; strangers cannot exhaust a
//! running rank; a rank out of descriptors says so; survivors of a kill
//! that terminate at once do not make the others name them instead.
//!
//! The ranks are `gaspi-net-fault-rank` (`bin/net_fault_rank.rs`). Peer
//! timeouts are short (4 s) to keep the tests quick. Needs root and
//! iproute2: skipped with a printed reason where they are missing.

use gaspi_tests::{
    commands_on_hosts, figures, fresh_tag, run_all, skip, unix_us, NetNamespaces, Outcome, Running,
    TempDir,
};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gaspi-net-fault-rank"))
}

/// `GASPI_PEER_TIMEOUT_MS` of these tests.
const PEER_TIMEOUT_MS: u64 = 4000;

/// How long the connections sit quiet before a cut: longer than the
/// keep-alive idle time the runtime used before issue 24 (a third of the
/// peer timeout), so that a connection's last packet is that much older
/// than the cut.
const QUIET_BEFORE_CUT: Duration = Duration::from_millis(2500);

fn start(cmds: Vec<std::process::Command>, tag: &str) -> Vec<Running> {
    cmds.into_iter().map(|c| Running::spawn(c, tag)).collect()
}

fn finish(ranks: Vec<Running>, timeout: Duration) -> Vec<Outcome> {
    ranks.into_iter().map(|r| r.finish(timeout)).collect()
}

/// A partition of 0.75 x the peer timeout, begun when every connection had
/// been quiet for longer than the old keep-alive idle time: calls across it
/// time out, no rank is declared dead, and traffic resumes once the link is
/// back. Before the fix every rank got PeerDead about 2/3 of the timeout
/// after the cut (the kernel measured the silence from the last packet
/// received, up to the keep-alive idle time before the cut).
///
/// The partition's length is the test's to keep: where the machine is so
/// loaded that the link came back only after 0.8 x the timeout (past what
/// decision 0033 promises for this timeout), that attempt proves nothing
/// and the scenario runs again, three times at most.
#[test]
fn a_partition_shorter_than_the_peer_timeout_after_a_quiet_spell_costs_only_timeouts() {
    let name = "a_partition_shorter_than_the_peer_timeout_after_a_quiet_spell_costs_only_timeouts";
    let hosts = match NetNamespaces::create(2) {
        Ok(h) => h,
        Err(why) => return skip(name, &why),
    };
    for attempt in 1..=3 {
        let dir = TempDir::new("partition");
        let (cut_file, heal_file) = (dir.path().join("cut"), dir.path().join("heal"));
        let timeout = PEER_TIMEOUT_MS.to_string();
        let cmds = commands_on_hosts(
            &hosts,
            &[0, 0, 1, 1],
            &bin(),
            &[
                "partition",
                "--cut-file",
                &cut_file.to_string_lossy(),
                "--heal-file",
                &heal_file.to_string_lossy(),
            ],
            &[("GASPI_PEER_TIMEOUT_MS", &timeout)],
        );
        let mut ranks = start(cmds, &fresh_tag());
        for r in ranks.iter_mut() {
            r.wait_for_lines("ready", 1, Duration::from_secs(60));
        }
        std::thread::sleep(QUIET_BEFORE_CUT);
        // Taken before the cut and after the heal: the partition lasted
        // at most `healed_after`.
        let cut_at = Instant::now();
        hosts.cut(1);
        std::fs::write(&cut_file, b"cut").expect("writing the cut file");
        std::thread::sleep(
            Duration::from_millis(PEER_TIMEOUT_MS * 3 / 4).saturating_sub(cut_at.elapsed()),
        );
        hosts.heal(1);
        let healed_after = cut_at.elapsed();
        std::fs::write(&heal_file, b"heal").expect("writing the heal file");
        if healed_after > Duration::from_millis(PEER_TIMEOUT_MS * 4 / 5) {
            eprintln!(
                "{name}: attempt {attempt}: the link came back only after {healed_after:?} (loaded machine); again"
            );
            drop(ranks);
            continue;
        }
        let outs = finish(ranks, Duration::from_secs(90));
        eprintln!("{name}: partition of at most {healed_after:?}");
        for o in &outs {
            o.assert_success();
            assert_eq!(
                o.stdout_lines_with("ok partition healed"),
                1,
                "{}",
                o.dump()
            );
        }
        let timeouts = figures(&outs[0], "timeouts");
        assert!(
            timeouts.len() == 1 && timeouts[0].1 > 0,
            "rank 0's calls across the partition did not time out:\n{}",
            outs[0].dump()
        );
        return;
    }
    panic!("{name}: in three attempts the machine never let the link come back in time");
}

/// The link between two hosts down when their ranks first talk (control
/// connections are made on first use) for 3.5 s: longer than one
/// connection attempt waits (2 s), shorter than the peer timeout. The
/// first contacts wait for the link and the job completes, nobody marked
/// dead. Before the fix the attempt's timeout failed the call
/// ("connecting to rank 2 at ...: connection timed out"); over a link
/// losing 5% of its packets, one lost SYN exchange in a row did the same
/// to about one job in twelve of `a_lossy_slow_link_delivers_whole_data_in_order`.
#[test]
fn a_link_down_at_first_contact_delays_the_connections_and_fails_nothing() {
    let name = "a_link_down_at_first_contact_delays_the_connections_and_fails_nothing";
    let hosts = match NetNamespaces::create(2) {
        Ok(h) => h,
        Err(why) => return skip(name, &why),
    };
    let dir = TempDir::new("first-contact");
    let go_file = dir.path().join("go");
    let cmds = commands_on_hosts(
        &hosts,
        &[0, 0, 1, 1],
        &bin(),
        &["first-contact", "--go-file", &go_file.to_string_lossy()],
        &[("GASPI_PEER_TIMEOUT_MS", "30000")],
    );
    let mut ranks = start(cmds, &fresh_tag());
    for r in ranks.iter_mut() {
        r.wait_for_lines("ready", 1, Duration::from_secs(60));
    }
    hosts.cut(1);
    std::fs::write(&go_file, b"go").expect("writing the go file");
    std::thread::sleep(Duration::from_millis(3500));
    hosts.heal(1);
    let outs = finish(ranks, Duration::from_secs(90));
    for o in &outs {
        o.assert_success();
        assert_eq!(o.stdout_lines_with("ok first contact"), 1, "{}", o.dump());
    }
    let waited = figures(&outs[0], "first_barrier_ms");
    eprintln!("{name}: rank 0's first barrier took {waited:?} ms");
}

/// A host cut off for good, every connection quiet before the cut: each
/// rank marks a rank of the other host dead no earlier than the peer
/// timeout after the cut, and within 1.5 x of it. Before the fix: about
/// 2/3 of the timeout after it.
#[test]
fn a_host_cut_off_after_a_quiet_spell_is_declared_dead_no_earlier_than_the_peer_timeout() {
    let name =
        "a_host_cut_off_after_a_quiet_spell_is_declared_dead_no_earlier_than_the_peer_timeout";
    let hosts = match NetNamespaces::create(2) {
        Ok(h) => h,
        Err(why) => return skip(name, &why),
    };
    let timeout = PEER_TIMEOUT_MS.to_string();
    let place = [0, 0, 1, 1];
    let dir = TempDir::new("cut");
    let stop_file = dir.path().join("stop");
    let cmds = commands_on_hosts(
        &hosts,
        &place,
        &bin(),
        &["cut", "--stop-file", &stop_file.to_string_lossy()],
        &[("GASPI_PEER_TIMEOUT_MS", &timeout)],
    );
    let mut ranks = start(cmds, &fresh_tag());
    for r in ranks.iter_mut() {
        r.wait_for_lines("ready", 1, Duration::from_secs(60));
    }
    std::thread::sleep(QUIET_BEFORE_CUT);
    // Taken before the cut: the cut happens at or after it.
    let cut_at = unix_us();
    hosts.cut(1);
    for r in ranks.iter_mut() {
        r.wait_for_lines("dead_rank", 1, Duration::from_secs(60));
    }
    std::fs::write(&stop_file, b"stop").expect("writing the stop file");
    let outs = finish(ranks, Duration::from_secs(90));
    let limit = u128::from(PEER_TIMEOUT_MS) * 1000;
    for (r, o) in outs.iter().enumerate() {
        if let (Some(at), Some(dead)) = (
            figures(o, "dead_at_us").first(),
            figures(o, "dead_rank").first(),
        ) {
            eprintln!(
                "{name}: rank {r} marked rank {} dead {} ms after the cut",
                dead.1,
                at.1.saturating_sub(cut_at) / 1000
            );
        }
    }
    for (r, o) in outs.iter().enumerate() {
        o.assert_success();
        let at = figures(o, "dead_at_us");
        let dead = figures(o, "dead_rank");
        assert!(at.len() == 1 && dead.len() == 1, "{}", o.dump());
        let after = at[0].1.saturating_sub(cut_at);
        assert_ne!(
            place[dead[0].1 as usize],
            place[r],
            "rank {r} marked a rank of its own host dead:\n{}",
            o.dump()
        );
        assert!(
            after >= limit,
            "rank {r} marked rank {} dead {} ms after the cut, before the peer timeout of {PEER_TIMEOUT_MS} ms:\n{}",
            dead[0].1,
            after / 1000,
            o.dump()
        );
        assert!(
            after <= limit * 3 / 2,
            "rank {r} marked rank {} dead only {} ms after the cut (peer timeout {PEER_TIMEOUT_MS} ms):\n{}",
            dead[0].1,
            after / 1000,
            o.dump()
        );
    }
}

/// Descriptors open in process `pid`.
fn descriptors_of(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, |d| d.count())
}

/// Bytes of a rank's standard error so far (what its pipe has delivered).
fn stderr_bytes(r: &mut Running) -> usize {
    std::thread::sleep(Duration::from_millis(200));
    let _ = r.try_finish();
    r.stderr_len()
}

/// 2,000 connections that never say anything, opened from a third host to
/// the control port of a running rank whose descriptor limit is 1,024,
/// while the job creates and deletes segments and runs collectives (its
/// first create connects the victim's peers to it during the flood): the
/// job finishes correctly, the rank holds a bounded number of descriptors
/// and its log grows by less than 100 KiB. Before the fix the rank kept
/// every pending handshake: EMFILE, and the job's segment_create failed
/// on every rank.
#[test]
fn two_thousand_silent_strangers_at_a_running_rank_cost_it_few_descriptors_and_little_log() {
    let name =
        "two_thousand_silent_strangers_at_a_running_rank_cost_it_few_descriptors_and_little_log";
    let hosts = match NetNamespaces::create(3) {
        Ok(h) => h,
        Err(why) => return skip(name, &why),
    };
    let dir = TempDir::new("strangers");
    let (go_file, stop_file, hold_file) = (
        dir.path().join("go"),
        dir.path().join("stop"),
        dir.path().join("hold"),
    );
    let mut cmds = commands_on_hosts(
        &hosts,
        &[0, 0, 1, 1],
        &bin(),
        &[
            "busy",
            "--go-file",
            &go_file.to_string_lossy(),
            "--stop-file",
            &stop_file.to_string_lossy(),
        ],
        &[],
    );
    const VICTIM: usize = 1;
    cmds[VICTIM].env("GASPI_LOG", "info,gaspi::net=debug");
    // SAFETY: the closure runs between fork and exec and calls only
    // setrlimit(2), which is async-signal-safe, on a local struct.
    unsafe {
        use std::os::unix::process::CommandExt;
        cmds[VICTIM].pre_exec(|| {
            let lim = libc::rlimit {
                rlim_cur: 1024,
                rlim_max: 1024,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &lim) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let tag = fresh_tag();
    let mut ranks = start(cmds, &tag);
    let line = ranks[VICTIM].wait_for_stderr_line("control listener on ", Duration::from_secs(60));
    let control: std::net::SocketAddr = line
        .split_once(" on ")
        .and_then(|(_, rest)| rest.split_whitespace().next())
        .map(|a| a.trim_end_matches(|c: char| !c.is_ascii_digit()))
        .and_then(|a| a.parse().ok())
        .unwrap_or_else(|| panic!("no address in {line:?}"));
    for r in ranks.iter_mut() {
        r.wait_for_lines("ready", 1, Duration::from_secs(60));
    }
    let pid = ranks[VICTIM].pid();
    let before = descriptors_of(pid);
    let log_before = stderr_bytes(&mut ranks[VICTIM]);
    // Count the victim's descriptors while the strangers come and stay.
    let stop_sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let sampler = {
        let stop = stop_sampling.clone();
        std::thread::spawn(move || {
            let mut most = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                most = most.max(descriptors_of(pid));
                std::thread::sleep(Duration::from_millis(10));
            }
            most
        })
    };
    let mut flood = hosts.command(2, &bin());
    flood.args([
        "flood",
        "--addr",
        &control.to_string(),
        "--count",
        "2000",
        "--hold-file",
        &hold_file.to_string_lossy(),
    ]);
    let mut flood = Running::spawn(flood, &tag);
    // The job starts as the strangers come: its first segment_create
    // connects every pair, the victim's peers at its door among them.
    flood.wait_for_lines("connecting", 1, Duration::from_secs(60));
    std::fs::write(&go_file, b"go").expect("writing the go file");
    flood.wait_for_lines("flooded", 1, Duration::from_secs(180));
    // Held past the handshake deadline (5 s) while the job goes on.
    std::thread::sleep(Duration::from_secs(6));
    std::fs::write(&stop_file, b"stop").expect("writing the stop file");
    let log_after = stderr_bytes(&mut ranks[VICTIM]);
    // Hang guards, counted from each process's start: generous, for a
    // loaded machine.
    let outs = finish(ranks, Duration::from_secs(300));
    std::fs::write(&hold_file, b"done").expect("writing the hold file");
    stop_sampling.store(true, std::sync::atomic::Ordering::Relaxed);
    let most = sampler.join().expect("the sampler");
    let flood = flood.finish(Duration::from_secs(300));
    eprintln!(
        "{name}: {} ; victim's descriptors {before} before, at most {most}; its log grew {} bytes",
        flood.stdout.trim(),
        log_after - log_before
    );
    for o in &outs {
        o.assert_success();
        assert_eq!(o.stdout_lines_with("ok busy"), 1, "{}", o.dump());
    }
    assert!(
        most <= before + 64 + 32,
        "the rank held {most} descriptors under the flood ({before} before):\n{}",
        outs[VICTIM].dump()
    );
    assert!(
        log_after - log_before < 100 << 10,
        "the rank's log grew {} bytes under the flood",
        log_after - log_before
    );
}

/// A rank that has run out of descriptors: a same-host peer's
/// registration with it fails naming the real cause (`Too many open
/// files`), not another host (the host identity was read again and fell
/// back to the host name on any error), and works once the descriptors
/// are back.
#[test]
fn a_rank_out_of_descriptors_reports_it_rather_than_another_host() {
    let name = "a_rank_out_of_descriptors_reports_it_rather_than_another_host";
    let hosts = match NetNamespaces::create(2) {
        Ok(h) => h,
        Err(why) => return skip(name, &why),
    };
    let cmds = commands_on_hosts(&hosts, &[0, 0, 1], &bin(), &["descriptors"], &[]);
    let outs = run_all(cmds, &fresh_tag(), Duration::from_secs(120));
    for o in &outs {
        o.assert_success();
        assert_eq!(o.stdout_lines_with("ok descriptors"), 1, "{}", o.dump());
    }
    eprintln!(
        "{name}: {}",
        outs[0]
            .stdout
            .lines()
            .find(|l| l.contains("register failed"))
            .unwrap_or("")
    );
}

/// Rank 3 of 4 (two hosts) killed during back-to-back barrier and
/// allreduce; each survivor terminates as soon as its collective failed.
/// In 200 jobs every survivor names rank 3: a survivor's orderly end must
/// not reach another before the death it ended over (before the fix, in
/// about 1 job in 4 the root's allreduce named a survivor that had
/// terminated: PeerTerminated(1)).
#[test]
fn survivors_that_terminate_at_once_never_make_the_others_name_them_instead_of_the_dead_rank() {
    let name =
        "survivors_that_terminate_at_once_never_make_the_others_name_them_instead_of_the_dead_rank";
    let hosts = match NetNamespaces::create(2) {
        Ok(h) => h,
        Err(why) => return skip(name, &why),
    };
    // 200 jobs rather than 50: before the fix about 1 job in 80 went wrong
    // on an idle 2-core machine (more often under load).
    const JOBS: u32 = 200;
    let mut wrong = Vec::new();
    let start = Instant::now();
    for job in 0..JOBS {
        let cmds = commands_on_hosts(
            &hosts,
            &[0, 0, 1, 1],
            &bin(),
            &[
                "kill-then-term",
                "--victim",
                "3",
                "--at",
                &(3 + job % 5).to_string(),
            ],
            &[],
        );
        let outs = run_all(cmds, &fresh_tag(), Duration::from_secs(60));
        assert_eq!(outs[3].code, 128 + 9, "{}", outs[3].dump());
        for (r, o) in outs[..3].iter().enumerate() {
            if o.code != 0 || o.stdout_lines_with("ok survivor named rank 3") != 1 {
                wrong.push(format!("job {job}, rank {r}:\n{}", o.dump()));
            }
        }
    }
    eprintln!("{name}: {JOBS} jobs in {:?}", start.elapsed());
    assert!(
        wrong.is_empty(),
        "{} survivors failed otherwise than naming rank 3; the first:\n{}",
        wrong.len(),
        wrong[0]
    );
}
