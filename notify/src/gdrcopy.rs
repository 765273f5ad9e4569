//! A minimal binding to gdrcopy, loaded at run time.
//!
//! Notification words of a GPU segment can live in GPU memory, so that a
//! persistent kernel polls its own memory (fast) instead of host memory over
//! PCIe. The CPU side (the progress engine, a same-host peer) must then read
//! and write those words. gdrcopy makes that a plain load or store: its
//! kernel driver (`gdrdrv`, device node `/dev/gdrdrv`) pins GPU pages and
//! exposes them through the GPU's PCIe BAR, and `libgdrapi` maps that window
//! into the process.
//!
//! gdrcopy is optional. Both the library (`libgdrapi.so.2`) and the driver
//! node must be present; [`gdrcopy_available`] says which one is missing, and
//! the runtime falls back to host-mapped words. The library is loaded with
//! `libloading` so that the default build needs neither gdrcopy's headers
//! nor its library.
//!
//! # Rules from gdrcopy's documentation, and where they are kept
//!
//! - Pinning works on whole GPU pages of 64 KiB: [`GdrMapping::new`] refuses
//!   an address or length that is not a multiple of [`GPU_PAGE_SIZE`].
//!   (`gaspi_segments::gpu::GpuMemory` hands out such memory.)
//! - The buffer must have `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` set, so that
//!   CUDA's synchronous memory operations on it are ordered with the BAR
//!   accesses. That needs the CUDA driver, which this crate does not load:
//!   `gaspi_segments::gpu::GpuMemory::alloc` sets it on every allocation,
//!   and [`GdrMapping::new`]'s contract requires it.
//! - Unmap before unpin, and unpin before the GPU memory is freed: the
//!   mapping's `Drop` does the first two in that order; its contract and the
//!   owner's lifetime rules do the third.
//! - The BAR mapping is usually write-combined. Stores may sit in a CPU
//!   write-combining buffer: every store helper here ends with a store fence
//!   so the value reaches the GPU before the call returns, and data stored
//!   before a notification word arrives before it. Reads are uncached (slow,
//!   about a microsecond), and read-modify-write instructions are not atomic
//!   with respect to the GPU, so none are offered.

use std::ffi::{c_int, c_uint, c_ulong, c_void};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// GPU page size: gdrcopy pins and maps whole pages of this size.
pub const GPU_PAGE_SIZE: usize = 1 << 16;

/// Library names tried, in order.
const LIBRARY_NAMES: [&str; 2] = ["libgdrapi.so.2", "libgdrapi.so"];

/// The device node of the gdrdrv kernel driver.
pub const DRIVER_NODE: &str = "/dev/gdrdrv";

/// Errors of the gdrcopy binding.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GdrError {
    /// `libgdrapi` could not be loaded, or lacks a needed function.
    #[error("gdrcopy library not available: {reason}")]
    LibraryMissing {
        /// what failed
        reason: String,
    },
    /// The gdrdrv kernel driver is not there (no device node, or gdr_open
    /// failed).
    #[error("gdrcopy driver not available: {reason}")]
    DriverMissing {
        /// what failed
        reason: String,
    },
    /// A gdrcopy call returned an error code.
    #[error("gdrcopy call {call} failed with code {code}")]
    Call {
        /// the gdrcopy function
        call: &'static str,
        /// its return value
        code: i32,
    },
    /// Address or length not on a 64 KiB GPU page boundary, or zero length.
    #[error(
        "gdrcopy needs a non-empty range on 64 KiB GPU pages, got address {addr:#x} length {len}"
    )]
    Misaligned {
        /// device address asked for
        addr: u64,
        /// length asked for
        len: usize,
    },
    /// The driver mapped less than was pinned.
    #[error("gdrcopy mapped {mapped} bytes where {wanted} were pinned")]
    ShortMapping {
        /// bytes mapped
        mapped: u64,
        /// bytes wanted
        wanted: usize,
    },
}

/// `gdr_mh_t`: the handle of one pinned buffer (passed by value).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct MemoryHandle {
    h: c_ulong,
}

/// `gdr_info_v2_t`. The two one-bit fields `mapped` and `wc_mapping` share
/// one `unsigned int` (bit 0 and bit 1 on the x86-64 and AArch64 ABIs).
#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
struct Info {
    va: u64,
    mapped_size: u64,
    page_size: u32,
    tm_cycles: u64,
    cycles_per_ms: u32,
    bits: c_uint,
    mapping_type: c_int,
}

const _: () = assert!(std::mem::size_of::<Info>() == 48);
const _: () = assert!(std::mem::offset_of!(Info, tm_cycles) == 24);
const _: () = assert!(std::mem::offset_of!(Info, mapping_type) == 40);

/// `gdr_mapping_type_t::GDR_MAPPING_TYPE_WC`.
const MAPPING_TYPE_WC: c_int = 1;

