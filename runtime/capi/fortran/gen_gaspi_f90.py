#!/usr/bin/env python3
"""Writes gaspi.f90, the Fortran modules of libGPI2 from GASPI.h,
GASPI_Ext.h and the enums of GASPI_types.h, shaped as GPI-2 1.6's: module
`gaspi_types` (the kind parameters gaspi_rank_t, gaspi_size_t, ... and the
constants), `gaspi_ext` (GASPI_Ext.h's calls) and `gaspi` (GASPI.h's calls;
it uses the other two, so `use gaspi` alone reaches everything, and
`use gaspi` with `use gaspi_ext` names the same entities twice, which
Fortran allows). Each module passes iso_c_binding on (c_int, c_loc, ...).

Run from the repository root: python3 runtime/capi/fortran/gen_gaspi_f90.py
(tests/tests/capi.rs checks that the committed gaspi.f90 is what this
script writes, so the modules cannot fall behind the headers).

Mapping: a C typedef becomes the Fortran integer of the same width under
a kind parameter of the same name (unsigned C integers are the signed
Fortran integers of that width: Fortran has none unsigned); scalars passed
by value get `value`; out-parameters are passed by reference; the arrays
of the list calls are type(c_ptr) by value (c_loc of the first element),
as in GPI-2; group_ranks, segment_id_list and the state vector are
assumed-size arrays; other pointers are type(c_ptr), the allreduce_user
callback type(c_funptr). gaspi_printf/_to take one string, used as the
format (write %% for a percent sign), as in GPI-2. Not bound:
gaspi_config_get/set (a struct with nested structs: use the GASPI_*
environment variables).

Kinds that differ from GPI-2 1.6's Fortran module: gaspi_timeout_t is
c_long (GPI-2: c_int; the C argument is an unsigned long, so a literal
timeout needs the kind: 1000_gaspi_timeout_t), gaspi_time_t is a
real(c_float) kind (GPI-2: integer c_long; the C value is a float).
gaspi_alloc_t is c_long as in GPI-2 (the C enum is an int, passed by value).
"""
import re
import sys

INC = "runtime/capi/include/"
OUT = "runtime/capi/fortran/gaspi.f90"

# Kind parameters of module gaspi_types: (name, iso_c_binding kind).
KINDS = [
    ("gaspi_int", "c_int"), ("gaspi_uint", "c_int"), ("gaspi_char", "c_char"),
    ("gaspi_uchar", "c_signed_char"), ("gaspi_short", "c_short"),
    ("gaspi_ushort", "c_short"), ("gaspi_long", "c_long"), ("gaspi_ulong", "c_long"),
    ("gaspi_float", "c_float"), ("gaspi_double", "c_double"),
    ("gaspi_return_t", "c_int"), ("gaspi_timeout_t", "c_long"),
    ("gaspi_rank_t", "c_short"), ("gaspi_group_t", "c_signed_char"),
    ("gaspi_number_t", "c_int"), ("gaspi_queue_id_t", "c_signed_char"),
    ("gaspi_size_t", "c_long"), ("gaspi_alloc_t", "c_long"),
    ("gaspi_segment_id_t", "c_signed_char"), ("gaspi_offset_t", "c_long"),
    ("gaspi_atomic_value_t", "c_long"), ("gaspi_time_t", "c_float"),
    ("gaspi_notification_id_t", "c_int"), ("gaspi_notification_t", "c_int"),
    ("gaspi_statistic_counter_t", "c_int"), ("gaspi_cycles_t", "c_long"),
    ("gaspi_memory_description_t", "c_int"), ("gaspi_operation_t", "c_int"),
    ("gaspi_datatype_t", "c_int"), ("gaspi_network_t", "c_int"),
    ("gaspi_statistic_argument_t", "c_int"), ("gaspi_state_t", "c_int"),
]
KIND = {name: f"integer({name})" for name, _ in KINDS}
for t in ["float", "gaspi_float", "gaspi_time_t"]:
    KIND[t] = f"real({'gaspi_float' if t == 'float' else t})"
