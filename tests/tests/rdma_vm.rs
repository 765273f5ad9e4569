//! The RDMA verbs transport on real verbs: Soft-RoCE (`rdma_rxe`) in a
//! QEMU virtual machine booted from Debian's kernel, two rxe devices on the
//! ends of a veth pair, the project's multi-rank scenarios run inside with
//! `GASPI_TRANSPORT=verbs` (`tests/rdma-vm/run.sh` does it all and says
//! `VERBS_TESTS passed=N failed=M`). Built with `--features
//! gaspi/libfabric` as well, the same scenarios run over the libfabric
//! transport with the `verbs;ofi_rxm` provider (`FABRIC_VERBS_TESTS`).
//!
//! Runs only where it can: binaries built with `--features gaspi/verbs`
//! (linked to libibverbs), QEMU present or root to install it, a kernel
//! package apt can name. Elsewhere it is skipped with a printed reason,
//! never counted as passed. A VM that does not boot fails the test.

use gaspi_tests::skip;
use std::path::{Path, PathBuf};
use std::process::Command;

const TEST: &str = "rdma_vm::scenarios_pass_over_soft_roce_verbs";

fn has(cmd: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {cmd}")])
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Why the harness cannot run here, if it cannot.
fn cannot_run(model_rank: &Path) -> Option<String> {
    let ldd = Command::new("ldd").arg(model_rank).output();
    match ldd {
        Ok(o) if String::from_utf8_lossy(&o.stdout).contains("libibverbs") => {}
        _ => return Some("not built with --features gaspi/verbs".into()),
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    let root = unsafe { libc::geteuid() } == 0;
    if !has("qemu-system-x86_64") && !root {
        return Some("no qemu-system-x86_64 and not root to install it".into());
    }
    if !root {
        return Some("not root (the kernel package is fetched with apt-get)".into());
    }
    let kernel = Command::new("sh")
        .args([
            "-c",
            "apt-cache depends linux-image-amd64 | grep -q 'Depends: linux-image-[0-9]'",
        ])
        .status();
    if !kernel.is_ok_and(|s| s.success()) {
        return Some("apt knows no linux-image-amd64 kernel package to boot".into());
    }
    None
}

#[test]
fn scenarios_pass_over_soft_roce_verbs() {
    let model_rank = PathBuf::from(env!("CARGO_BIN_EXE_gaspi-model-rank"));
    if let Some(reason) = cannot_run(&model_rank) {
        skip(TEST, &reason);
        return;
    }
    // The script runs the binaries of target/release: the ones under test.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = Command::new("bash")
        .arg(root.join("tests/rdma-vm/run.sh"))
        .output()
        .expect("running tests/rdma-vm/run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!("{stdout}");
    eprintln!("{stderr}");
    let last = stdout.lines().last().unwrap_or_default();
    let counts: Vec<u32> = last
        .strip_prefix("VERBS_TESTS passed=")
        .and_then(|rest| rest.split_once(" failed="))
        .and_then(|(p, f)| Some(vec![p.parse().ok()?, f.parse().ok()?]))
        .unwrap_or_else(|| panic!("no VERBS_TESTS line at the end:\n{stdout}\n{stderr}"));
    assert_eq!(counts[1], 0, "scenarios failed over verbs: {last}");
    assert!(counts[0] >= 12, "too few scenarios ran: {last}");
    // Built with the libfabric feature too: the same scenarios over the
    // libfabric transport with libfabric's verbs provider.
    let ldd = Command::new("ldd").arg(&model_rank).output();
    if ldd.is_ok_and(|o| String::from_utf8_lossy(&o.stdout).contains("libfabric")) {
        let fabric = stdout
            .lines()
            .find_map(|l| l.strip_prefix("FABRIC_VERBS_TESTS passed="))
            .and_then(|rest| rest.split_once(" failed="))
            .and_then(|(p, f)| Some((p.parse::<u32>().ok()?, f.parse::<u32>().ok()?)))
            .unwrap_or_else(|| panic!("no FABRIC_VERBS_TESTS line:\n{stdout}\n{stderr}"));
        assert_eq!(fabric.1, 0, "scenarios failed over verbs;ofi_rxm");
        assert!(fabric.0 >= 12, "too few scenarios ran over verbs;ofi_rxm");
    } else {
        skip(
            "rdma_vm: the libfabric transport over verbs;ofi_rxm",
            "not built with --features gaspi/libfabric",
        );
    }
    assert!(out.status.success(), "run.sh failed: {last}");
}
