//! Generates the libfabric binding (feature `link` only; without it the
//! crate is empty and this script does nothing).
//!
//! libfabric's calls are mostly `static inline` functions in its headers
//! that jump through the object's operations table (`fi_write` calls
//! `ep->rma->write`), so a binding of the shared library's symbols alone
//! cannot call them. bindgen's `wrap_static_fns` writes a C file with one
//! exported wrapper per inline function (`fi_write__extern`), which `cc`
//! compiles and links here; the Rust declarations point at those
//! wrappers. See docs/decisions/0045-libfabric-binding.md.

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=wrapper.h");
    #[cfg(feature = "link")]
    generate();
}

#[cfg(feature = "link")]
fn generate() {
    use std::path::PathBuf;

    let library = pkg_config::Config::new()
        .atleast_version("1.17")
        .probe("libfabric")
        .unwrap_or_else(|e| {
            panic!(
                "libfabric >= 1.17 not found through pkg-config ({e}); \
                 on Debian: apt-get install libfabric-dev libclang-dev pkg-config"
            )
        });
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let wrappers = out.join("static_wrappers");
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function("fi_.*")
        .allowlist_type("fi_.*|fid.*")
        .allowlist_var("FI_.*|FID_.*")
        .wrap_static_fns(true)
        .wrap_static_fns_path(&wrappers)
        // C enums as plain constants under their C names (FI_EP_RDM).
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for dir in &library.include_paths {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder
        .generate()
        .expect("bindgen could not read libfabric's headers (is libclang installed?)");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");

    // The wrappers of the static inline functions.
    let mut shim = cc::Build::new();
    shim.file(wrappers.with_extension("c"))
        .include(std::env::current_dir().expect("cwd"))
        .flag_if_supported("-Wno-unused-parameter")
        // fi_tx_size_left and fi_rx_size_left are deprecated but still
        // inline in 1.17 headers; their wrappers are harmless.
        .flag_if_supported("-Wno-deprecated-declarations");
    for dir in &library.include_paths {
        shim.include(dir);
    }
    shim.compile("gaspi_libfabric_shim");
}