KIND["unsigned long"] = "integer(c_long)"
POINTERS = {"gaspi_pointer_t", "gaspi_reduce_state_t", "void"}
ARRAYS = {"group_ranks", "segment_id_list", "state_vector"}
LIST_ARRAYS = {"segment_id_local", "offset_local", "segment_id_remote", "offset_remote", "size"}
SKIP = {"gaspi_config_get", "gaspi_config_set"}
PRINTF = {"gaspi_printf", "gaspi_printf_to"}


def declarations(header):
    out = []
    text = re.sub(r"/\*.*?\*/", "", open(INC + header).read(), flags=re.S)
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
    if fn in PRINTF and ctype == "char":
        return name, f"character(kind=c_char), dimension(*), intent(in) :: {name}"
    if ctype == "gaspi_state_vector_t":
        return name, f"integer(gaspi_state_t), dimension(*), intent(out) :: {name}"
    if ctype == "gaspi_reduce_operation_t":
        return name, f"type(c_funptr), value :: {name}"
    if ctype == "gaspi_string_t" and pointer:
        return name, f"type(c_ptr), intent(out) :: {name}"
    if ctype in POINTERS:
        if pointer and ctype == "gaspi_pointer_t":
            return name, f"type(c_ptr), intent(out) :: {name}"
        return name, f"type(c_ptr), value :: {name}"
    if "_list" in fn and name in LIST_ARRAYS and pointer:
        return name, f"type(c_ptr), value :: {name}"
    kind = KIND[ctype]
    if not pointer:
        return name, f"{kind}, value :: {name}"
    if name in ARRAYS:
        return name, f"{kind}, dimension(*) :: {name}"
    return name, f"{kind}, intent(inout) :: {name}"


def interface(ret, fn, args):
    args = args.replace(", ...", "")
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
        lines.append("      integer(gaspi_return_t) :: res")
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
            # The allocation policies have the kind of gaspi_alloc_t, so
            # that they can be passed to gaspi_segment_alloc/_create as they
            # are (and assigned to a variable of any integer kind).
            kind = "gaspi_alloc_t" if name.startswith("GASPI_MEM_") else "c_int"
            lines.append(f"  integer({kind}), parameter :: {name} = {value}")
    lines.append("  integer(gaspi_alloc_t), parameter :: GASPI_ALLOC_DEFAULT = GASPI_MEM_UNINITIALIZED")
    lines.append("  integer(gaspi_group_t), parameter :: GASPI_GROUP_ALL = 0")
    lines.append("  ! GASPI_BLOCK is the C value 0xffffffffffffffff.")
    lines.append("  integer(gaspi_timeout_t), parameter :: GASPI_BLOCK = -1_c_long")
    lines.append("  integer(gaspi_timeout_t), parameter :: GASPI_TEST = 0_c_long")
    return lines


def module(name, uses, header):
    out = [f"module {name}"] + [f"  use {u}" for u in uses] + ["  implicit none", "", "  interface"]
    for ret, fn, args in declarations(header):
        out += interface(ret, fn, args)
        out.append("")
    return out + ["  end interface", f"end module {name}", ""]


def main():
    out = [
        "! gaspi.f90: the Fortran modules of libGPI2 (gaspi-rs): gaspi_types (kinds",
        "! and constants), gaspi_ext (GASPI_Ext.h) and gaspi (GASPI.h, and the other",
        "! two), iso_c_binding interfaces as GPI-2 1.6's modules name them. Written by",
        "! gen_gaspi_f90.py (its comment says how C maps to Fortran); do not edit by",
        "! hand. Not bound: gaspi_config_get/set.",
        "module gaspi_types",
        "  use, intrinsic :: iso_c_binding",
        "  implicit none",
        "",
    ]
    out += [f"  integer, parameter :: {n} = {k}" for n, k in KINDS]
    out += constants()
    out += ["end module gaspi_types", ""]
    out += module("gaspi_ext", ["gaspi_types"], "GASPI_Ext.h")
    out += module("gaspi", ["gaspi_types", "gaspi_ext"], "GASPI.h")
    text = "\n".join(out)
    if "--check" in sys.argv:
        sys.exit(0 if open(OUT).read() == text else 1)
    open(OUT, "w").write(text)


main()
