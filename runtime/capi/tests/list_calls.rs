//! The list calls through the exported functions, on one rank started
//! here (its own process, like every file of tests/).

use GPI2::*;

/// A list of more than `rw_list_elem_max` elements is refused with
/// `GASPI_ERR_INV_NUM` before its arrays are read: here they are pages
/// that fault on any access. Before the fix the C interface read (and
/// allocated for) all `num` entries first: a `num` of 2^32 - 1 asked for
/// 160 GiB and aborted the program, a wrong `num` read past short arrays.
#[test]
fn a_list_longer_than_rw_list_elem_max_is_refused_before_its_arrays_are_read() {
    assert_eq!(gaspi_proc_init(GASPI_BLOCK), GASPI_SUCCESS);
    assert_eq!(gaspi_segment_alloc(0, 4096, 0), GASPI_SUCCESS);
    let mut c = std::mem::MaybeUninit::<gaspi_config_t>::uninit();
    // SAFETY: `c` is valid for writing one gaspi_config_t.
    assert_eq!(unsafe { gaspi_config_get(c.as_mut_ptr()) }, GASPI_SUCCESS);
    // SAFETY: gaspi_config_get succeeded, so it wrote the whole struct.
    let max = unsafe { c.assume_init() }.rw_list_elem_max;
    const LEN: usize = 1 << 16;
    // SAFETY: a fresh private anonymous mapping, no address asked for.
    let none = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            LEN,
            libc::PROT_NONE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_NORESERVE,
            -1,
            0,
        )
    };
    assert_ne!(none, libc::MAP_FAILED, "mmap of a PROT_NONE page");
    let (ids, offsets) = (
        none.cast::<gaspi_segment_id_t>(),
        none.cast::<gaspi_offset_t>(),
    );
    for num in [max + 1, 65_536, u32::MAX] {
        // SAFETY: the arrays are not valid for `num` entries on purpose:
        // what is checked is that the call never reads them.
        let codes = unsafe {
            [
                gaspi_write_list(num, ids, offsets, 0, ids, offsets, offsets, 0, GASPI_BLOCK),
                gaspi_read_list(num, ids, offsets, 0, ids, offsets, offsets, 0, GASPI_BLOCK),
                gaspi_write_list_notify(
                    num,
                    ids,
                    offsets,
                    0,
                    ids,
                    offsets,
                    offsets,
                    0,
                    0,
                    1,
                    0,
                    GASPI_BLOCK,
                ),
                gaspi_read_list_notify(
                    num,
                    ids,
                    offsets,
                    0,
                    ids,
                    offsets,
                    offsets,
                    0,
                    0,
                    0,
                    GASPI_BLOCK,
                ),
            ]
        };
        assert_eq!(
            codes, [GASPI_ERR_INV_NUM; 4],
            "lists of {num} (rw_list_elem_max {max})"
        );
    }
    let mut n = u32::MAX;
    // SAFETY: `n` is valid for writing one value.
    assert_eq!(unsafe { gaspi_queue_size(0, &mut n) }, GASPI_SUCCESS);
    assert_eq!(n, 0, "a refused list left requests on its queue");
    // SAFETY: `none` is the mapping made above, of LEN bytes, unused now.
    assert_eq!(unsafe { libc::munmap(none, LEN) }, 0);
    assert_eq!(gaspi_proc_term(GASPI_BLOCK), GASPI_SUCCESS);
}
