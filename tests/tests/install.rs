//! The install step (`install.sh`, decision 0031), as a GPI-2 user runs it:
//! into a fresh prefix, then a C program built with `pkg-config --cflags
//! --libs GPI2` (and a Fortran one with the installed modules) runs under
//! the installed `gaspi_run` and `gaspi-run`; a C++ project built with
//! CMake through a `FindGPI2.cmake` of the shape GPI-2 projects carry, in
//! Release and Debug; the installed files against the list GPI-2 1.6's
//! `make install` leaves; and GPI-2's helper programs `gaspi_cleanup` and
//! `gaspi_logger`.

use gaspi_tests::{
    capi_library, clean_env, fresh_tag, gaspi_run, gpi2_launcher, launch_programs, rank_bin, skip,
    Running, TempDir,
};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
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

/// Runs `install.sh --no-build` with the build of this test run, once per
/// test process, into a fresh prefix in cargo's directory for integration
/// tests' files (under the target directory: replaced by the next run, so
/// nothing is left outside the build); returns the prefix.
fn installed() -> PathBuf {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX
        .get_or_init(|| {
            gaspi_run(&rank_bin!());
            gpi2_launcher(&rank_bin!());
            launch_programs(&rank_bin!());
            let lib = capi_library(&rank_bin!());
            let from = lib.parent().expect("a target directory");
            let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join("install-prefix");
            let _ = std::fs::remove_dir_all(&prefix);
            let mut install = Command::new("bash");
            install
                .arg(root().join("install.sh"))
                .arg("--no-build")
                .arg("--from")
                .arg(from)
                .arg("--prefix")
                .arg(&prefix);
            ok(install);
            prefix
        })
        .clone()
}