type OpenFn = unsafe extern "C" fn() -> *mut c_void;
type CloseFn = unsafe extern "C" fn(*mut c_void) -> c_int;
type PinFn =
    unsafe extern "C" fn(*mut c_void, c_ulong, usize, u64, u32, *mut MemoryHandle) -> c_int;
type UnpinFn = unsafe extern "C" fn(*mut c_void, MemoryHandle) -> c_int;
type MapFn = unsafe extern "C" fn(*mut c_void, MemoryHandle, *mut *mut c_void, usize) -> c_int;
type UnmapFn = unsafe extern "C" fn(*mut c_void, MemoryHandle, *mut c_void, usize) -> c_int;
type InfoFn = unsafe extern "C" fn(*mut c_void, MemoryHandle, *mut Info) -> c_int;

/// The functions of libgdrapi this crate uses, resolved once.
struct Api {
    open: OpenFn,
    close: CloseFn,
    pin_buffer: PinFn,
    unpin_buffer: UnpinFn,
    map: MapFn,
    unmap: UnmapFn,
    get_info: InfoFn,
    /// Keeps the functions above loaded; never unloaded.
    _library: libloading::Library,
}

fn api() -> Result<&'static Api, GdrError> {
    static API: OnceLock<Result<Api, String>> = OnceLock::new();
    API.get_or_init(load_api)
        .as_ref()
        .map_err(|reason| GdrError::LibraryMissing {
            reason: reason.clone(),
        })
}

fn load_api() -> Result<Api, String> {
    let mut failures = Vec::new();
    for name in LIBRARY_NAMES {
        // SAFETY: loading libgdrapi runs its initialisers, which only set up
        // library state (logging from the environment); it has no
        // preconditions on this process.
        match unsafe { libloading::Library::new(name) } {
            Ok(library) => return resolve(library).map_err(|e| format!("{name}: {e}")),
            Err(err) => failures.push(format!("{name}: {err}")),
        }
    }
    Err(failures.join("; "))
}

fn resolve(library: libloading::Library) -> Result<Api, libloading::Error> {
    // SAFETY (for each `get` below): the symbol types are the C prototypes
    // of gdrapi.h (gdrcopy 2.x), with `gdr_t` as an opaque pointer and
    // `gdr_mh_t` as a by-value struct of one unsigned long; the copied
    // function pointers stay valid because `library` is stored beside them
    // and never unloaded.
    unsafe {
        let open = *library.get::<OpenFn>(b"gdr_open\0")?;
        let close = *library.get::<CloseFn>(b"gdr_close\0")?;
        let pin_buffer = *library.get::<PinFn>(b"gdr_pin_buffer\0")?;
        let unpin_buffer = *library.get::<UnpinFn>(b"gdr_unpin_buffer\0")?;
        let map = *library.get::<MapFn>(b"gdr_map\0")?;
        let unmap = *library.get::<UnmapFn>(b"gdr_unmap\0")?;
        // gdrcopy >= 2.3 exports gdr_get_info_v2; older 2.x only gdr_get_info,
        // whose struct is the same without the trailing mapping_type.
        let get_info = match library.get::<InfoFn>(b"gdr_get_info_v2\0") {
            Ok(f) => *f,
            Err(_) => *library.get::<InfoFn>(b"gdr_get_info\0")?,
        };
        Ok(Api {
            open,
            close,
            pin_buffer,
            unpin_buffer,
            map,
            unmap,
            get_info,
            _library: library,
        })
    }
}

/// Says whether gdrcopy can be used here, and if not, why: the library is
/// missing ([`GdrError::LibraryMissing`]) or the kernel driver is
/// ([`GdrError::DriverMissing`]). Cheap after the first call.
pub fn gdrcopy_available() -> Result<(), GdrError> {
    api()?;
    if !std::path::Path::new(DRIVER_NODE).exists() {
        return Err(GdrError::DriverMissing {
            reason: format!("{DRIVER_NODE} does not exist (is the gdrdrv module loaded?)"),
        });
    }
    Ok(())
}

/// An open connection to the gdrdrv driver (`gdr_t`); closed when the last
/// [`GdrMapping`] using it and the last `Arc` are gone.
pub struct Gdr {
    api: &'static Api,
    handle: *mut c_void,
    /// gdrcopy does not document its handle as thread safe: calls that
    /// change its state are serialised.
    lock: Mutex<()>,
}

impl std::fmt::Debug for Gdr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gdr").field("handle", &self.handle).finish()
    }
}

// SAFETY: the handle is a process-wide connection to a character device;
// every call that uses it goes through `lock`.
unsafe impl Send for Gdr {}
// SAFETY: see `Send`.
unsafe impl Sync for Gdr {}

