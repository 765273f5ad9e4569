//! Generates the PMIx binding (feature `link` only; without it the crate
//! is empty and this script does nothing).
//!
//! Only what the runtime's bootstrap calls is allowlisted: the client's
//! `PMIx_Init` / `PMIx_Finalize`, `PMIx_Put` / `PMIx_Commit` / `PMIx_Get` /
//! `PMIx_Fence`, the value and info helpers the library exports, and the
//! types, attribute names and status codes those need. PMIx's own
//! `PMIX_LOAD_PROCID`-style helpers are C macros (not in the library):
//! the runtime does their work itself. See
//! docs/decisions/0084-pmix-bootstrap.md.

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
        .atleast_version("4")
        .probe("pmix")
        .unwrap_or_else(|e| {
            panic!(
                "PMIx >= 4 not found through pkg-config ({e}); \
                 on Debian: apt-get install libpmix-dev libclang-dev pkg-config"
            )
        });
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("OUT_DIR"));
    let mut builder = bindgen::Builder::default()
        .header("wrapper.h")
        .allowlist_function(
            "PMIx_(Init|Finalize|Initialized|Put|Commit|Get|Fence|Error_string|Value_destruct|Info_load|Get_version)",
        )
        .allowlist_type("pmix_(proc|value|info|byte_object|status|rank|data_type|scope|nspace|key)_t")
        .allowlist_var(
            "PMIX_(SUCCESS|ERR_NOT_FOUND|ERR_TIMEOUT|ERR_UNREACH|RANK_WILDCARD|RANK_UNDEF|MAX_NSLEN|MAX_KEYLEN\
             |GLOBAL|REMOTE|LOCAL|BOOL|INT|UINT16|UINT32|BYTE_OBJECT|STRING\
             |JOB_SIZE|UNIV_SIZE|LOCAL_SIZE|LOCAL_RANK|TIMEOUT|COLLECT_DATA|HOSTNAME|NODEID)",
        )
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()));
    for dir in &library.include_paths {
        builder = builder.clang_arg(format!("-I{}", dir.display()));
    }
    let bindings = builder
        .generate()
        .expect("bindgen could not read PMIx's headers (is libclang installed?)");
    bindings
        .write_to_file(out.join("bindings.rs"))
        .expect("write bindings.rs");
}
