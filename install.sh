#!/usr/bin/env bash
# install.sh: builds and installs the GPI-2 1.6 compatible C interface under
# a prefix, as GPI-2's `make install` does (decision 0031):
#
#   PREFIX/lib/libGPI2.so.0.0.0, libGPI2.so.0 -> it (the soname),
#              libGPI2.so -> it, libGPI2.a
#   PREFIX/lib/pkgconfig/GPI2.pc
#   PREFIX/include/GASPI.h GASPI_Ext.h GASPI_types.h PGASPI.h GASPI_Threads.h
#                  gaspi.mod gaspi_ext.mod gaspi_types.mod (with gfortran),
#                  gaspi.f90 (the Fortran modules' source)
#   PREFIX/bin/gaspi-run, gaspi_run
#
# usage: bash install.sh [--prefix DIR] [--no-build] [--from DIR]
#   --prefix DIR  where to install (default /usr/local)
#   --no-build    install what is built already (else: cargo build --release)
#   --from DIR    the build directory holding libGPI2.so, gaspi-run, gaspi_run
#                 (default: $CARGO_TARGET_DIR/release or target/release)
# DESTDIR, as for make install, is put in front of every installed path (the
# pkg-config file still names PREFIX).
#
# Then: cc app.c $(pkg-config --cflags --libs GPI2) -o app (with
# PKG_CONFIG_PATH=PREFIX/lib/pkgconfig for a prefix pkg-config does not
# search) and PREFIX/bin/gaspi_run -m machinefile ./app (or gaspi-run -n N).
set -euo pipefail

prefix=/usr/local
build=1
from=""
while [ $# -gt 0 ]; do
    case $1 in
        --prefix) prefix=${2:?--prefix needs a directory}; shift 2;;
        --prefix=*) prefix=${1#--prefix=}; shift;;
        --no-build) build=0; shift;;
        --from) from=${2:?--from needs a directory}; shift 2;;
        --from=*) from=${1#--from=}; shift;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0;;
        *) echo "install.sh: unknown argument $1 (see --help)" >&2; exit 2;;
    esac
done
case $prefix in
    /*) ;;
    *) prefix=$(pwd)/$prefix;;
esac

root=$(cd "$(dirname "$0")" && pwd)
if [ -z "$from" ]; then
    from=${CARGO_TARGET_DIR:-$root/target}/release
fi
if [ $build = 1 ]; then
    echo "== cargo build --release -p gaspi-capi -p gaspi-launch"
    (cd "$root" && cargo build --release -p gaspi-capi -p gaspi-launch)
fi
for f in libGPI2.so gaspi-run gaspi_run; do
    [ -e "$from/$f" ] || { echo "install.sh: no $from/$f (build first, or drop --no-build)" >&2; exit 1; }
done

dest=${DESTDIR:-}$prefix
lib=$dest/lib
inc=$dest/include
bin=$dest/bin
mkdir -p "$lib/pkgconfig" "$inc" "$bin"

echo "== installing under $dest"
install -m 755 "$from/libGPI2.so" "$lib/libGPI2.so.0.0.0"
ln -sf libGPI2.so.0.0.0 "$lib/libGPI2.so.0"
ln -sf libGPI2.so.0.0.0 "$lib/libGPI2.so"
if [ -e "$from/libGPI2.a" ]; then
    install -m 644 "$from/libGPI2.a" "$lib/libGPI2.a"
fi
for h in GASPI.h GASPI_Ext.h GASPI_types.h PGASPI.h GASPI_Threads.h; do
    install -m 644 "$root/runtime/capi/include/$h" "$inc/$h"
done
install -m 755 "$from/gaspi-run" "$bin/gaspi-run"
install -m 755 "$from/gaspi_run" "$bin/gaspi_run"

# The Fortran modules: the source always, the compiled .mod files where a
# Fortran compiler is (they hold interfaces and constants only: a program
# needs -I PREFIX/include and -lGPI2, no object of its own).
install -m 644 "$root/runtime/capi/fortran/gaspi.f90" "$inc/gaspi.f90"
fc=${FC:-gfortran}
if command -v "$fc" >/dev/null; then
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    (cd "$work" && "$fc" -c "$root/runtime/capi/fortran/gaspi.f90" -o gaspi.o)
    for m in gaspi.mod gaspi_ext.mod gaspi_types.mod; do
        install -m 644 "$work/$m" "$inc/$m"
    done
else
    echo "note: no Fortran compiler ($fc): installed gaspi.f90 but no .mod files"
fi

# pkg-config: the run path is in Libs, so that a program built against a
# prefix outside the loader's search path runs without LD_LIBRARY_PATH.
cat >"$lib/pkgconfig/GPI2.pc" <<EOF
prefix=$prefix
exec_prefix=\${prefix}
libdir=\${exec_prefix}/lib
includedir=\${prefix}/include

Name: GPI2
Description: GPI-2 1.6 compatible GASPI library of gaspi-rs
Version: 1.6.0
Cflags: -I\${includedir}
Libs: -L\${libdir} -lGPI2 -Wl,-rpath,\${libdir}
Libs.private: -ldl -lgcc_s -lutil -lrt -lpthread -lm -lc
EOF

echo "installed: $lib/libGPI2.so.0 (soname), headers and Fortran modules in $inc,"
echo "  gaspi-run and gaspi_run in $bin, $lib/pkgconfig/GPI2.pc"
