//! The libfabric transport (`runtime/src/transport/libfabric/`) over its
//! `tcp;ofi_rxm` provider: the scenarios the TCP and verbs transports pass
//! must pass unchanged, on one host with every rank reached over libfabric
//! (`GASPI_TRANSPORT=libfabric`) and across two network namespaces, where
//! ranks of one host use shared memory and the other host's ranks
//! libfabric (`GASPI_TRANSPORT=auto` with `GASPI_NET_PROVIDER` set).
//!
//! Runs only with binaries built with `--features gaspi/libfabric` (linked
//! to libfabric) and a `tcp;ofi_rxm` provider; the namespaces need root
//! and iproute2. Each test prints a `SKIPPED` line where it cannot run.

use gaspi_tests::{
    commands_on_hosts, fresh_tag, rank_bin, run_all, shm_files, skip, Job, NetNamespaces, Outcome,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

const PROVIDER: &str = "tcp;ofi_rxm";

fn model_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gaspi-model-rank"))
}

/// Why the binaries cannot run over libfabric here, if they cannot.
fn cannot_run() -> Option<String> {
    match Command::new("ldd").arg(model_bin()).output() {
        Ok(o) if String::from_utf8_lossy(&o.stdout).contains("libfabric") => None,
        _ => Some("not built with --features gaspi/libfabric".into()),
    }
}

/// Whether a run failed because the provider is not offered here: then
/// the test is skipped, naming what was missing.
fn provider_missing(test: &str, out: &Outcome) -> bool {
    let missing = out
        .stderr
        .lines()
        .find(|l| l.contains("no libfabric provider"));
    if let Some(line) = missing {
        skip(test, line.trim());
        return true;
    }
    false
}

/// Runs `args` of `program` on `ranks` ranks of this host, every one
/// reaching every other over libfabric; every rank must succeed, print
/// `ok` and say it used libfabric to every other rank. `false`: skipped.
fn over_fabric(test: &str, program: &Path, ranks: u32, args: &[&str]) -> bool {
    over_fabric_with(test, program, ranks, args, &[])
}

/// [`over_fabric`] with `env` set for every rank.
fn over_fabric_with(
    test: &str,
    program: &Path,
    ranks: u32,
    args: &[&str],
    env: &[(&str, &str)],
) -> bool {
    let before = shm_files();
    let mut job = Job::new(program, ranks)
        .env("GASPI_TRANSPORT", "libfabric")
        .env("GASPI_NET_PROVIDER", PROVIDER)
        .env("GASPI_LOG", "info");
    for (k, v) in env {
        job = job.env(k, v);
    }
    let out = job.args(args).run();
    if provider_missing(test, &out) {
        return false;
    }
    out.assert_success();
    assert!(
        out.stdout.lines().filter(|l| l.contains(" ok")).count() >= ranks as usize,
        "{}",
        out.dump()
    );
    let line = format!("tcp to 0 ranks, libfabric to {} ranks", ranks - 1);
    assert_eq!(
        out.stderr.matches(&line).count(),
        ranks as usize,
        "not every rank used libfabric:\n{}",
        out.dump()
    );
    assert!(
        out.stderr
            .contains(&format!("libfabric provider {PROVIDER}")),
        "the provider is not said:\n{}",
        out.dump()
    );
    // tcp;ofi_rxm offers 8 bytes of remote CQ data and ordered writes: a
    // write_notify is one operation, its notification packed as asked.
    let said = match env.iter().find(|(k, _)| *k == "GASPI_NET_CQ_DATA") {
        Some((_, "0")) => None,
        Some((_, "4")) => Some("notifications as remote CQ data on their write (4 bytes;"),
        _ => Some("notifications as remote CQ data on their write (8 bytes)"),
    };
    match said {
        Some(line) => assert_eq!(
            out.stderr.matches(line).count(),
            ranks as usize,
            "notifications do not travel on their writes as asked ({line}):\n{}",
            out.dump()
        ),
        None => assert!(
            !out.stderr.contains("as remote CQ data"),
            "notifications travel as CQ data under GASPI_NET_CQ_DATA=0:\n{}",
            out.dump()
        ),
    }
    out.assert_nothing_left(&before);
    true
}