impl Gdr {
    /// Opens the driver. Fails with the reason when gdrcopy is unavailable.
    pub fn open() -> Result<Arc<Gdr>, GdrError> {
        gdrcopy_available()?;
        let api = api()?;
        // SAFETY: gdr_open has no preconditions; it returns null on failure.
        let handle = unsafe { (api.open)() };
        if handle.is_null() {
            return Err(GdrError::DriverMissing {
                reason: format!("gdr_open failed (cannot open {DRIVER_NODE}?)"),
            });
        }
        tracing::debug!("gdrcopy opened");
        Ok(Arc::new(Gdr {
            api,
            handle,
            lock: Mutex::new(()),
        }))
    }

    fn serialise(&self) -> std::sync::MutexGuard<'_, ()> {
        self.lock
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl Drop for Gdr {
    fn drop(&mut self) {
        // SAFETY: `handle` came from gdr_open and is closed once; every
        // mapping holds an Arc, so none is left.
        let code = unsafe { (self.api.close)(self.handle) };
        if code != 0 {
            tracing::warn!(code, "gdr_close failed");
        }
    }
}

/// GPU memory pinned and mapped into this process through the BAR: a host
/// pointer to GPU memory. Unmapped and unpinned on drop.
pub struct GdrMapping {
    gdr: Arc<Gdr>,
    handle: MemoryHandle,
    /// start of the user-space mapping (what gdr_unmap needs)
    map: *mut u8,
    map_len: usize,
    /// the host address of the device address asked for
    host: *mut u8,
    len: usize,
    write_combined: bool,
}

impl std::fmt::Debug for GdrMapping {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GdrMapping")
            .field("host", &self.host)
            .field("len", &self.len)
            .field("write_combined", &self.write_combined)
            .finish()
    }
}

// SAFETY: the mapping is process-wide; all word accesses are atomic loads
// and stores, and pin/map/unmap calls are serialised by `Gdr::lock`.
unsafe impl Send for GdrMapping {}
// SAFETY: see `Send`.
unsafe impl Sync for GdrMapping {}

impl GdrMapping {
    /// Pins `len` bytes of GPU memory at `device_ptr` and maps them.
    ///
    /// # Safety
    /// `device_ptr..device_ptr + len` must be device memory from `cuMemAlloc`
    /// with `CU_POINTER_ATTRIBUTE_SYNC_MEMOPS` set (as
    /// `gaspi_segments::gpu::GpuMemory` provides), and must stay allocated
    /// until the returned mapping is dropped.
    pub unsafe fn new(gdr: &Arc<Gdr>, device_ptr: u64, len: usize) -> Result<GdrMapping, GdrError> {
        let page = GPU_PAGE_SIZE as u64;
        // (GPU_PAGE_SIZE is a power of two: a mask tests the alignment.)
        if len == 0 || device_ptr & (page - 1) != 0 || len & (GPU_PAGE_SIZE - 1) != 0 {
            return Err(GdrError::Misaligned {
                addr: device_ptr,
                len,
            });
        }
        let api = gdr.api;
        let _serial = gdr.serialise();
        let mut handle = MemoryHandle { h: 0 };
        // SAFETY: the caller guarantees the range is live device memory with
        // sync memops; token and VA space 0 are gdrcopy's defaults for memory
        // of this process; `handle` is a valid out-pointer.
        let code =
            unsafe { (api.pin_buffer)(gdr.handle, device_ptr as c_ulong, len, 0, 0, &mut handle) };
        if code != 0 {
            return Err(GdrError::Call {
                call: "gdr_pin_buffer",
                code,
            });
        }
        let mut map: *mut c_void = std::ptr::null_mut();
        // SAFETY: `handle` was just pinned for `len` bytes; `map` is a valid
        // out-pointer.
        let code = unsafe { (api.map)(gdr.handle, handle, &mut map, len) };
        if code != 0 {
            // SAFETY: unpin the buffer pinned above, exactly once.
            unsafe { (api.unpin_buffer)(gdr.handle, handle) };
            return Err(GdrError::Call {
                call: "gdr_map",
                code,
            });
        }
        let mut mapping = GdrMapping {
            gdr: gdr.clone(),
            handle,
            map: map.cast(),
            map_len: len,
            host: map.cast(),
            len,
            write_combined: false,
        };
        let mut info = Info::default();
        // SAFETY: `handle` is pinned and mapped; `info` is a valid,
        // zero-initialised out-pointer of the v2 size (v1 writes a prefix).
        let code = unsafe { (api.get_info)(gdr.handle, handle, &mut info) };
        drop(_serial);
        if code != 0 {
            return Err(GdrError::Call {
                call: "gdr_get_info",
                code,
            });
        }
        // The mapping starts at info.va (page aligned); the address asked
        // for lies `device_ptr - info.va` bytes into it.
        let offset = device_ptr.wrapping_sub(info.va);
        if info.va > device_ptr || info.mapped_size < offset + len as u64 {
            return Err(GdrError::ShortMapping {
                mapped: info.mapped_size,
                wanted: len,
            });
        }
        // SAFETY: offset + len <= mapped_size, checked above, so the pointer
        // stays inside the mapping.
        mapping.host = unsafe { mapping.map.add(offset as usize) };
        mapping.write_combined = info.mapping_type == MAPPING_TYPE_WC || info.bits & 0b10 != 0;
        Ok(mapping)
    }

