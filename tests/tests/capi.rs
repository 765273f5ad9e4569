//! The GPI-2 compatible C interface (`runtime/capi`): the C and C++
//! programs of `tests/capi/` are compiled with the system's `cc`/`c++`
//! against `GASPI.h` and `libGPI2.so`, then run under `gaspi-run` with 2
//! and 4 ranks, as a GPI-2 user would run them.

use gaspi_tests::{built_with, capi_library, compile_c, gaspi_run, rank_bin, skip, Job, TempDir};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// The compiled programs, once per test process.
struct Programs {
    /// Under cargo's scratch folder for integration tests
    /// (`CARGO_TARGET_TMPDIR`): a static is never dropped, so a folder
    /// under /tmp would outlive every run.
    dir: PathBuf,
}

impl Programs {
    fn get(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lies in the workspace")
        .to_path_buf()
}

/// Builds the library and compiles every program; `None` (after saying
/// why) when this machine has no C compiler.
fn programs() -> Option<&'static Programs> {
    static PROGRAMS: OnceLock<Option<Programs>> = OnceLock::new();
    PROGRAMS
        .get_or_init(|| {
            if Command::new("cc").arg("--version").output().is_err() {
                return None;
            }
            // The launcher first: Job::new builds it from the path of the
            // first program it sees, which must be in the target directory.
            gaspi_run(&rank_bin!());
            let lib = capi_library(&rank_bin!());
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capi-programs");
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("creating the programs' folder");
            // The soname is libGPI2.so.0, as GPI-2's: programs need both names.
            for name in ["libGPI2.so", "libGPI2.so.0"] {
                std::os::unix::fs::symlink(&lib, dir.as_path().join(name)).expect("symlink");
            }
            let src = root().join("tests/capi");
            for name in [
                "hello",
                "pingpong",
                "families",
                "errors",
                "fault",
                "abi",
                "profile",
                "local_offset",
            ] {
                let source = src.join(format!("{name}.c"));
                compile_c(
                    "cc",
                    "-std=c11",
                    &source,
                    dir.as_path(),
                    &dir.as_path().join(name),
                )
                .unwrap_or_else(|e| panic!("{e}"));
            }
            compile_c(
                "c++",
                "-std=c++17",
                &src.join("hello.cpp"),
                dir.as_path(),
                &dir.as_path().join("hello_cpp"),
            )
            .unwrap_or_else(|e| panic!("{e}"));
            Some(Programs { dir })
        })
        .as_ref()
}

/// Runs `program` with `ranks` ranks; every rank must exit 0 and print
/// `needle` once.
fn run_checked(test: &str, program: &str, ranks: u32, needle: &str) {
    let Some(p) = programs() else {
        return skip(test, "no C compiler (cc) on this machine");
    };
    let out = Job::new(&p.get(program), ranks).run();
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with(needle),
        ranks as usize,
        "{}",
        out.dump()
    );
}

#[test]
fn the_abi_matches_gpi2_1_6() {
    let Some(p) = programs() else {
        return skip(
            "the_abi_matches_gpi2_1_6",
            "no C compiler (cc) on this machine",
        );
    };
    // Compiling abi.c already checked the sizes, offsets and codes.
    let out = Command::new(p.get("abi")).output().expect("running abi");
    assert!(
        out.status.success() && String::from_utf8_lossy(&out.stdout).contains("ABI checked"),
        "{out:?}"
    );
}

#[test]
fn the_library_carries_gpi2s_soname_and_every_header_function() {
    let Some(p) = programs() else {
        return skip("soname", "no C compiler (cc) on this machine");
    };
    let lib = p.get("libGPI2.so");
    let Ok(out) = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
    else {
        return skip("soname", "no nm on this machine");
    };
    let symbols = String::from_utf8_lossy(&out.stdout);
    let headers = ["GASPI.h", "GASPI_Ext.h", "PGASPI.h", "GASPI_Threads.h"]
        .map(|h| std::fs::read_to_string(root().join("runtime/capi/include").join(h)).unwrap())
        .join("\n");
    // Declarations start a line with their return type.
    let declared: Vec<&str> = headers
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            ["gaspi_return_t ", "void ", "gaspi_string_t "]
                .iter()
                .find_map(|t| l.strip_prefix(t))
        })
        .filter_map(|rest| rest.split([' ', '(']).next())
        .filter(|f| f.starts_with("gaspi_") || f.starts_with("pgaspi_"))
        .collect();
    assert!(declared.len() > 85, "{declared:?}");
    // PGASPI.h: a profiling name for every gaspi_ function but the variadic
    // printf pair and GASPI_Threads.h's (GPI-2 1.6 has none for those).
    for f in declared.iter().filter(|f| f.starts_with("gaspi_")) {
        if !matches!(*f, "gaspi_printf" | "gaspi_printf_to") && !f.starts_with("gaspi_threads_") {
            let p = format!("p{f}");
            assert!(declared.contains(&p.as_str()), "{p} is not declared");
        }
    }
    for f in declared {
        assert!(
            symbols.lines().any(|l| l.ends_with(&format!(" T {f}"))),
            "{f} is declared but not exported"
        );
    }
    if let Ok(out) = Command::new("readelf").arg("-d").arg(&lib).output() {
        let dynamic = String::from_utf8_lossy(&out.stdout);
        assert!(dynamic.contains("[libGPI2.so.0]"), "{dynamic}");
    }
}

