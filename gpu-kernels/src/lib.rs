//! GPU kernels that take part in GASPI communication themselves.
//!
//! The usual way to feed a GPU is a round trip through the host for every
//! step: copy the input, launch a kernel, wait for it, copy the output. A
//! *persistent* kernel avoids all of that: it stays resident, waits for a
//! notification word to be set (the data has arrived), computes, and writes
//! its results straight into a target segment followed by a notification,
//! exactly as a CPU rank would with `write_notify`. This crate gives such
//! kernels their side of the GASPI API.
//!
//! - `cuda/gaspi_device.cuh` ([`DEVICE_HEADER`]): the device-side API in
//!   CUDA C++: `gaspi_notify_waitsome` (a warp scans the words with
//!   system-scope acquire loads), `gaspi_notify_reset`, `gaspi_notify` and
//!   `gaspi_write_notify`, which stores directly when the target is mapped
//!   into this GPU and otherwise posts a request to the CPU progress engine.
//!   A kernel sending to the same peer segment in a loop prepares the route
//!   once (`gaspi_write_route_prepare`, then `gaspi_write_notify_via` and
//!   its warp and thread forms): each plain call reads the segment tables
//!   again, about 0.3 us between two GPUs (decision 0051).
//!   For answers at the latency of the wire, calls that avoid a round trip
//!   across PCIe each: `gaspi_notify_waitsome_value` (the value seen by the
//!   scan, no re-read), `gaspi_notify_clear` (a posted store instead of an
//!   atomic exchange), `gaspi_notify_wait_above` (senders that count up: no
//!   clear at all; `gaspi_notify_wait_above_relaxed` without the acquire,
//!   for signals whose value is the message), `gaspi_notify_relaxed` +
//!   `gaspi_fence` (the ordering
//!   fence moved off the critical path). Together about 2.5 us less per
//!   CPU -> kernel -> CPU round trip on an H100 (`gaspi-bench notify-rtt`).
//! - [`DeviceCtx`] / [`SegmentDesc`]: the context a kernel receives by value,
//!   mirrored field for field in the header.
//! - [`ring`]: the request ring between GPU producers and the CPU consumer,
//!   with the consumer side ([`RequestRing`]) in Rust.
//! - [`compile`] and [`load`]: the header and a user's kernel source are
//!   compiled at run time with NVRTC and loaded with cudarc, so the crate
//!   needs no CUDA toolkit at build time and one binary serves any GPU.
//! - Example kernels: [`ECHO_SOURCE`] (notification round trip),
//!   [`MATVEC_SOURCE`] (batched 32x32 matrix-vector, per-launch and
//!   persistent), [`RING_STRESS_SOURCE`] (many GPU threads posting to the
//!   ring).
//!
//! Nothing here panics on a host without CUDA: [`compile`] checks that
//! NVRTC can be loaded and returns [`KernelError::NoNvrtc`] otherwise, and
//! [`load`] needs a cudarc context, which cannot exist without a driver.
//! This crate depends on nothing but cudarc; the memory the context points
//! to comes from `gaspi-segments`.

pub mod device_ctx;
pub mod ring;

pub use cudarc::nvrtc::Ptx;
pub use device_ctx::{
    DeviceCtx, SegmentDesc, INLINE_RANKS, INLINE_SEGMENTS, SEGMENT_RING_INLINE, STOP_VALUE,
};
pub use ring::{Request, RequestOp, RequestRing, RingError};

use cudarc::driver::{CudaContext, CudaFunction, CudaModule};
use cudarc::nvrtc::{result as nvrtc_result, sys as nvrtc_sys};
use std::ffi::{c_char, CStr, CString};
use std::sync::{Arc, OnceLock};

/// The device-side GASPI API (`cuda/gaspi_device.cuh`).
pub const DEVICE_HEADER: &str = include_str!("../cuda/gaspi_device.cuh");

/// The name under which kernels include [`DEVICE_HEADER`].
pub const DEVICE_HEADER_NAME: &str = "gaspi_device.cuh";

/// Kernels `gaspi_echo` and `gaspi_echo_once` (`cuda/echo.cu`).
pub const ECHO_SOURCE: &str = include_str!("../cuda/echo.cu");

/// Kernels `matvec_batch` and `matvec_persistent` (`cuda/matvec.cu`).
pub const MATVEC_SOURCE: &str = include_str!("../cuda/matvec.cu");

/// Kernels `ring_stress` and `gaspi_layout_probe` (`cuda/ring_stress.cu`).
pub const RING_STRESS_SOURCE: &str = include_str!("../cuda/ring_stress.cu");

