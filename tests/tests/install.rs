//! The install step (`install.sh`, decision 0031), as a GPI-2 user runs it:
//! into a fresh prefix, then a C program built with `pkg-config --cflags
//! --libs GPI2` (and a Fortran one with the installed modules) runs under
//! the installed `gaspi_run` and `gaspi-run`.

use gaspi_tests::{
    capi_library, clean_env, fresh_tag, gaspi_run, gpi2_launcher, rank_bin, skip, Running, TempDir,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lies in the workspace")
        .to_path_buf()
}

fn have(tool: &str) -> bool {
    Command::new(tool).arg("--version").output().is_ok()
}

/// Runs `cmd` to its end; panics with its output unless it succeeds.
fn ok(mut cmd: Command) -> String {
    let out = cmd.output().unwrap_or_else(|e| panic!("{cmd:?}: {e}"));
    assert!(
        out.status.success(),
        "{cmd:?} failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs a launcher command line under the tests' hang guard; every rank
/// must print `needle` once.
fn run_job(mut cmd: Command, ranks: usize, needle: &str) {
    clean_env(&mut cmd);
    let out = Running::spawn(cmd, &fresh_tag()).finish(Duration::from_secs(60));
    out.assert_success();
    assert_eq!(out.stdout_lines_with(needle), ranks, "{}", out.dump());
}

const PROGRAM: &str = r#"
#include <GASPI.h>
#include <GASPI_Ext.h>
#include <GASPI_Threads.h>
#include <PGASPI.h>
#include <stdio.h>

int main (void)
{
  gaspi_rank_t rank, num;
  gaspi_size_t size;
  if (gaspi_proc_init (GASPI_BLOCK) != GASPI_SUCCESS)
    return 1;
  gaspi_proc_rank (&rank);
  gaspi_proc_num (&num);
  if (gaspi_segment_create (0, 4096, GASPI_GROUP_ALL, GASPI_BLOCK,
                            GASPI_MEM_INITIALIZED) != GASPI_SUCCESS
      || gaspi_segment_size (0, (rank + 1) % num, &size) != GASPI_SUCCESS
      || size != 4096)
    return 2;
  if (pgaspi_barrier (GASPI_GROUP_ALL, GASPI_BLOCK) != GASPI_SUCCESS)
    return 3;
  printf ("installed rank %d of %d\n", rank, num);
  return gaspi_proc_term (GASPI_BLOCK) == GASPI_SUCCESS ? 0 : 4;
}
"#;

const FORTRAN: &str = r#"
program installed
  use gaspi
  use gaspi_ext
  implicit none
  integer(gaspi_rank_t) :: rank, num
  integer(gaspi_return_t) :: ret
  ret = gaspi_proc_init(GASPI_BLOCK)
  if (ret /= GASPI_SUCCESS) stop 1
  ret = gaspi_proc_rank(rank)
  ret = gaspi_proc_num(num)
  ret = gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK)
  if (ret /= GASPI_SUCCESS) stop 2
  print '(a,i0,a,i0)', "installed fortran rank ", rank, " of ", num
  ret = gaspi_proc_term(GASPI_BLOCK)
end program installed
"#;

#[test]
fn install_sh_puts_a_gpi2_that_pkg_config_programs_run_with_under_a_prefix() {
    for tool in ["cc", "pkg-config", "bash"] {
        if !have(tool) {
            return skip("install", &format!("no {tool} on this machine"));
        }
    }
    // What install.sh --no-build installs: the build of this test run.
    gaspi_run(&rank_bin!());
    gpi2_launcher(&rank_bin!());
    let lib = capi_library(&rank_bin!());
    let from = lib.parent().expect("a target directory");
    let dir = TempDir::new("install");
    let prefix = dir.path().join("prefix");
    let mut install = Command::new("bash");
    install
        .arg(root().join("install.sh"))
        .arg("--no-build")
        .arg("--from")
        .arg(from)
        .arg("--prefix")
        .arg(&prefix);
    ok(install);

    // The library with GPI-2's soname and its links, the headers, the
    // launchers, the pkg-config file.
    let l = prefix.join("lib");
    for link in ["libGPI2.so", "libGPI2.so.0"] {
        let target = std::fs::read_link(l.join(link)).expect("a symbolic link");
        assert_eq!(target, Path::new("libGPI2.so.0.0.0"), "{link}");
    }
    if have("readelf") {
        let mut readelf = Command::new("readelf");
        readelf.arg("-d").arg(l.join("libGPI2.so.0.0.0"));
        assert!(ok(readelf).contains("[libGPI2.so.0]"));
    }
    for h in [
        "GASPI.h",
        "GASPI_Ext.h",
        "GASPI_types.h",
        "PGASPI.h",
        "GASPI_Threads.h",
        "gaspi.f90",
    ] {
        assert!(prefix.join("include").join(h).is_file(), "{h}");
    }
    for b in ["gaspi-run", "gaspi_run"] {
        assert!(prefix.join("bin").join(b).is_file(), "{b}");
    }
    let pc_path = l.join("pkgconfig");
    let pkg = |args: &[&str]| {
        let mut c = Command::new("pkg-config");
        c.env("PKG_CONFIG_PATH", &pc_path).args(args).arg("GPI2");
        ok(c)
    };
    let flags = pkg(&["--cflags", "--libs"]).trim().to_string();
    assert!(
        flags.contains(&format!("-I{}", prefix.join("include").display())),
        "{flags}"
    );
    assert_eq!(pkg(&["--modversion"]).trim(), "1.6.0");

    // A GPI-2 program, built the way GPI-2's users build one.
    let src = dir.path().join("app.c");
    std::fs::write(&src, PROGRAM).expect("writing app.c");
    let app = dir.path().join("app");
    let mut cc = Command::new("sh");
    cc.arg("-c").arg(format!(
        "cc -Wall -Werror {} {flags} -o {}",
        src.display(),
        app.display()
    ));
    ok(cc);
    // Under the installed gaspi_run (GPI-2's command line) and gaspi-run.
    let machines = dir.path().join("machines");
    std::fs::write(&machines, "localhost\nlocalhost\n").expect("writing machines");
    let mut gpi2 = Command::new(prefix.join("bin/gaspi_run"));
    gpi2.arg("-m").arg(&machines).arg(&app);
    run_job(gpi2, 2, "installed rank");
    let mut ours = Command::new(prefix.join("bin/gaspi-run"));
    ours.args(["-n", "3"]).arg(&app);
    run_job(ours, 3, "installed rank");

    // Fortran, with the installed modules.
    if !have("gfortran") {
        return skip("install_fortran", "no gfortran on this machine");
    }
    for m in ["gaspi.mod", "gaspi_ext.mod", "gaspi_types.mod"] {
        assert!(prefix.join("include").join(m).is_file(), "{m}");
    }
    let fsrc = dir.path().join("app.f90");
    std::fs::write(&fsrc, FORTRAN).expect("writing app.f90");
    let fapp = dir.path().join("fapp");
    let mut fc = Command::new("sh");
    fc.arg("-c").arg(format!(
        "gfortran {} {flags} -o {}",
        fsrc.display(),
        fapp.display()
    ));
    ok(fc);
    let mut run = Command::new(prefix.join("bin/gaspi-run"));
    run.args(["-n", "2"]).arg(&fapp);
    run_job(run, 2, "installed fortran rank");
}