#[test]
fn hello_in_c_runs_under_gaspi_run() {
    run_checked("hello_2", "hello", 2, "hello from rank");
    run_checked("hello_4", "hello", 4, "hello from rank");
}

#[test]
fn a_malformed_gaspi_variable_fails_init_instead_of_splitting_the_job() {
    let Some(p) = programs() else {
        return skip("malformed_env", "no C compiler (cc) on this machine");
    };
    // Read with the defaults, these would start every process as a job of
    // one rank (rank 0 of 1) that exits 0.
    for (k, v) in [
        ("GASPI_TRANSPORT", "bogus"),
        ("GASPI_SEGMENT_SIZE_MAX", "xyz"),
    ] {
        let out = Job::new(&p.get("hello"), 2).env(k, v).run();
        assert_ne!(out.code, 0, "{k}={v}: {}", out.dump());
        assert_eq!(
            out.stdout_lines_with("hello from rank"),
            0,
            "{}",
            out.dump()
        );
        assert!(
            out.stderr
                .contains("gaspi_proc_init (GASPI_BLOCK) returned 5"),
            "{k}={v}: init must fail with GASPI_ERR_CONFIG: {}",
            out.dump()
        );
    }
}

/// Decision 0060: a local offset computed as `(char*)&variable -
/// segment_base` (GPI-2 code that ran on GPI-2's unchecked release build)
/// is refused before anything moves, over shared memory (`auto` on one
/// host) and over TCP, and
/// the log line says which offset, how far outside which segment, and that
/// GPI-2's debug library refuses it too.
#[test]
fn local_offsets_outside_the_segment_are_refused_with_a_reason_over_shm_and_tcp() {
    let Some(p) = programs() else {
        return skip("local_offset", "no C compiler (cc) on this machine");
    };
    for transport in ["auto", "tcp"] {
        let out = Job::new(&p.get("local_offset"), 2)
            .env("GASPI_TRANSPORT", transport)
            .run();
        out.assert_success();
        assert_eq!(
            out.stdout_lines_with("local offsets outside the segment refused"),
            2,
            "{transport}: {}",
            out.dump()
        );
        for said in [
            "bytes past the end of",
            "GASPI_ERR_INV_LOC_OFF",
            "libGPI2-dbg",
            "(1048576 bytes)",
        ] {
            assert!(
                out.stderr.contains(said),
                "{transport}: {said}: {}",
                out.dump()
            );
        }
        // The stack lies far from the segment, before or after it.
        assert!(
            out.stderr.contains("bytes before the start of")
                || out.stderr.matches("bytes past the end of").count() > 2,
            "{transport}: {}",
            out.dump()
        );
    }
}

#[test]
fn write_notify_ring_carries_checked_data_with_2_and_4_ranks() {
    run_checked("pingpong_2", "pingpong", 2, "200 rounds checked");
    run_checked("pingpong_4", "pingpong", 4, "200 rounds checked");
}

#[test]
fn a_pmpi_style_profiler_wraps_calls_through_the_pgaspi_names() {
    run_checked("profile_3", "profile", 3, "profiling checked");
}

#[test]
fn every_call_family_works_with_2_ranks() {
    run_checked("families_2", "families", 2, "every family checked");
}

#[test]
fn every_call_family_works_with_4_ranks() {
    run_checked("families_4", "families", 4, "every family checked");
}

