//! DLPack capsules: a segment's memory handed to `torch.from_dlpack`,
//! `cupy.from_dlpack` or `numpy.from_dlpack` without a copy.
//!
//! The capsule (named `dltensor`) carries a `DLManagedTensor` of DLPack's
//! ABI (`dlpack.h`, the unversioned form every consumer takes). Its
//! manager context owns the shape and a reference to the Python object
//! that keeps the segment alive; the consumer calls the deleter when its
//! tensor goes, and renames the capsule to `used_dltensor`. A capsule
//! nobody consumed runs the deleter when it is collected.

use pyo3::ffi;
use pyo3::prelude::*;
use std::ffi::{c_void, CStr};

const NAME: &CStr = c"dltensor";

/// `DLDevice`.
#[repr(C)]
struct DlDevice {
    device_type: i32,
    device_id: i32,
}

/// `DLDataType`.
#[repr(C)]
struct DlDataType {
    code: u8,
    bits: u8,
    lanes: u16,
}

/// `DLTensor`.
#[repr(C)]
struct DlTensor {
    data: *mut c_void,
    device: DlDevice,
    ndim: i32,
    dtype: DlDataType,
    shape: *mut i64,
    strides: *mut i64,
    byte_offset: u64,
}

/// `DLManagedTensor`.
#[repr(C)]
struct DlManagedTensor {
    dl_tensor: DlTensor,
    manager_ctx: *mut c_void,
    deleter: Option<unsafe extern "C" fn(*mut DlManagedTensor)>,
}

/// What the tensor owns: its shape and the owner of the memory. `tensor`
/// comes first (`repr(C)`), so a pointer to it is a pointer to the whole.
#[repr(C)]
struct Managed {
    tensor: DlManagedTensor,
    shape: Box<[i64]>,
    owner: Option<Py<PyAny>>,
}

/// The deleter the consumer calls once its tensor is gone.
///
/// # Safety
/// `t` is the `tensor` field of a `Managed` made by [`dlpack_capsule`]
/// (its first field, so the pointers are equal), called at most once.
unsafe extern "C" fn deleter(t: *mut DlManagedTensor) {
    if t.is_null() {
        return;
    }
    // SAFETY: `t` points at the first field of a boxed `Managed`
    // (`repr(C)`: at offset 0), handed out once and given back here once.
    let managed = unsafe { Box::from_raw(t as *mut Managed) };
    // The owner's reference count is changed with the GIL held, on
    // whatever thread the consumer frees its tensor.
    Python::attach(move |_| drop(managed));
}

/// The capsule's destructor: frees the tensor when no consumer took it.
///
/// # Safety
/// Called by Python with the capsule being destroyed.
unsafe extern "C" fn capsule_destructor(capsule: *mut ffi::PyObject) {
    // SAFETY: a capsule still named `dltensor` was not consumed; its
    // pointer is the tensor made in `dlpack_capsule`, freed only here.
    unsafe {
        if ffi::PyCapsule_IsValid(capsule, NAME.as_ptr()) == 1 {
            let t = ffi::PyCapsule_GetPointer(capsule, NAME.as_ptr()) as *mut DlManagedTensor;
            deleter(t);
        } else {
            // A consumer renamed it: clear the error `IsValid` may not set,
            // nothing else to do.
            ffi::PyErr_Clear();
        }
    }
}

/// A DLPack capsule of `shape` elements of DLPack type (`code`, `bits`)
/// at `ptr`, on DLPack device (`device_type`, `device_id`) (1: CPU, 2:
/// CUDA), C-contiguous, holding `owner` until the tensor is freed.
#[pyfunction]
#[pyo3(signature = (owner, ptr, shape, code, bits, device_type, device_id))]
#[allow(clippy::too_many_arguments)] // DLPack's fields, one argument each
pub fn dlpack_capsule(
    py: Python<'_>,
    owner: Py<PyAny>,
    ptr: usize,
    shape: Vec<i64>,
    code: u8,
    bits: u8,
    device_type: i32,
    device_id: i32,
) -> PyResult<Py<PyAny>> {
    let mut managed = Box::new(Managed {
        tensor: DlManagedTensor {
            dl_tensor: DlTensor {
                data: ptr as *mut c_void,
                device: DlDevice {
                    device_type,
                    device_id,
                },
                ndim: shape.len() as i32,
                dtype: DlDataType {
                    code,
                    bits,
                    lanes: 1,
                },
                shape: std::ptr::null_mut(),
                // Null: C-contiguous (DLPack's rule).
                strides: std::ptr::null_mut(),
                byte_offset: 0,
            },
            manager_ctx: std::ptr::null_mut(),
            deleter: Some(deleter),
        },
        shape: shape.into_boxed_slice(),
        owner: Some(owner),
    });
    managed.tensor.dl_tensor.shape = managed.shape.as_mut_ptr();
    let raw = Box::into_raw(managed);
    // SAFETY: `raw` is a live box we own; the consumer reaches the whole
    // through `tensor`, its first field (`repr(C)`).
    unsafe { (*raw).tensor.manager_ctx = raw as *mut c_void };
    // SAFETY: PyCapsule_New with a non-null pointer and a static name; on
    // failure it returns null with an exception set, and we free the box.
    let capsule =
        unsafe { ffi::PyCapsule_New(raw as *mut c_void, NAME.as_ptr(), Some(capsule_destructor)) };
    if capsule.is_null() {
        // SAFETY: the capsule was not made, so nobody else owns `raw`.
        drop(unsafe { Box::from_raw(raw) });
        return Err(PyErr::fetch(py));
    }
    // SAFETY: a new reference, owned from here on.
    Ok(unsafe { Bound::from_owned_ptr(py, capsule) }.unbind())
}