/// Source of the GPU integration tests' kernels (`cuda/tests.cu`).
pub const TESTS_SOURCE: &str = include_str!("../cuda/tests.cu");

/// Field offsets of the structs shared with the device code, in the order
/// `gaspi_layout_offsets` (in the header) reports them. NVRTC has no
/// `offsetof`, so the device check runs `gaspi_layout_probe` and compares
/// its output with this.
pub const LAYOUT_OFFSETS: [u64; 20] = {
    use std::mem::offset_of;
    [
        offset_of!(SegmentDesc, size) as u64,
        offset_of!(SegmentDesc, notifications) as u64,
        offset_of!(SegmentDesc, notification_count) as u64,
        offset_of!(DeviceCtx, local) as u64,
        offset_of!(DeviceCtx, ring_producer) as u64,
        offset_of!(ring::RingHeader, completed) as u64,
        offset_of!(ring::RingHeader, capacity) as u64,
        offset_of!(ring::RingHeader, version) as u64,
        offset_of!(ring::RingSlot, op) as u64,
        offset_of!(ring::RingSlot, target_rank) as u64,
        offset_of!(ring::RingSlot, local_offset) as u64,
        offset_of!(ring::RingSlot, size) as u64,
        offset_of!(ring::RingSlot, notification_id) as u64,
        offset_of!(ring::RingSlot, reserved) as u64,
        offset_of!(DeviceCtx, inline_local) as u64,
        offset_of!(DeviceCtx, inline_remote) as u64,
        offset_of!(ring::RingHeader, inline_max) as u64,
        offset_of!(ring::RingSlot, flags) as u64,
        offset_of!(DeviceCtx, ring_payload) as u64,
        offset_of!(DeviceCtx, ring_inline_max) as u64,
    ]
};

/// Virtual architecture compiled for when the device is not known: Hopper.
/// The driver JIT-compiles the PTX for the actual GPU (same or newer).
pub const DEFAULT_ARCH: &str = "compute_90";

/// Errors of compiling and loading kernels.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum KernelError {
    /// The NVRTC library cannot be loaded.
    #[error("no NVRTC: {reason}")]
    NoNvrtc {
        /// why
        reason: String,
    },
    /// The source did not compile; `log` is NVRTC's program log.
    #[error("NVRTC could not compile {name} ({code}):\n{log}")]
    Compile {
        /// program name
        name: String,
        /// the nvrtcResult
        code: String,
        /// compiler output
        log: String,
    },
    /// Another NVRTC call failed.
    #[error("NVRTC call {call} failed: {code}")]
    Nvrtc {
        /// the NVRTC function
        call: &'static str,
        /// the nvrtcResult
        code: String,
    },
    /// A CUDA driver call (module load, function lookup) failed.
    #[error("CUDA call {call} failed: {code}")]
    Cuda {
        /// the driver function
        call: &'static str,
        /// the CUresult
        code: String,
    },
    /// An argument NVRTC cannot take (a NUL byte in a string).
    #[error("invalid argument: {0}")]
    InvalidArgument(String),
}

fn nvrtc_error(call: &'static str) -> impl FnOnce(nvrtc_result::NvrtcError) -> KernelError {
    move |err| KernelError::Nvrtc {
        call,
        code: format!("{:?}", err.0),
    }
}

fn cuda_error(call: &'static str) -> impl FnOnce(cudarc::driver::DriverError) -> KernelError {
    move |err| KernelError::Cuda {
        call,
        code: format!("{:?}", err.0),
    }
}

/// Checks once per process that NVRTC can be loaded; returns its version
/// (major, minor). Never panics.
pub fn nvrtc_available() -> Result<(u32, u32), KernelError> {
    static STATE: OnceLock<Result<(u32, u32), String>> = OnceLock::new();
    STATE
        .get_or_init(|| {
            // cudarc panics when the library is found but lacks a symbol of
            // its CUDA 13.0 binding; treat that like a missing library.
            // SAFETY: is_culib_present only dlopens candidate names and
            // resolves symbols; it has no precondition.
            match std::panic::catch_unwind(|| unsafe { nvrtc_sys::is_culib_present() }) {
                Ok(true) => {}
                Ok(false) => {
                    return Err("libnvrtc could not be loaded (is the CUDA toolkit's NVRTC on the library path?)".into())
                }
                Err(_) => return Err("libnvrtc lacks functions of the CUDA 13.0 API".into()),
            }
            let (mut major, mut minor) = (0, 0);
            // SAFETY: the library is present (checked above); both
            // out-pointers are valid for the call.
            let status = unsafe { nvrtc_sys::nvrtcVersion(&mut major, &mut minor) };
            status
                .result()
                .map_err(|e| format!("nvrtcVersion failed: {:?}", e.0))?;
            tracing::debug!(major, minor, "NVRTC loaded");
            Ok((major as u32, minor as u32))
        })
        .clone()
        .map_err(|reason| KernelError::NoNvrtc { reason })
}

