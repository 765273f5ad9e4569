//! The binding links against the system's PMIx and its calls answer
//! without a server: the version string, and "not initialized".
#![cfg(feature = "link")]

use gaspi_pmix_sys as sys;
use std::ffi::CStr;

#[test]
fn the_library_links_and_answers_without_a_server() {
    // SAFETY: PMIx_Get_version returns a static string; PMIx_Initialized
    // reads the library's own state; PMIx_Error_string a static string.
    unsafe {
        let v = CStr::from_ptr(sys::PMIx_Get_version()).to_string_lossy();
        assert!(v.contains("PMIx"), "{v}");
        assert_eq!(sys::PMIx_Initialized(), 0);
        let e = CStr::from_ptr(sys::PMIx_Error_string(sys::PMIX_ERR_NOT_FOUND)).to_string_lossy();
        assert!(
            e.to_ascii_uppercase().contains("NOT-FOUND") || e.contains("NOT"),
            "{e}"
        );
    }
}