/// The C interface over the libfabric transport's `tcp;ofi_rxm` provider,
/// every rank reaching every other over it (`GASPI_TRANSPORT=libfabric`):
/// the call families and the write-notify ring pass as over shared
/// memory, and each rank's start-up line says libfabric carried them.
/// Runs in a build with `--features gaspi/libfabric` (the library is
/// built with the test's own transports) where the provider is offered;
/// elsewhere skipped with the reason printed.
#[test]
fn the_c_interface_runs_over_libfabric() {
    let test = "capi_over_libfabric";
    if !built_with(test, "libfabric") {
        return;
    }
    let Some(p) = programs() else {
        return skip(test, "no C compiler (cc) on this machine");
    };
    for (program, ranks, needle) in [
        ("families", 2, "every family checked"),
        ("pingpong", 3, "200 rounds checked"),
    ] {
        let out = Job::new(&p.get(program), ranks)
            .env("GASPI_TRANSPORT", "libfabric")
            .env("GASPI_NET_PROVIDER", "tcp;ofi_rxm")
            .env("GASPI_LOG", "info")
            .run();
        if let Some(line) = out
            .stderr
            .lines()
            .find(|l| l.contains("no libfabric provider"))
        {
            return skip(test, line.trim());
        }
        out.assert_success();
        assert_eq!(
            out.stdout_lines_with(needle),
            ranks as usize,
            "{program}: {}",
            out.dump()
        );
        let line = format!("tcp to 0 ranks, libfabric to {} ranks", ranks - 1);
        assert_eq!(
            out.stderr.matches(&line).count(),
            ranks as usize,
            "{program}: not every rank used libfabric:\n{}",
            out.dump()
        );
    }
}

#[test]
fn bad_input_gets_gpi2s_error_codes() {
    run_checked("errors_2", "errors", 2, "every error code checked");
    run_checked("errors_4", "errors", 4, "every error code checked");
}

#[test]
fn cpp_programs_use_the_header() {
    run_checked("cpp_2", "hello_cpp", 2, "C++ checked");
}

#[test]
fn survivors_of_a_killed_rank_get_gaspi_error_and_a_corrupt_state_without_hanging() {
    let Some(p) = programs() else {
        return skip("fault", "no C compiler (cc) on this machine");
    };
    for ranks in [2u32, 4] {
        let started = Instant::now();
        let out = Job::new(&p.get("fault"), ranks)
            .launcher_args(&["--keep-going"])
            .timeout(Duration::from_secs(60))
            .run();
        // The killed rank's status is the job's; every survivor checked
        // its codes and state vector and said so.
        assert_ne!(out.code, 0, "{}", out.dump());
        assert_eq!(
            out.stdout_lines_with(&format!("survived rank {}", ranks - 1)),
            ranks as usize - 1,
            "{}",
            out.dump()
        );
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{}",
            out.dump()
        );
    }
}

