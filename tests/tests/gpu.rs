//! Runs the GPU test program (`bin/gpu_tests.rs`). On a host without a GPU
//! only its no-driver case can run: it must pass (a GPU segment and a
//! device context are refused with `Error::Gpu(NoDriver)`, nothing is
//! created), and every other case must be reported SKIP with a reason,
//! never PASS. On a GPU host every case must pass.

use std::process::Command;

#[test]
fn gpu_cases_pass_or_are_skipped_with_a_reason() {
    let out = Command::new(env!("CARGO_BIN_EXE_gaspi-gpu-tests"))
        .output()
        .expect("start gaspi-gpu-tests");
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}");
    assert!(out.status.success(), "a GPU case failed:\n{stdout}");
    assert!(
        stdout.contains("GPU_TEST no-driver PASS"),
        "the no-driver case must run everywhere:\n{stdout}"
    );
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("GPU_TESTS "))
        .expect("a summary line");
    assert!(summary.contains("failed=0"), "{summary}");
    for line in stdout.lines().filter(|l| l.contains(" SKIP ")) {
        gaspi_tests::skip(line, "no usable GPU on this host (see the line)");
    }
}
