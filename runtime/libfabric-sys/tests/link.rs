//! The binding links and calls both kinds of function: one the shared
//! library exports (`fi_getinfo`, `fi_freeinfo`, `fi_strerror`) and
//! inline ones reached through the C shim (`fi_allocinfo`, `fi_fabric`,
//! `fi_close`).
#![cfg(feature = "link")]

use gaspi_libfabric_sys as sys;
use std::ffi::CStr;
use std::ptr;

/// The `tcp;ofi_rxm` provider answers an RDM + RMA query and its fabric
/// opens and closes; an unknown provider name gets -FI_ENODATA.
#[test]
fn getinfo_and_fabric_through_the_shim() {
    // SAFETY: plain libfabric calls on pointers they allocate; every info
    // list is freed once, the fabric closed once.
    unsafe {
        let hints = sys::fi_allocinfo();
        assert!(!hints.is_null(), "fi_allocinfo through the shim");
        (*hints).caps = (sys::FI_RMA) as u64;
        (*(*hints).ep_attr).type_ = sys::FI_EP_RDM;
        let name = c"tcp;ofi_rxm";
        (*(*hints).fabric_attr).prov_name = libc_strdup(name);
        let mut info = ptr::null_mut();
        let rc = sys::fi_getinfo(
            sys::FI_VERSION_1_17,
            ptr::null(),
            ptr::null(),
            0,
            hints,
            &mut info,
        );
        if rc != 0 {
            let why = CStr::from_ptr(sys::fi_strerror(-rc)).to_string_lossy();
            eprintln!("SKIPPED getinfo_and_fabric_through_the_shim: no tcp;ofi_rxm ({why})");
            sys::fi_freeinfo(hints);
            return;
        }
        assert!(!info.is_null());
        let prov = CStr::from_ptr((*(*info).fabric_attr).prov_name);
        assert_eq!(prov.to_str().unwrap(), "tcp;ofi_rxm");
        let mut fabric = ptr::null_mut();
        let rc = sys::fi_fabric((*info).fabric_attr, &mut fabric, ptr::null_mut());
        assert_eq!(rc, 0, "fi_fabric");
        assert_eq!(sys::fi_close(&mut (*fabric).fid), 0, "fi_close");
        sys::fi_freeinfo(info);

        (*(*hints).fabric_attr).prov_name = {
            libc_free((*(*hints).fabric_attr).prov_name);
            libc_strdup(c"no-such-provider")
        };
        let mut none = ptr::null_mut();
        let rc = sys::fi_getinfo(
            sys::FI_VERSION_1_17,
            ptr::null(),
            ptr::null(),
            0,
            hints,
            &mut none,
        );
        assert_eq!(rc, -(sys::FI_ENODATA as i32));
        sys::fi_freeinfo(hints);
    }
}

extern "C" {
    fn strdup(s: *const std::ffi::c_char) -> *mut std::ffi::c_char;
    fn free(p: *mut std::ffi::c_void);
}

/// `fi_freeinfo` frees the provider name with `free`, so it must come
/// from `malloc`.
unsafe fn libc_strdup(s: &CStr) -> *mut std::ffi::c_char {
    strdup(s.as_ptr())
}

unsafe fn libc_free(p: *mut std::ffi::c_char) {
    free(p.cast())
}