/// Compiles `kernel_source` for the device of `ctx` and loads it there.
pub fn compile_and_load(
    ctx: &Arc<CudaContext>,
    kernel_source: &str,
    name: &str,
) -> Result<Arc<CudaModule>, KernelError> {
    let arch = device_arch(ctx)?;
    load(ctx, compile_for_arch(kernel_source, name, &arch)?)
}

/// Compiles `kernel_source` (which may `#include "gaspi_device.cuh"`) to
/// PTX for [`DEFAULT_ARCH`]. `name` names the program in error messages.
pub fn compile(kernel_source: &str, name: &str) -> Result<Ptx, KernelError> {
    compile_for_arch(kernel_source, name, DEFAULT_ARCH)
}

/// The virtual architecture of the device of `ctx`, e.g. `compute_90`.
pub fn device_arch(ctx: &CudaContext) -> Result<String, KernelError> {
    let (major, minor) = ctx
        .compute_capability()
        .map_err(cuda_error("cuDeviceGetAttribute"))?;
    Ok(format!("compute_{major}{minor}"))
}

/// Compiles `kernel_source` to PTX for the virtual architecture `arch`
/// (`compute_XY`), with C++17 and [`DEVICE_HEADER`] available as
/// `"gaspi_device.cuh"` (given to NVRTC as a named header, so no file is
/// needed).
pub fn compile_for_arch(kernel_source: &str, name: &str, arch: &str) -> Result<Ptx, KernelError> {
    nvrtc_available()?;
    let c = |s: &str, what: &str| {
        CString::new(s)
            .map_err(|_| KernelError::InvalidArgument(format!("{what} contains a NUL byte")))
    };
    let source = c(kernel_source, "kernel source")?;
    let program_name = c(name, "program name")?;
    let header = c(DEVICE_HEADER, "device header")?;
    let header_name = c(DEVICE_HEADER_NAME, "header name")?;
    let headers = [header.as_ptr()];
    let include_names = [header_name.as_ptr()];
    let mut program: nvrtc_sys::nvrtcProgram = std::ptr::null_mut();
    // SAFETY: every pointer is a NUL-terminated string that outlives the
    // program (they live until the end of this function, after the program
    // is destroyed); the header arrays have one entry each, as passed.
    unsafe {
        nvrtc_sys::nvrtcCreateProgram(
            &mut program,
            source.as_ptr(),
            program_name.as_ptr(),
            1,
            headers.as_ptr(),
            include_names.as_ptr(),
        )
    }
    .result()
    .map_err(nvrtc_error("nvrtcCreateProgram"))?;
    let program = Program(program);
    let options = [
        "--std=c++17".to_string(),
        format!("--gpu-architecture={arch}"),
        "--generate-line-info".to_string(),
    ];
    // SAFETY: `program` is a live program created above.
    let compiled = unsafe { nvrtc_result::compile_program(program.0, &options) };
    if let Err(err) = compiled {
        return Err(KernelError::Compile {
            name: name.to_string(),
            code: format!("{:?}", err.0),
            log: program.log(),
        });
    }
    let log = program.log();
    if !log.trim().is_empty() {
        tracing::debug!(program = name, %log, "NVRTC warnings");
    }
    // SAFETY: the program compiled successfully.
    let ptx = unsafe { nvrtc_result::get_ptx(program.0) }.map_err(nvrtc_error("nvrtcGetPTX"))?;
    Ok(Ptx::from_src(c_chars_to_string(&ptx)))
}

/// An NVRTC program, destroyed on drop.
struct Program(nvrtc_sys::nvrtcProgram);

impl Program {
    fn log(&self) -> String {
        // SAFETY: the program is live until `self` drops.
        match unsafe { nvrtc_result::get_program_log(self.0) } {
            Ok(chars) => c_chars_to_string(&chars),
            Err(err) => format!("(no log: {:?})", err.0),
        }
    }
}

impl Drop for Program {
    fn drop(&mut self) {
        // SAFETY: created by nvrtcCreateProgram, destroyed exactly once.
        if let Err(err) = unsafe { nvrtc_result::destroy_program(self.0) } {
            tracing::warn!(code = ?err.0, "nvrtcDestroyProgram failed");
        }
    }
}

