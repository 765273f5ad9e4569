//! Gives `libGPI2.so` GPI-2 1.6's soname and builds the one piece that must
//! be C: the variadic `gaspi_printf` family (stable Rust cannot define a
//! C-variadic function; `src/printf.rs` forwards to it).

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-changed=src/printf.c");
    println!("cargo:rerun-if-changed=include");
    // GPI-2 1.6 is built by libtool without -version-info: soname libGPI2.so.0.
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libGPI2.so.0");
    // The library's own references (pgaspi_X's jump to gaspi_X) bind inside
    // it: a profiler's gaspi_X that calls pgaspi_X must not be re-entered
    // (src/pgaspi.rs).
    println!("cargo:rustc-cdylib-link-arg=-Wl,-Bsymbolic-functions");

    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let obj = out.join("printf.o");
    let lib = out.join("libgaspi_capi_printf.a");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let status = Command::new(&cc)
        .args([
            "-c",
            "-O2",
            "-fPIC",
            "-Wall",
            "-Werror",
            "-Iinclude",
            "src/printf.c",
            "-o",
        ])
        .arg(&obj)
        .status()
        .unwrap_or_else(|e| panic!("running the C compiler `{cc}`: {e}"));
    assert!(status.success(), "compiling src/printf.c failed");
    let _ = std::fs::remove_file(&lib);
    let status = Command::new("ar")
        .arg("crs")
        .arg(&lib)
        .arg(&obj)
        .status()
        .unwrap_or_else(|e| panic!("running ar: {e}"));
    assert!(status.success(), "ar failed");
    println!("cargo:rustc-link-search=native={}", out.display());
    println!("cargo:rustc-link-lib=static=gaspi_capi_printf");
}
