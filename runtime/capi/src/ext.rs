//! GASPI_Ext.h's extras that are not one-to-one runtime calls: CPU
//! affinity, `gaspi_delay`, and the gaspi-rs extension
//! `gaspi_device_context` (the device API's kernel argument).

use crate::types::*;
use crate::{call, entry, non_null, put, Code};
use std::ffi::c_void;

/// CPUs of a Linux cpulist ("0-3,8,10-11").
fn parse_cpulist(list: &str) -> Vec<usize> {
    let mut cpus = Vec::new();
    for part in list.trim().split(',').filter(|p| !p.is_empty()) {
        let mut ends = part.splitn(2, '-').map(|n| n.trim().parse::<usize>());
        match (ends.next(), ends.next()) {
            (Some(Ok(a)), None) => cpus.push(a),
            (Some(Ok(a)), Some(Ok(b))) => cpus.extend(a..=b),
            _ => {}
        }
    }
    cpus
}

/// The CPUs this process may run on.
pub(crate) fn allowed_cpus() -> Vec<usize> {
    // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: `set` is a valid cpu_set_t of the size passed.
    let rc = unsafe { libc::sched_getaffinity(0, std::mem::size_of_val(&set), &mut set) };
    if rc != 0 {
        return Vec::new();
    }
    (0..libc::CPU_SETSIZE as usize)
        // SAFETY: cpu < CPU_SETSIZE, within the set.
        .filter(|&cpu| unsafe { libc::CPU_ISSET(cpu, &set) })
        .collect()
}

/// The NUMA node of `cpu` (0 where the host gives no NUMA information).
fn node_of(cpu: usize) -> u8 {
    let dir = format!("/sys/devices/system/cpu/cpu{cpu}");
    std::fs::read_dir(dir)
        .ok()
        .and_then(|entries| {
            entries.flatten().find_map(|e| {
                e.file_name()
                    .to_str()?
                    .strip_prefix("node")?
                    .parse::<u8>()
                    .ok()
            })
        })
        .unwrap_or(0)
}

#[no_mangle]
pub extern "C" fn gaspi_print_affinity_mask() {
    let cpus: Vec<String> = allowed_cpus().iter().map(|c| c.to_string()).collect();
    println!("affinity: CPUs {}", cpus.join(","));
}

#[no_mangle]
pub unsafe extern "C" fn gaspi_numa_socket(socket: *mut gaspi_uchar) -> gaspi_return_t {
    entry("gaspi_numa_socket", || {
        // As GPI-2: an answer only when the launcher pinned the ranks to
        // NUMA nodes (GPI-2's `gaspi_run -N` sets GASPI_SET_NUMA_SOCKET=1),
        // GASPI_ERR_ENV otherwise.
        if std::env::var("GASPI_SET_NUMA_SOCKET").ok().as_deref() != Some("1") {
            tracing::debug!("gaspi_numa_socket: NUMA pinning was not requested");
            return Err(Code(GASPI_ERR_ENV));
        }
        let first = allowed_cpus().first().copied().unwrap_or(0);
        put(socket, node_of(first))
    })
}

/// `unsigned char`.
type gaspi_uchar = u8;

#[no_mangle]
pub extern "C" fn gaspi_set_socket_affinity(socket: gaspi_uchar) -> gaspi_return_t {
    entry("gaspi_set_socket_affinity", || {
        let path = format!("/sys/devices/system/node/node{socket}/cpulist");
        let cpus = match std::fs::read_to_string(path) {
            Ok(list) => parse_cpulist(&list),
            Err(_) => return Err(Code(GASPI_ERR_INV_NUM)),
        };
        if cpus.is_empty() {
            return Err(Code(GASPI_ERR_INV_NUM));
        }
        // SAFETY: cpu_set_t is plain data; zeroed is the empty set.
        let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for cpu in cpus.into_iter().filter(|&c| c < libc::CPU_SETSIZE as usize) {
            // SAFETY: cpu < CPU_SETSIZE, within the set.
            unsafe { libc::CPU_SET(cpu, &mut set) };
        }
        // SAFETY: `set` is a valid cpu_set_t of the size passed.
        if unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) } != 0 {
            tracing::warn!(
                "gaspi_set_socket_affinity({socket}): {}",
                std::io::Error::last_os_error()
            );
            return Err(Code(GASPI_ERROR));
        }
        Ok(())
    })
}

#[no_mangle]
pub extern "C" fn gaspi_delay() {
    for _ in 0..64 {
        std::hint::spin_loop();
    }
}

/// Size of the device API's kernel argument, `struct gaspi_device_ctx`.
pub const DEVICE_CTX_SIZE: usize = std::mem::size_of::<gaspi::kernels::DeviceCtx>();

#[no_mangle]
pub unsafe extern "C" fn gaspi_device_context(
    device: gaspi_uint,
    arg: *mut c_void,
    arg_size: gaspi_size_t,
) -> gaspi_return_t {
    call("gaspi_device_context", |rt| {
        non_null(arg)?;
        if (arg_size as usize) < DEVICE_CTX_SIZE {
            return Err(Code(GASPI_ERR_INV_SIZE));
        }
        let context = rt.gaspi.device_context(device)?;
        let kernel_arg = context.kernel_arg();
        // SAFETY: `arg` is not null and holds arg_size >= DEVICE_CTX_SIZE
        // bytes (GASPI_Ext.h's contract); DeviceCtx is #[repr(C)] plain
        // data, copied byte for byte from a local value.
        unsafe {
            std::ptr::copy_nonoverlapping(
                &kernel_arg as *const gaspi::kernels::DeviceCtx as *const u8,
                arg as *mut u8,
                DEVICE_CTX_SIZE,
            )
        };
        rt.devices
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(context);
        Ok(())
    })
}

/// `unsigned int`.
type gaspi_uint = u32;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpulists_parse_ranges_and_singles() {
        assert_eq!(parse_cpulist("0-3,8,10-11\n"), vec![0, 1, 2, 3, 8, 10, 11]);
        assert_eq!(parse_cpulist(""), Vec::<usize>::new());
    }

    #[test]
    fn the_kernel_argument_is_1216_bytes_as_in_gaspi_device_cuh() {
        assert_eq!(DEVICE_CTX_SIZE, 1216);
    }
}
