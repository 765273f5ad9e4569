//! `gaspi_printf` and `gaspi_printf_to`: C-variadic, so written in C
//! (`src/printf.c`). Stable Rust cannot define a C-variadic function, and
//! rustc does not export symbols of the C objects it links into a cdylib;
//! so the exported symbols are these naked functions, each a single jump
//! to the C body. A jump leaves every argument register (and `%al`, the
//! count of vector registers a variadic call passes) as the caller set it.

extern "C" {
    fn gaspi_capi_printf_impl();
    fn gaspi_capi_printf_to_impl();
}

/// `void gaspi_printf(const char *fmt, ...)`: formats like printf and
/// writes to stdout at once.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn gaspi_printf() {
    core::arch::naked_asm!("jmp {f}", f = sym gaspi_capi_printf_impl)
}

/// `void gaspi_printf_to(gaspi_rank_t rank, const char *fmt, ...)`:
/// `gaspi_printf` on `rank` only.
#[cfg(target_arch = "x86_64")]
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn gaspi_printf_to() {
    core::arch::naked_asm!("jmp {f}", f = sym gaspi_capi_printf_to_impl)
}

/// `void gaspi_printf(const char *fmt, ...)`.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn gaspi_printf() {
    core::arch::naked_asm!("b {f}", f = sym gaspi_capi_printf_impl)
}

/// `void gaspi_printf_to(gaspi_rank_t rank, const char *fmt, ...)`.
#[cfg(target_arch = "aarch64")]
#[unsafe(naked)]
#[no_mangle]
pub extern "C" fn gaspi_printf_to() {
    core::arch::naked_asm!("b {f}", f = sym gaspi_capi_printf_to_impl)
}