#[test]
fn install_sh_puts_a_gpi2_that_pkg_config_programs_run_with_under_a_prefix() {
    for tool in ["cc", "pkg-config", "bash", "nm"] {
        if !have(tool) {
            return skip("install", &format!("no {tool} on this machine"));
        }
    }
    let dir = TempDir::new("install");
    let prefix = installed();

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

/// What GPI-2 1.6.0's `./configure --prefix=P && make install` leaves under
/// P (default options: debug and statistics libraries on, Fortran modules
/// where a Fortran compiler is), files and symbolic links. Kept here so that
/// nothing drifts.
const GPI2_1_6_INSTALLS: &[&str] = &[
    "bin/gaspi_cleanup",
    "bin/gaspi_logger",
    "bin/gaspi_run",
    "bin/ssh.spawner",
    "include/GASPI.h",
    "include/GASPI_Ext.h",
    "include/GASPI_Threads.h",
    "include/GASPI_types.h",
    "include/GPI2_VERSION.h",
    "include/PGASPI.h",
    "include/gaspi.mod",
    "include/gaspi_ext.mod",
    "include/gaspi_types.mod",
    "lib/libGPI2-dbg.a",
    "lib/libGPI2-dbg.la",
    "lib/libGPI2-dbg.so",
    "lib/libGPI2-dbg.so.0",
    "lib/libGPI2-dbg.so.0.0.0",
    "lib/libGPI2-stats.a",
    "lib/libGPI2-stats.la",
    "lib/libGPI2-stats.so",
    "lib/libGPI2-stats.so.0",
    "lib/libGPI2-stats.so.0.0.0",
    "lib/libGPI2.a",
    "lib/libGPI2.la",
    "lib/libGPI2.so",
    "lib/libGPI2.so.0",
    "lib/libGPI2.so.0.0.0",
    "lib/pkgconfig/GPI2.pc",
    "tests/README",
    "tests/defs/barrier_recover.def",
    "tests/defs/barrier_recover_ping.def",
    "tests/defs/cmd_line_args.def",
    "tests/defs/default_ib.def",
    "tests/defs/default_tcp.def",
    "tests/runtests.sh",
];

/// GPI-2's files that are not ours to install: the driver and settings of
/// GPI-2's own test suite, whose programs GPI-2 builds from its source tree
/// (ours runs that suite from GPI-2's tree: tests/gpi2-conformance.sh).
const GPI2_ONLY: &[&str] = &[
    "tests/README",
    "tests/defs/barrier_recover.def",
    "tests/defs/barrier_recover_ping.def",
    "tests/defs/cmd_line_args.def",
    "tests/defs/default_ib.def",
    "tests/defs/default_tcp.def",
    "tests/runtests.sh",
];

/// Ours beyond GPI-2's: this runtime's launcher and the Fortran modules'
/// source (decision 0031).
const OURS_ONLY: &[&str] = &["bin/gaspi-run", "include/gaspi.f90"];

/// Every file and symbolic link under `dir`, relative to `base`.
fn tree(base: &Path, dir: &Path, out: &mut BTreeSet<String>) {
    for entry in std::fs::read_dir(dir).expect("reading the prefix") {
        let entry = entry.expect("a directory entry");
        let path = entry.path();
        let kind = entry.file_type().expect("a file type");
        if kind.is_dir() {
            tree(base, &path, out);
        } else {
            let rel = path.strip_prefix(base).expect("under the prefix");
            out.insert(rel.to_string_lossy().into_owned());
        }
    }
}

#[test]
fn install_sh_installs_every_file_gpi2_1_6_installs() {
    for tool in ["cc", "bash", "nm"] {
        if !have(tool) {
            return skip("install_files", &format!("no {tool} on this machine"));
        }
    }
    let prefix = installed();
    let mut installed = BTreeSet::new();
    tree(&prefix, &prefix, &mut installed);
    // The Fortran modules come with a Fortran compiler, in GPI-2 as here.
    let fortran = have("gfortran");
    let expected: BTreeSet<String> = GPI2_1_6_INSTALLS
        .iter()
        .filter(|f| !GPI2_ONLY.contains(f))
        .filter(|f| fortran || !f.ends_with(".mod"))
        .chain(OURS_ONLY)
        .map(|f| f.to_string())
        .collect();
    let missing: Vec<_> = expected.difference(&installed).collect();
    let extra: Vec<_> = installed.difference(&expected).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "installed files differ from GPI-2 1.6's list: missing {missing:?}, not in it {extra:?}"
    );

    // Each library as GPI-2's libtool lays it out: the file, the soname
    // link, the link for -l, the archive, the libtool file naming them.
    let l = prefix.join("lib");
    for name in ["GPI2", "GPI2-dbg", "GPI2-stats"] {
        let real = format!("lib{name}.so.0.0.0");
        for link in [format!("lib{name}.so"), format!("lib{name}.so.0")] {
            let target = std::fs::read_link(l.join(&link)).expect("a symbolic link");
            assert_eq!(target, Path::new(&real), "{link}");
        }
        if have("readelf") {
            let mut readelf = Command::new("readelf");
            readelf.arg("-d").arg(l.join(&real));
            let dynamic = ok(readelf);
            assert!(
                dynamic.contains(&format!("Library soname: [lib{name}.so.0]")),
                "{real}: {dynamic}"
            );
        }
        let la = std::fs::read_to_string(l.join(format!("lib{name}.la"))).expect("the .la file");
        assert!(la.contains(&format!("dlname='lib{name}.so.0'")), "{la}");
        assert!(la.contains(&format!("old_library='lib{name}.a'")), "{la}");
        assert!(la.contains(&format!("libdir='{}'", l.display())), "{la}");
        assert!(la.contains("installed=yes"), "{la}");
    }
    // The three export the same interface.
    let exports = |lib: &str| {
        let mut nm = Command::new("nm");
        nm.args(["-D", "--defined-only"]).arg(l.join(lib));
        ok(nm)
            .lines()
            .filter_map(|l| l.split_whitespace().nth(2).map(str::to_string))
            .collect::<BTreeSet<_>>()
    };
    let main = exports("libGPI2.so");
    assert!(main.contains("gaspi_proc_init") && main.contains("pgaspi_write_notify"));
    assert_eq!(exports("libGPI2-dbg.so"), main);
    assert_eq!(exports("libGPI2-stats.so"), main);
    // And need every library libGPI2.so needs (a libfabric or verbs
    // build's too), which the .la files give static links: else the
    // -dbg and -stats links leave fi_* / ibv_* undefined.
    if have("readelf") {
        let needed = |lib: &str| {
            let mut readelf = Command::new("readelf");
            readelf.arg("-d").arg(l.join(lib));
            ok(readelf)
                .lines()
                .filter(|line| line.contains("(NEEDED)"))
                .filter_map(|line| Some(line.split_once('[')?.1.split_once(']')?.0.to_string()))
                .collect::<BTreeSet<_>>()
        };
        let main = needed("libGPI2.so");
        for name in ["GPI2-dbg", "GPI2-stats"] {
            let lib = format!("lib{name}.so");
            let theirs = needed(&lib);
            assert!(
                main.is_subset(&theirs),
                "{lib} needs {theirs:?}, libGPI2.so {main:?}"
            );
            let la =
                std::fs::read_to_string(l.join(format!("lib{name}.la"))).expect("the .la file");
            for soname in main.iter().filter(|n| !n.starts_with("ld-linux")) {
                let flag = soname
                    .split_once(".so")
                    .map_or(soname.as_str(), |(stem, _)| stem);
                let flag = format!("-l{}", flag.trim_start_matches("lib"));
                assert!(la.contains(&flag), "{name}.la names no {flag}: {la}");
            }
        }
    }

    // GPI2_VERSION.h: GPI-2's version macros, 1.6.0.
    let version =
        std::fs::read_to_string(prefix.join("include/GPI2_VERSION.h")).expect("GPI2_VERSION.h");
    for m in [
        "GASPI_MAJOR_VERSION (1)",
        "GASPI_MINOR_VERSION (6)",
        "GASPI_REVISION (0)",
        "GASPI_VERSION",
    ] {
        assert!(version.contains(m), "{m}: {version}");
    }
    // ssh.spawner refuses GPI-2's own spawner arguments with a reason.
    let spawner = Command::new(prefix.join("bin/ssh.spawner"))
        .args(["master", "0", "machines", "1", "0", "0", "1", "0", "prog"])
        .output()
        .expect("running ssh.spawner");
    assert!(!spawner.status.success());
    assert!(String::from_utf8_lossy(&spawner.stderr).contains("gaspi_run -m"));
}

