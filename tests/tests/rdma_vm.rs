//! The RDMA verbs transport on real verbs: Soft-RoCE (`rdma_rxe`) in a
//! QEMU virtual machine booted from Debian's kernel, two rxe devices on the
//! ends of a veth pair, the project's multi-rank scenarios run inside with
//! `GASPI_TRANSPORT=verbs` (`tests/rdma-vm/run.sh` does it all and says
//! `VERBS_TESTS passed=N failed=M`). Built with `--features
//! gaspi/libfabric` as well, the same scenarios run over the libfabric
//! transport with the `verbs;ofi_rxm` provider (`FABRIC_VERBS_TESTS`).
//!
//! Runs what the build has: the verbs scenarios where the binaries are built
//! with `--features gaspi/verbs`, the libfabric ones where with
//! `--features gaspi/libfabric`; each part the build lacks is skipped with a
//! printed reason. What the build has is read from the libraries the
//! binary itself links (its `NEEDED` entries): libfabric's own verbs
//! provider brings libibverbs into a libfabric-only build's `ldd` list.
//! Also needs QEMU present or root to install it, and a kernel package apt
//! can name; elsewhere the test is skipped with a printed reason, never
//! counted as passed. A VM that does not boot fails the test.

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

/// The transports of this build, from the libraries `bin` links itself.
struct Built {
    verbs: bool,
    libfabric: bool,
}

fn built(bin: &Path) -> Built {
    // readelf lists the binary's own NEEDED entries; ldd (the fallback)
    // the whole closure, which over-reports verbs in a libfabric build.
    let own = Command::new("readelf").arg("-d").arg(bin).output();
    let text = match own {
        Ok(o) if o.status.success() => String::from_utf8_lossy(&o.stdout)
            .lines()
            .filter(|l| l.contains("NEEDED"))
            .collect::<Vec<_>>()
            .join("\n"),
        _ => Command::new("ldd")
            .arg(bin)
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
            .unwrap_or_default(),
    };
    Built {
        verbs: text.contains("libibverbs"),
        libfabric: text.contains("libfabric"),
    }
}

/// Why the harness cannot run here, if it cannot.
fn cannot_run(built: &Built) -> Option<String> {
    if !built.verbs && !built.libfabric {
        return Some("built with neither --features gaspi/verbs nor gaspi/libfabric".into());
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
    let built = built(&model_rank);
    if let Some(reason) = cannot_run(&built) {
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
    if built.verbs {
        let counts: Vec<u32> = last
            .strip_prefix("VERBS_TESTS passed=")
            .and_then(|rest| rest.split_once(" failed="))
            .and_then(|(p, f)| Some(vec![p.parse().ok()?, f.parse().ok()?]))
            .unwrap_or_else(|| panic!("no VERBS_TESTS line at the end:\n{stdout}\n{stderr}"));
        assert_eq!(counts[1], 0, "scenarios failed over verbs: {last}");
        assert!(counts[0] >= 12, "too few scenarios ran: {last}");
    } else {
        assert!(
            last.starts_with("VERBS_TESTS skipped"),
            "a build without verbs ran verbs scenarios: {last}"
        );
        skip(
            "rdma_vm: the verbs transport's scenarios",
            "not built with --features gaspi/verbs",
        );
    }
    // Built with the libfabric feature: the same scenarios over the
    // libfabric transport with libfabric's verbs provider.
    if built.libfabric {
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