/// Text of a NUL-terminated buffer that NVRTC filled.
fn c_chars_to_string(chars: &[c_char]) -> String {
    if chars.last() == Some(&0) {
        // SAFETY: the buffer ends in NUL, so the C string lies inside it.
        unsafe { CStr::from_ptr(chars.as_ptr()) }
            .to_string_lossy()
            .into_owned()
    } else {
        chars.iter().map(|&c| c as u8 as char).collect()
    }
}

/// Loads compiled PTX into the device of `ctx` (the driver compiles it for
/// the GPU at hand).
pub fn load(ctx: &Arc<CudaContext>, ptx: Ptx) -> Result<Arc<CudaModule>, KernelError> {
    ctx.load_module(ptx).map_err(cuda_error("cuModuleLoadData"))
}

/// Looks up kernel `name` (declared `extern "C"`) in a loaded module.
pub fn function(module: &Arc<CudaModule>, name: &str) -> Result<CudaFunction, KernelError> {
    if name.contains('\0') {
        return Err(KernelError::InvalidArgument(format!(
            "kernel name {name:?} contains a NUL byte"
        )));
    }
    module
        .load_function(name)
        .map_err(cuda_error("cuModuleGetFunction"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_header_is_self_contained_and_guarded() {
        assert!(DEVICE_HEADER.contains("#ifndef GASPI_DEVICE_CUH"));
        assert!(
            !DEVICE_HEADER
                .lines()
                .any(|l| l.trim_start().starts_with("#include")),
            "the header includes nothing: NVRTC has no system headers"
        );
        for source in [ECHO_SOURCE, MATVEC_SOURCE, RING_STRESS_SOURCE] {
            assert!(source.contains("#include \"gaspi_device.cuh\""));
        }
    }

    #[test]
    fn the_header_names_the_ring_constants_of_ring_rs() {
        assert!(DEVICE_HEADER.contains(&format!("GASPI_RING_MAGIC 0x{:08x}u", ring::RING_MAGIC)));
        assert!(DEVICE_HEADER.contains(&format!(
            "GASPI_RING_OP_WRITE_NOTIFY {}u",
            ring::OP_WRITE_NOTIFY
        )));
        assert!(DEVICE_HEADER.contains(&format!("GASPI_RING_OP_NOTIFY {}u", ring::OP_NOTIFY)));
        assert!(DEVICE_HEADER.contains(&format!("GASPI_RING_OP_WRITE {}u", ring::OP_WRITE)));
        assert!(DEVICE_HEADER.contains(&format!("GASPI_STOP_VALUE 0x{STOP_VALUE:08x}u")));
        assert!(DEVICE_HEADER.contains(&format!("GASPI_LAYOUT_FIELDS {}", LAYOUT_OFFSETS.len())));
    }

    /// Compiles every kernel where NVRTC is installed (it needs no GPU);
    /// elsewhere checks that the absence is an error, not a panic.
    #[test]
    fn kernels_compile_with_nvrtc_or_report_its_absence() {
        match nvrtc_available() {
            Err(err @ KernelError::NoNvrtc { .. }) => {
                assert!(matches!(
                    compile(ECHO_SOURCE, "echo.cu"),
                    Err(KernelError::NoNvrtc { .. })
                ));
                println!("skip: {err}; kernels not compiled");
            }
            Err(other) => panic!("unexpected error: {other}"),
            Ok(version) => {
                println!("NVRTC {version:?}");
                for (source, name, kernels) in [
                    (
                        ECHO_SOURCE,
                        "echo.cu",
                        &["gaspi_echo", "gaspi_echo_once"][..],
                    ),
                    (
                        MATVEC_SOURCE,
                        "matvec.cu",
                        &["matvec_batch", "matvec_persistent"][..],
                    ),
                    (
                        RING_STRESS_SOURCE,
                        "ring_stress.cu",
                        &["ring_stress", "gaspi_layout_probe"][..],
                    ),
                    (
                        TESTS_SOURCE,
                        "tests.cu",
                        &["test_echo", "test_ordering", "test_gpu_pingpong"][..],
                    ),
                ] {
                    let ptx = compile(source, name)
                        .unwrap_or_else(|e| panic!("{e}"))
                        .to_src();
                    for kernel in kernels {
                        assert!(
                            ptx.contains(&format!(".entry {kernel}(")),
                            "{kernel} missing in {name}"
                        );
                    }
                }
                let broken = compile("__global__ void k() { undefined_thing(); }", "broken.cu");
                assert!(
                    matches!(broken, Err(KernelError::Compile { ref log, .. }) if log.contains("undefined_thing"))
                );
            }
        }
    }
}