    /// Host address of the first byte of the GPU memory asked for. Only
    /// aligned 32- or 64-bit loads and stores should be made through it.
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Always false: empty mappings are refused.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Whether the BAR mapping is write-combined (stores are fenced here).
    pub fn is_write_combined(&self) -> bool {
        self.write_combined
    }

    fn word(&self, index: usize) -> Option<&AtomicU32> {
        if index >= self.len / 4 {
            return None;
        }
        // SAFETY: index < len / 4 so the word lies inside the mapping, which
        // is GPU-page aligned (so 4-aligned) and lives as long as `self`.
        Some(unsafe { &*(self.host.add(index * 4) as *const AtomicU32) })
    }

    /// Reads 32-bit word `index` (an uncached read across PCIe). `None` when
    /// the index is outside the mapping.
    pub fn read_u32(&self, index: usize) -> Option<u32> {
        self.word(index).map(|w| w.load(Ordering::Acquire))
    }

    /// Stores `value` into 32-bit word `index` and fences, so the store has
    /// left the CPU when this returns and after every earlier store through
    /// any mapping. Returns false when the index is outside the mapping.
    pub fn write_u32(&self, index: usize, value: u32) -> bool {
        match self.word(index) {
            Some(word) => {
                word.store(value, Ordering::Release);
                store_fence();
                true
            }
            None => false,
        }
    }

    /// Copies `data` into the GPU memory at byte `offset` and fences (for the
    /// data of a `write_notify` that a notification store then follows).
    /// Returns false when the range is outside the mapping.
    pub fn write_bytes(&self, offset: usize, data: &[u8]) -> bool {
        if !matches!(offset.checked_add(data.len()), Some(end) if end <= self.len) {
            return false;
        }
        // SAFETY: offset + len <= self.len, so the destination lies inside
        // the mapping; `data` is a distinct host buffer.
        unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), self.host.add(offset), data.len()) };
        store_fence();
        true
    }
}

/// Drains write-combining buffers: orders earlier stores before later ones
/// and pushes them out towards the device.
fn store_fence() {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: sfence is available on every x86-64 CPU and has no operands.
    unsafe {
        std::arch::x86_64::_mm_sfence()
    };
    #[cfg(not(target_arch = "x86_64"))]
    std::sync::atomic::fence(Ordering::SeqCst);
}

impl Drop for GdrMapping {
    fn drop(&mut self) {
        let api = self.gdr.api;
        let _serial = self.gdr.serialise();
        // SAFETY: `map`/`map_len` are what gdr_map returned for `handle`;
        // unmap precedes unpin as gdrcopy requires, each exactly once.
        let unmapped =
            unsafe { (api.unmap)(self.gdr.handle, self.handle, self.map.cast(), self.map_len) };
        if unmapped != 0 {
            tracing::warn!(code = unmapped, "gdr_unmap failed");
        }
        // SAFETY: see above.
        let unpinned = unsafe { (api.unpin_buffer)(self.gdr.handle, self.handle) };
        if unpinned != 0 {
            tracing::warn!(code = unpinned, "gdr_unpin_buffer failed");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn availability_is_reported_with_a_reason_never_a_panic() {
        match gdrcopy_available() {
            Ok(()) => println!("gdrcopy is available on this host"),
            Err(err @ GdrError::LibraryMissing { .. }) => {
                assert!(err.to_string().starts_with("gdrcopy library not available"));
                assert!(matches!(Gdr::open(), Err(GdrError::LibraryMissing { .. })));
                println!("skip: {err}");
            }
            Err(err @ GdrError::DriverMissing { .. }) => {
                assert!(matches!(Gdr::open(), Err(GdrError::DriverMissing { .. })));
                println!("skip: {err}");
            }
            Err(other) => panic!("unexpected error kind: {other}"),
        }
    }

    #[test]
    fn info_struct_matches_gdrapi_layout() {
        assert_eq!(std::mem::size_of::<Info>(), 48);
        assert_eq!(std::mem::offset_of!(Info, page_size), 16);
        assert_eq!(std::mem::offset_of!(Info, cycles_per_ms), 32);
        assert_eq!(std::mem::offset_of!(Info, bits), 36);
        assert_eq!(std::mem::size_of::<MemoryHandle>(), 8);
    }
}