#[test]
fn data_notifications_and_reads_arrive_whole_over_libfabric() {
    let test = "data_notifications_and_reads_arrive_whole_over_libfabric";
    if let Some(why) = cannot_run() {
        return skip(test, &why);
    }
    // write_notify: every block's bytes checked once its notification is
    // seen; notifications never overtake their data.
    if !over_fabric(test, &rank_bin!(), 4, &["all-to-all", "--rounds", "3"]) {
        return;
    }
    over_fabric(test, &rank_bin!(), 4, &["ordering", "--iters", "20"]);
    if over_fabric(test, &rank_bin!(), 2, &["ping-pong", "--rounds", "200"]) {
        // Gaspi::transport_provider names the provider under libfabric.
        let out = Job::new(&rank_bin!(), 2)
            .env("GASPI_TRANSPORT", "libfabric")
            .env("GASPI_NET_PROVIDER", PROVIDER)
            .args(&["ping-pong", "--rounds", "3"])
            .run();
        out.assert_success();
        let via = format!("rounds (libfabric over {PROVIDER})");
        assert_eq!(out.stdout.matches(&via).count(), 2, "{}", out.dump());
    }
    // Notifications that travel as remote CQ data on their write: large
    // writes in pieces, segments deleted and created again under the same
    // id (the target must set the new segment's words), writes into a
    // deleted segment refused.
    over_fabric(test, &rank_bin!(), 2, &["assisted-copy", "--rounds", "10"]);
    over_fabric(test, &rank_bin!(), 4, &["deleted-segment", "--iters", "10"]);
    // Notifications seen in the order they were sent, with the provider's
    // 8 bytes of CQ data and with the compact 4 of `verbs;ofi_rxm` and
    // `efa` (ids past 65535 and values past 255 written apart, decision
    // 0052); then every word written apart.
    for cq_data in ["auto", "4", "0"] {
        let env = [
            ("GASPI_NOTIFICATION_NUM", "70000"),
            ("GASPI_NET_CQ_DATA", cq_data),
        ];
        over_fabric_with(test, &rank_bin!(), 4, &["notify-order"], &env);
    }
    // Reads, and a read's notification set only once its data is there.
    over_fabric(test, &model_bin(), 4, &["read-notify"]);
    over_fabric(test, &model_bin(), 4, &["lists"]);
}

#[test]
fn atomics_collectives_and_the_rest_over_libfabric() {
    let test = "atomics_collectives_and_the_rest_over_libfabric";
    if let Some(why) = cannot_run() {
        return skip(test, &why);
    }
    for scenario in [
        "fetch-add",
        "compare-swap",
        "allreduce",
        "groups",
        "passive",
        "queues",
        "lists-bad",
    ] {
        if !over_fabric(test, &model_bin(), 4, &[scenario]) {
            return;
        }
    }
    over_fabric(test, &rank_bin!(), 4, &["timeouts"]);
    over_fabric(test, &rank_bin!(), 4, &["barrier-overtaken"]);
}

