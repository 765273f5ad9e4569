#!/usr/bin/env python3
"""Writes gaspi.f90, the Fortran module `gaspi` (iso_c_binding interfaces to
libGPI2), from GASPI.h, GASPI_Ext.h and the enums of GASPI_types.h.

Run from the repository root: python3 runtime/capi/fortran/gen_gaspi_f90.py
(tests/tests/capi.rs checks that the committed gaspi.f90 is what this
script writes, so the module cannot fall behind the headers).

Mapping: unsigned C integers become the signed Fortran integer of the same
width (Fortran has none unsigned); scalars passed by value get `value`;
out-parameters are passed by reference; the arrays of the list calls,
group_ranks, segment_id_list and the state vector are assumed-size arrays;
pointers are type(c_ptr) and the allreduce_user callback type(c_funptr).
Not bound: gaspi_config_get/set (a struct with nested structs: use the
GASPI_* environment variables) and the variadic gaspi_printf/_to.
"""
import re
import sys

INC = "runtime/capi/include/"
OUT = "runtime/capi/fortran/gaspi.f90"

KIND = {}
for t in ["gaspi_timeout_t", "gaspi_size_t", "gaspi_offset_t", "gaspi_atomic_value_t",
          "gaspi_cycles_t", "unsigned long", "gaspi_ulong", "gaspi_long"]:
    KIND[t] = "integer(c_long)"
for t in ["gaspi_rank_t", "gaspi_ushort", "gaspi_short"]:
    KIND[t] = "integer(c_short)"
for t in ["gaspi_group_t", "gaspi_queue_id_t", "gaspi_segment_id_t", "gaspi_uchar"]:
    KIND[t] = "integer(c_signed_char)"
for t in ["gaspi_number_t", "gaspi_notification_id_t", "gaspi_notification_t", "gaspi_uint",
          "gaspi_statistic_counter_t", "gaspi_return_t", "gaspi_alloc_t",
          "gaspi_memory_description_t", "gaspi_operation_t", "gaspi_datatype_t",
          "gaspi_network_t", "gaspi_statistic_argument_t", "gaspi_int"]:
    KIND[t] = "integer(c_int)"
for t in ["float", "gaspi_float", "gaspi_time_t"]:
    KIND[t] = "real(c_float)"
POINTERS = {"gaspi_pointer_t", "gaspi_reduce_state_t", "void"}
ARRAYS = {"group_ranks", "segment_id_list", "state_vector"}
LIST_ARRAYS = {"segment_id_local", "offset_local", "segment_id_remote", "offset_remote", "size"}
SKIP = {"gaspi_config_get", "gaspi_config_set", "gaspi_printf", "gaspi_printf_to"}


def declarations():
    out = []
    for h in ["GASPI.h", "GASPI_Ext.h"]:
        text = re.sub(r"/\*.*?\*/", "", open(INC + h).read(), flags=re.S)
        pat = r"^\s*(gaspi_return_t|void|gaspi_string_t)\s+(p?gaspi_\w+)\s*\((.*?)\)\s*;"
        for m in re.finditer(pat, text, flags=re.S | re.M):
            ret, name, args = m.groups()
            if name.startswith("gaspi_") and name not in SKIP:
                out.append((ret, name, " ".join(args.split())))
    return out


def param(fn, p):
    """(name, declaration line) of one C parameter."""
    p = p.replace("const", " ").strip()
    pointer = "*" in p
    words = p.replace("*", " ").split()
    name = words[-1].lstrip("_")
    ctype = " ".join(words[:-1])
    if ctype == "gaspi_state_vector_t":
        return name, f"integer(c_int), dimension(*), intent(out) :: {name}"
    if ctype == "gaspi_reduce_operation_t":
        return name, f"type(c_funptr), value :: {name}"
    if ctype == "gaspi_string_t" and pointer:
        return name, f"type(c_ptr), intent(out) :: {name}"
    if ctype in POINTERS:
        if pointer and ctype == "gaspi_pointer_t":
            return name, f"type(c_ptr), intent(out) :: {name}"
        return name, f"type(c_ptr), value :: {name}"
    kind = KIND[ctype]
    if not pointer:
        return name, f"{kind}, value :: {name}"
    if name in ARRAYS or ("_list" in fn and name in LIST_ARRAYS):
        return name, f"{kind}, dimension(*) :: {name}"
    return name, f"{kind}, intent(inout) :: {name}"


def interface(ret, fn, args):
    params = [] if args in ("void", "") else [param(fn, a) for a in args.split(",")]
    # Free form allows 132 columns: the dummy names go four to a line.
    names = [n for n, _ in params]
    chunks = [", ".join(names[i:i + 4]) for i in range(0, len(names), 4)] or [""]
    args_text = (", &\n        ").join(chunks)
    kind = "subroutine" if ret == "void" else "function"
    result = "" if ret == "void" else " result(res)"
    lines = [
        f"    {kind} {fn}( &",
        f"        {args_text}) &",
        f"        {result.strip()} bind(C, name=\"{fn}\")".replace("         bind", "        bind"),
    ]
    lines.append("      import")
    lines.append("      implicit none")
    for _, d in params:
        lines.append(f"      {d}")
    if ret == "gaspi_return_t":
        lines.append("      integer(c_int) :: res")
        lines.append(f"    end function {fn}")
    elif ret == "gaspi_string_t":
        lines.append("      type(c_ptr) :: res")
        lines.append(f"    end function {fn}")
    else:
        lines.append(f"    end subroutine {fn}")
    return lines


def constants():
    text = re.sub(r"/\*.*?\*/", "", open(INC + "GASPI_types.h").read(), flags=re.S)
    lines = []
    for body in re.findall(r"typedef enum\s*\{(.*?)\}", text, flags=re.S):
        value = -1
        for entry in body.split(","):
            entry = entry.strip()
            if not entry:
                continue
            if "=" in entry:
                name, v = [x.strip() for x in entry.split("=")]
                value = int(v) if re.fullmatch(r"-?\d+", v) else None
                if value is None:
                    continue  # an alias (GASPI_ALLOC_DEFAULT): below
            else:
                name, value = entry, value + 1
            lines.append(f"  integer(c_int), parameter :: {name} = {value}")
    lines.append("  integer(c_int), parameter :: GASPI_ALLOC_DEFAULT = GASPI_MEM_UNINITIALIZED")
    lines.append("  integer(c_signed_char), parameter :: GASPI_GROUP_ALL = 0")
    lines.append("  ! GASPI_BLOCK is the C value 0xffffffffffffffff.")
    lines.append("  integer(c_long), parameter :: GASPI_BLOCK = -1_c_long")
    lines.append("  integer(c_long), parameter :: GASPI_TEST = 0_c_long")
    return lines


def main():
    out = [
        "! gaspi.f90: the Fortran module `gaspi` of libGPI2 (gaspi-rs), iso_c_binding",
        "! interfaces to GASPI.h and GASPI_Ext.h. Written by gen_gaspi_f90.py; do not",
        "! edit by hand. Unsigned C integers are the signed Fortran integers of the",
        "! same width. Not bound: gaspi_config_get/set, gaspi_printf/_to.",
        "module gaspi",
        "  use, intrinsic :: iso_c_binding",
        "  implicit none",
        "",
    ]
    out += constants()
    out += ["", "  interface"]
    for ret, fn, args in declarations():
        out += interface(ret, fn, args)
        out.append("")
    out += ["  end interface", "end module gaspi", ""]
    text = "\n".join(out)
    if "--check" in sys.argv:
        sys.exit(0 if open(OUT).read() == text else 1)
    open(OUT, "w").write(text)


main()