/// A `FindGPI2.cmake` of the shape GPI-2 projects carry: GASPI.h, libGPI2,
/// libGPI2-dbg (linked in Debug builds) and gaspi_run all required.
const FIND_GPI2: &str = r#"
# FindGPI2: GPI-2's headers, libraries and launcher.
#   GPI2_FOUND, GPI2_INCLUDE_DIRS, GPI2_LIBRARIES, GPI2_GASPI_RUN and the
#   imported target GPI2::GPI2 (libGPI2-dbg in Debug builds).
find_path(GPI2_INCLUDE_DIR NAMES GASPI.h
  HINTS ${GPI2_ROOT} ENV GPI2_HOME PATH_SUFFIXES include)
find_library(GPI2_LIBRARY NAMES GPI2
  HINTS ${GPI2_ROOT} ENV GPI2_HOME PATH_SUFFIXES lib lib64)
find_library(GPI2_DBG_LIBRARY NAMES GPI2-dbg
  HINTS ${GPI2_ROOT} ENV GPI2_HOME PATH_SUFFIXES lib lib64)
find_program(GPI2_GASPI_RUN NAMES gaspi_run
  HINTS ${GPI2_ROOT} ENV GPI2_HOME PATH_SUFFIXES bin)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(GPI2 REQUIRED_VARS
  GPI2_LIBRARY GPI2_DBG_LIBRARY GPI2_INCLUDE_DIR GPI2_GASPI_RUN)