/// The GPU programs of `tests/capi/gpu/` (a `cudaMalloc`'d buffer bound as
/// a segment; a kernel answering with the device API through
/// `gaspi_device_context`) need nvcc and a GPU. Where both exist they run
/// here through `tests/capi/gpu/run.sh`; elsewhere the test says so and
/// skips (they run on the GPU machine through `bench/gpu/run-all.sh`).
#[test]
fn gpu_programs_run_where_there_is_a_gpu() {
    let gpu = Command::new("nvidia-smi")
        .arg("-L")
        .output()
        .is_ok_and(|o| o.status.success());
    let nvcc = Command::new("nvcc").arg("--version").output().is_ok();
    if !gpu || !nvcc {
        return skip(
            "capi gpu programs",
            "no GPU or no nvcc on this machine; tests/capi/gpu/run.sh runs them on a GPU \
             machine (bench/gpu/run-all.sh)",
        );
    }
    let dir = TempDir::new("capi-gpu");
    let d = dir.path();
    std::fs::create_dir_all(d.join("src/gpu")).unwrap();
    let lib = capi_library(&rank_bin!());
    std::fs::copy(&lib, d.join("libGPI2.so")).unwrap();
    std::fs::copy(gaspi_run(&rank_bin!()), d.join("gaspi-run")).unwrap();
    std::os::unix::fs::symlink(root().join("runtime/capi/include"), d.join("include")).unwrap();
    std::fs::copy(root().join("tests/capi/check.h"), d.join("src/check.h")).unwrap();
    for f in ["bind_gpu.c", "device_kernel.cu"] {
        std::fs::copy(
            root().join("tests/capi/gpu").join(f),
            d.join("src/gpu").join(f),
        )
        .unwrap();
    }
    std::fs::copy(
        root().join("gpu-kernels/cuda/gaspi_device.cuh"),
        d.join("src/gpu/gaspi_device.cuh"),
    )
    .unwrap();
    let out = Command::new("bash")
        .arg(root().join("tests/capi/gpu/run.sh"))
        .arg(d)
        .output()
        .expect("running run.sh");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && stdout.contains("CAPI_GPU_TESTS passed=2 failed=0"),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// The Fortran module (`runtime/capi/fortran/gaspi.f90`, iso_c_binding
/// interfaces) and a Fortran program using it (`tests/capi/fortran/ring.f90`:
/// a checked write_notify ring, a list write, allreduce, an atomic, group
/// queries, error codes), run with 3 ranks. Skipped without gfortran.
#[test]
fn fortran_programs_use_the_module() {
    let Some(p) = programs() else {
        return skip("fortran", "no C compiler (cc) on this machine");
    };
    if Command::new("gfortran").arg("--version").output().is_err() {
        return skip("fortran", "no gfortran on this machine");
    }
    let modules = TempDir::new("fortran-mod");
    let exe = p.get("fortran_ring");
    let out = Command::new("gfortran")
        .args(["-std=f2008", "-Wall", "-Werror", "-O2", "-J"])
        .arg(modules.path())
        .arg(root().join("runtime/capi/fortran/gaspi.f90"))
        .arg(root().join("tests/capi/fortran/ring.f90"))
        .arg("-L")
        .arg(p.dir.as_path())
        .arg("-lGPI2")
        .arg(format!("-Wl,-rpath,{}", p.dir.as_path().display()))
        .arg("-o")
        .arg(&exe)
        .output()
        .expect("running gfortran");
    assert!(
        out.status.success(),
        "gfortran failed:\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let run = Job::new(&exe, 3).run();
    run.assert_success();
    assert_eq!(
        run.stdout_lines_with("fortran checked"),
        3,
        "{}",
        run.dump()
    );
}

/// The committed Fortran module is what its generator writes from the
/// headers, so it binds every function they declare (but the documented
/// exceptions). Skipped without python3.
#[test]
fn the_fortran_module_is_generated_from_the_headers() {
    let out = Command::new("python3")
        .arg(root().join("runtime/capi/fortran/gen_gaspi_f90.py"))
        .arg("--check")
        .current_dir(root())
        .output();
    match out {
        Err(_) => skip("fortran module", "no python3 on this machine"),
        Ok(out) => assert!(
            out.status.success(),
            "runtime/capi/fortran/gaspi.f90 differs from what gen_gaspi_f90.py writes \
             (run it from the repository root): {out:?}"
        ),
    }
}

#[test]
fn c_programs_start_under_open_mpi_mpirun_as_rust_programs_do() {
    let name = "c_programs_start_under_open_mpi_mpirun_as_rust_programs_do";
    if !Path::new("/usr/bin/mpirun").exists() {
        return skip(
            name,
            "Open MPI's mpirun is not installed (apt-get install openmpi-bin)",
        );
    }
    let Some(p) = programs() else {
        return skip(name, "no C compiler (cc) on this machine");
    };
    let before = gaspi_tests::shm_files();
    let keys = TempDir::new("capi-ompi-key");
    let tag = gaspi_tests::fresh_tag();
    // No gaspi-run: the library finds its rank, the job size and the
    // rendezvous in Open MPI's environment, as the Rust runtime does.
    let mut cmd = Command::new("/usr/bin/mpirun");
    gaspi_tests::clean_env(&mut cmd);
    cmd.env("GASPI_KEY_FILE", keys.path().join("job.key"))
        .env("GASPI_LOG", "info")
        .args(["--allow-run-as-root", "--oversubscribe", "-n", "3"])
        .args(["-x", "GASPI_KEY_FILE", "-x", "GASPI_LOG"])
        // Open MPI's variables, whatever the library's build (its PMIx
        // bootstrap is tested in pmix.rs).
        .args(["-x", "GASPI_BOOTSTRAP=own"])
        .args(["-x", gaspi_tests::TAG_VAR])
        .arg(p.get("pingpong"));
    let out = gaspi_tests::Running::spawn(cmd, &tag).finish(Duration::from_secs(120));
    out.assert_success();
    assert_eq!(
        out.stdout_lines_with("200 rounds checked"),
        3,
        "{}",
        out.dump()
    );
    let by_mpirun = out
        .stderr
        .lines()
        .filter(|l| l.contains("launcher OpenMpi"))
        .count();
    assert_eq!(
        by_mpirun,
        3,
        "each rank must see Open MPI's launch:\n{}",
        out.dump()
    );
    out.assert_nothing_left(&before);
}
