//! Ranks on different hosts: network namespaces joined by a bridge, each
//! namespace a host with its own address. Ranks on one host reach each
//! other through shared memory, ranks on different hosts through TCP, in
//! one job; the scenarios that check the shared-memory transport must pass
//! unchanged. Needs root and iproute2: skipped with a printed reason where
//! they are missing.

use gaspi_tests::{clean_env, fresh_tag, rank_bin, run_all, skip, NetNamespaces, Outcome};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn model_bin() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_gaspi-model-rank"))
}

/// Runs `args` of `program` with `per_host` ranks on each host of `hosts`,
/// started directly with the variables gaspi-run would give them, rank 0's
/// host holding the rendezvous. Every rank must succeed; each must report
/// shared memory to the ranks of its host and TCP to the others.
fn across(hosts: &NetNamespaces, per_host: u32, program: &Path, args: &[&str]) -> Vec<Outcome> {
    let n = hosts.names.len() as u32 * per_host;
    let key: String = (0..32)
        .map(|_| format!("{:02x}", rand::random::<u8>()))
        .collect();
    let rendezvous = format!("{}:47123", hosts.addrs[0]);
    let cmds = (0..n)
        .map(|r| {
            let mut cmd = hosts.command((r / per_host) as usize, program);
            clean_env(&mut cmd);
            cmd.env("GASPI_RANK", r.to_string())
                .env("GASPI_SIZE", n.to_string())
                .env("GASPI_LOCAL_RANK", (r % per_host).to_string())
                .env("GASPI_LOCAL_SIZE", per_host.to_string())
                .env("GASPI_RENDEZVOUS", &rendezvous)
                .env("GASPI_JOB_KEY", &key)
                .env("GASPI_LOG", "info")
                .args(args);
            cmd
        })
        .collect();
    let outs = run_all(cmds, &fresh_tag(), Duration::from_secs(120));
    let expect = format!(
        "shm to {} ranks, tcp to {} ranks",
        per_host - 1,
        n - per_host
    );
    for o in &outs {
        o.assert_success();
        assert!(
            o.stderr.contains(&expect),
            "expected '{expect}':\n{}",
            o.dump()
        );
    }
    outs
}

#[test]
fn a_job_across_two_hosts_mixes_shared_memory_and_tcp() {
    let hosts = match NetNamespaces::create(2) {
        Ok(h) => h,
        Err(why) => return skip("a_job_across_two_hosts_mixes_shared_memory_and_tcp", &why),
    };
    across(&hosts, 2, &rank_bin!(), &["all-to-all", "--rounds", "3"]);
    across(&hosts, 2, &rank_bin!(), &["ordering", "--iters", "20"]);
    for scenario in [
        "read-notify",
        "lists",
        "fetch-add",
        "allreduce",
        "passive",
        "groups",
    ] {
        across(&hosts, 2, &model_bin(), &[scenario]);
    }
}