if(GPI2_FOUND AND NOT TARGET GPI2::GPI2)
  find_package(Threads REQUIRED)
  set(GPI2_INCLUDE_DIRS ${GPI2_INCLUDE_DIR})
  set(GPI2_LIBRARIES optimized ${GPI2_LIBRARY} debug ${GPI2_DBG_LIBRARY})
  add_library(GPI2::GPI2 UNKNOWN IMPORTED)
  set_target_properties(GPI2::GPI2 PROPERTIES
    IMPORTED_CONFIGURATIONS "RELEASE;DEBUG"
    IMPORTED_LOCATION "${GPI2_LIBRARY}"
    IMPORTED_LOCATION_RELEASE "${GPI2_LIBRARY}"
    IMPORTED_LOCATION_DEBUG "${GPI2_DBG_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${GPI2_INCLUDE_DIR}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
mark_as_advanced(GPI2_INCLUDE_DIR GPI2_LIBRARY GPI2_DBG_LIBRARY GPI2_GASPI_RUN)
"#;

const CMAKE_LISTS: &str = r#"
cmake_minimum_required(VERSION 3.13)
project(gpi2_user LANGUAGES CXX)
set(CMAKE_CXX_STANDARD 14)
list(APPEND CMAKE_MODULE_PATH ${CMAKE_CURRENT_SOURCE_DIR}/cmake)
find_package(GPI2 REQUIRED)
add_executable(ring ring.cpp)
target_link_libraries(ring PRIVATE GPI2::GPI2)
"#;

/// Each rank writes its rank into the next one's segment with a
/// notification, and checks what the previous one wrote.
const RING_CPP: &str = r#"
#include <GASPI.h>
#include <GPI2_VERSION.h>
#include <cstdio>
#include <cstring>

static_assert(GASPI_MAJOR_VERSION == 1 && GASPI_MINOR_VERSION == 6, "GPI-2 1.6");

#define CHECK(call) do { if ((call) != GASPI_SUCCESS) { \
  std::printf("FAILED %s line %d\n", #call, __LINE__); return 1; } } while (0)

int main()
{
  CHECK(gaspi_proc_init(GASPI_BLOCK));
  gaspi_rank_t rank, num;
  CHECK(gaspi_proc_rank(&rank));
  CHECK(gaspi_proc_num(&num));
  CHECK(gaspi_segment_create(0, 1 << 16, GASPI_GROUP_ALL, GASPI_BLOCK,
                             GASPI_MEM_INITIALIZED));
  gaspi_pointer_t base;
  CHECK(gaspi_segment_ptr(0, &base));
  unsigned long *words = static_cast<unsigned long *>(base);
  words[0] = 1000 + rank;
  gaspi_rank_t next = (rank + 1) % num;
  CHECK(gaspi_write_notify(0, 0, next, 0, 8, sizeof(unsigned long), 0, 1, 0,
                           GASPI_BLOCK));
  CHECK(gaspi_wait(0, GASPI_BLOCK));
  gaspi_notification_id_t id;
  gaspi_notification_t value;
  CHECK(gaspi_notify_waitsome(0, 0, 1, &id, GASPI_BLOCK));
  CHECK(gaspi_notify_reset(0, id, &value));
  gaspi_rank_t prev = (rank + num - 1) % num;
  if (value != 1 || words[1] != 1000ul + prev) {
    std::printf("FAILED: rank %d got %lu (notification %u)\n", rank, words[1], value);
    return 2;
  }
  CHECK(gaspi_barrier(GASPI_GROUP_ALL, GASPI_BLOCK));
  std::printf("cmake ring rank %d of %d ok\n", rank, num);
  CHECK(gaspi_proc_term(GASPI_BLOCK));
  return 0;
}
"#;

#[test]
fn a_cmake_project_written_for_gpi2_builds_and_runs_against_the_install() {
    for tool in ["cmake", "c++", "cc", "bash", "nm"] {
        if !have(tool) {
            return skip("install_cmake", &format!("no {tool} on this machine"));
        }
    }
    let dir = TempDir::new("install-cmake");
    let prefix = installed();
    let src = dir.path().join("project");
    std::fs::create_dir_all(src.join("cmake")).expect("creating the project");
    std::fs::write(src.join("cmake/FindGPI2.cmake"), FIND_GPI2).expect("writing FindGPI2");
    std::fs::write(src.join("CMakeLists.txt"), CMAKE_LISTS).expect("writing CMakeLists");
    std::fs::write(src.join("ring.cpp"), RING_CPP).expect("writing ring.cpp");
    let machines = dir.path().join("machines");
    std::fs::write(&machines, "localhost\nlocalhost\nlocalhost\n").expect("writing machines");
    for (config, library) in [("Release", "libGPI2.so.0"), ("Debug", "libGPI2-dbg.so.0")] {
        let build = dir.path().join(format!("build-{config}"));
        // The prefix is found as any other: CMAKE_PREFIX_PATH in the
        // environment, no variable of FindGPI2's given by hand.
        let mut configure = Command::new("cmake");
        configure
            .env("CMAKE_PREFIX_PATH", &prefix)
            .env_remove("GPI2_HOME")
            .arg("-S")
            .arg(&src)
            .arg("-B")
            .arg(&build)
            .arg(format!("-DCMAKE_BUILD_TYPE={config}"));
        ok(configure);
        let mut make = Command::new("cmake");
        make.arg("--build").arg(&build);
        ok(make);
        let app = build.join("ring");
        if have("readelf") {
            let mut readelf = Command::new("readelf");
            readelf.arg("-d").arg(&app);
            let dynamic = ok(readelf);
            assert!(
                dynamic.contains(&format!("Shared library: [{library}]")),
                "{config} links {library}: {dynamic}"
            );
        }
        let mut run = Command::new(prefix.join("bin/gaspi_run"));
        run.arg("-m").arg(&machines).arg(&app);
        run_job(run, 3, "cmake ring rank");
    }
}

#[test]
fn gaspi_cleanup_ends_the_leftover_ranks_of_a_program_and_nothing_else() {
    for tool in ["cc", "bash", "nm", "sleep"] {
        if !have(tool) {
            return skip("install_cleanup", &format!("no {tool} on this machine"));
        }
    }
    let dir = TempDir::new("install-cleanup");
    let prefix = installed();
    // A program of a name no other test uses: a copy of sleep, started
    // twice as a rank (GASPI_RANK set, as every launcher sets it) and once
    // as a plain process.
    let sleep = String::from_utf8(
        Command::new("sh")
            .args(["-c", "command -v sleep"])
            .output()
            .expect("finding sleep")
            .stdout,
    )
    .expect("a path");
    let prog = dir.path().join(format!("leftover-{}", fresh_tag()));
    std::fs::copy(sleep.trim(), &prog).expect("copying sleep");
    let start = |rank: Option<&str>| {
        let mut c = Command::new(&prog);
        c.arg("300");
        clean_env(&mut c);
        if let Some(r) = rank {
            c.env("GASPI_RANK", r);
        }
        Reaped(c.spawn().expect("starting the program"))
    };
    let mut ranks = [start(Some("0")), start(Some("1"))];
    let mut bystander = start(None);
    let machines = dir.path().join("machines");
    std::fs::write(&machines, "localhost\nlocalhost\n").expect("writing machines");
    let cleanup = |check: bool| {
        let mut c = Command::new(prefix.join("bin/gaspi_cleanup"));
        c.arg("-m").arg(&machines);
        if check {
            c.arg("-c");
        }
        c.arg(&prog);
        ok(c)
    };
    let listed = cleanup(true);
    for r in &ranks {
        assert!(listed.contains(&format!("pid {}", r.0.id())), "{listed}");
    }
    assert!(
        !listed.contains(&format!("pid {}", bystander.0.id())),
        "{listed}"
    );
    let done = cleanup(false);
    assert!(done.contains("ended 2 rank(s)"), "{done}");
    for r in &mut ranks {
        let status = r.0.wait().expect("waiting for a rank");
        assert!(!status.success(), "a rank ended by a signal");
    }
    assert!(
        bystander.0.try_wait().expect("polling").is_none(),
        "the process that is not a rank still runs"
    );
}

/// A child process killed and reaped when dropped (a failed assertion
/// leaves nothing running).
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn gaspi_logger_prints_what_reaches_its_port() {
    for tool in ["cc", "bash", "nm"] {
        if !have(tool) {
            return skip("install_logger", &format!("no {tool} on this machine"));
        }
    }
    use std::io::{BufRead, BufReader};
    let prefix = installed();
    // A free UDP port above 1024 (the default, 17825, may be taken).
    let port = std::net::UdpSocket::bind("127.0.0.1:0")
        .and_then(|s| s.local_addr())
        .expect("a free port")
        .port();
    let mut logger = Command::new(prefix.join("bin/gaspi_logger"))
        .args(["-p", &port.to_string()])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("starting gaspi_logger");
    let pid = logger.id();
    // A hang guard: the logger runs until stopped; stopped here unless the
    // test got its lines (and then stops it itself, while it is its child).
    let (done, stop) = std::sync::mpsc::channel::<()>();
    let guard = std::thread::spawn(move || {
        if stop.recv_timeout(Duration::from_secs(30)).is_err() {
            let _ = Command::new("kill").arg(pid.to_string()).status();
        }
    });
    let mut lines = BufReader::new(logger.stdout.take().expect("its stdout")).lines();
    let first = lines.next().expect("a first line").expect("text");
    assert!(first.contains(&format!("port {port}")), "{first}");
    let sender = std::net::UdpSocket::bind("127.0.0.1:0").expect("a socket");
    sender
        .send_to(b"[host:   1:0] hello from rank 1\n", ("127.0.0.1", port))
        .expect("sending");
    let line = lines.next().expect("the message").expect("text");
    let _ = done.send(());
    let _ = guard.join();
    let _ = logger.kill();
    let _ = logger.wait();
    assert_eq!(line, "[host:   1:0] hello from rank 1");
}