#[test]
fn bad_input_is_refused_over_libfabric() {
    let test = "bad_input_is_refused_over_libfabric";
    if let Some(why) = cannot_run() {
        return skip(test, &why);
    }
    let before = shm_files();
    let out = Job::new(&rank_bin!(), 4)
        .env("GASPI_TRANSPORT", "libfabric")
        .env("GASPI_NET_PROVIDER", PROVIDER)
        .env("GASPI_QUEUE_NUM", "2")
        .env("GASPI_QUEUE_SIZE_MAX", "8")
        .env("GASPI_SEGMENT_MAX", "16")
        .env("GASPI_NOTIFICATION_NUM", "64")
        .env("GASPI_TRANSFER_SIZE_MAX", "65536")
        .args(&["bad-inputs"])
        .run();
    if provider_missing(test, &out) {
        return;
    }
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("ok bad inputs refused"),
        4,
        "{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}

#[test]
fn a_provider_that_is_not_there_is_named_and_the_job_does_not_start() {
    let test = "a_provider_that_is_not_there_is_named_and_the_job_does_not_start";
    if let Some(why) = cannot_run() {
        return skip(test, &why);
    }
    let out = Job::new(&rank_bin!(), 2)
        .env("GASPI_TRANSPORT", "libfabric")
        .env("GASPI_NET_PROVIDER", "no-such-provider")
        .args(&["hello"])
        .timeout(Duration::from_secs(60))
        .run();
    assert_ne!(out.code, 0, "{}", out.dump());
    assert!(
        out.stderr.contains("no-such-provider"),
        "the provider is not named:\n{}",
        out.dump()
    );
}

#[test]
fn a_dead_peer_is_named_over_libfabric() {
    let test = "a_dead_peer_is_named_over_libfabric";
    if let Some(why) = cannot_run() {
        return skip(test, &why);
    }
    let before = shm_files();
    let out = Job::new(&rank_bin!(), 4)
        .env("GASPI_TRANSPORT", "libfabric")
        .env("GASPI_NET_PROVIDER", PROVIDER)
        .launcher_args(&["--keep-going"])
        .args(&["dead-peer", "--victim", "2", "--keep-going"])
        .run();
    if provider_missing(test, &out) {
        return;
    }
    out.assert_code(128 + 9);
    assert_eq!(out.stdout_lines_with("ok survivor"), 3, "{}", out.dump());
    out.assert_nothing_left(&before);
}

/// Runs `args` of `program` with two ranks on each of the two hosts:
/// shared memory to the rank of its own host, libfabric to the other two.
fn across(hosts: &NetNamespaces, program: &Path, args: &[&str]) -> Option<Vec<Outcome>> {
    let place = [0usize, 0, 1, 1];
    let env = [("GASPI_NET_PROVIDER", PROVIDER), ("GASPI_LOG", "info")];
    let cmds = commands_on_hosts(hosts, &place, program, args, &env);
    let outs = run_all(cmds, &fresh_tag(), Duration::from_secs(120));
    let test = "a_job_across_two_hosts_mixes_shared_memory_and_libfabric";
    if outs.iter().any(|o| provider_missing(test, o)) {
        return None;
    }
    let expect = "shm to 1 ranks, tcp to 0 ranks, libfabric to 2 ranks";
    for o in &outs {
        o.assert_success();
        assert!(
            o.stderr.contains(expect),
            "expected '{expect}':\n{}",
            o.dump()
        );
    }
    Some(outs)
}

#[test]
fn a_job_across_two_hosts_mixes_shared_memory_and_libfabric() {
    let test = "a_job_across_two_hosts_mixes_shared_memory_and_libfabric";
    if let Some(why) = cannot_run() {
        return skip(test, &why);
    }
    let hosts = match NetNamespaces::create(2) {
        Ok(h) => h,
        Err(why) => return skip(test, &why),
    };
    if across(&hosts, &rank_bin!(), &["all-to-all", "--rounds", "3"]).is_none() {
        return;
    }
    across(&hosts, &rank_bin!(), &["ordering", "--iters", "20"]);
    for scenario in ["read-notify", "lists", "fetch-add", "allreduce", "passive"] {
        across(&hosts, &model_bin(), &[scenario]);
    }
}

#[test]
fn a_build_without_the_feature_refuses_gaspi_transport_libfabric_naming_it() {
    let test = "a_build_without_the_feature_refuses_gaspi_transport_libfabric_naming_it";
    if cannot_run().is_none() {
        return skip(test, "built with --features gaspi/libfabric");
    }
    let out = Job::new(&rank_bin!(), 2)
        .env("GASPI_TRANSPORT", "libfabric")
        .args(&["hello"])
        .timeout(Duration::from_secs(60))
        .run();
    assert_ne!(out.code, 0, "{}", out.dump());
    assert!(
        out.stderr.contains("--features libfabric"),
        "the missing feature is not named:\n{}",
        out.dump()
    );
}
