#!/usr/bin/env bash
# compare-gpi2.sh - run the C microbenchmarks of bench/capi/ against this
# runtime's libGPI2 and against GPI-2 1.6 (Ethernet/TCP device) built from
# source, in the same run, and print ours vs GPI-2 point by point.
#
#   GPI2_SRC=/path/to/GPI-2 bench/compare-gpi2.sh
#
# GPI2_SRC is a GPI-2 1.6 source tree (a checkout of cc-hpc-itwm/GPI-2 at
# v1.6.0, e.g. `git archive v1.6.0 | tar -x -C DIR`); this script downloads
# nothing and never writes into it (it builds a copy).
#
# Environment:
#   GPI2_SRC        GPI-2 source tree (required unless GPI2_PREFIX holds a
#                   build already).
#   GPI2_PREFIX     where GPI-2 is installed (default target/gpi2/prefix);
#                   reused if it has lib*/libGPI2.so, unless GPI2_REBUILD=1.
#   ROUNDS          rounds (default 3); each round launches every program
#                   once against each library, alternating which goes first.
#   OUT             raw outputs (default target/gpi2/run-<date>).
#   OURS_ENV        VAR=value words for our runs, e.g. GASPI_TRANSPORT=tcp
#                   to run ours over its TCP transport too (default: the
#                   shared-memory transport, which ranks of one host use).
#
# Steps: (a) install autoconf/automake/libtool if missing (Debian, root);
# (b) build GPI-2: ./autogen.sh, ./configure --with-ethernet
# --without-fortran --disable-debug-lib --disable-stat-lib, make install;
# (c) cargo build libGPI2 and gaspi-run; (d) compile each bench/capi/*.c
# twice with the same flags (-O2), against GPI-2's headers and library and
# against ours; (e) run them with 2 ranks on this host: ours under
# target/release/gaspi-run -n 2; GPI-2's ranks started directly with the
# environment its gaspi_run gives them (GASPI_MASTER, GASPI_SOCKET,
# GASPI_MFILE, GASPI_RANK, GASPI_NRANKS; machinefile: this hostname twice)
# rather than through gaspi_run, which starts every rank over ssh even on
# one host: the processes GPI-2 runs are the same; (f) print per point the
# median over rounds of each round's median, the spread (lowest p10 and
# highest p90 over rounds), and the ratio GPI-2 time / ours (write-bw:
# time per write, i.e. the bandwidth ratio; above 1 means ours is faster).
# JOIN_ONLY=DIR only prints the table of the raw outputs in DIR.
#
# Exit status: 0 if ours is faster at every point, 1 if not, 2 on setup
# errors.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
ROUNDS=${ROUNDS:-3}
GPI2_PREFIX=${GPI2_PREFIX:-$ROOT/target/gpi2/prefix}
OUT=${OUT:-$ROOT/target/gpi2/run-$(date +%Y%m%d-%H%M%S)}
BUILD=$ROOT/target/gpi2
PROGS=(${PROGS_ONLY:-pingpong "pingpong naive" writebw readbw barrier allreduce})
mkdir -p "$OUT" "$BUILD/ours" "$BUILD/gpi2"

gpi2_lib() {
    for d in "$GPI2_PREFIX"/lib64 "$GPI2_PREFIX"/lib; do
        if [ -e "$d/libGPI2.so" ]; then echo "$d"; return; fi
    done
}

join() {
    python3 - "$1" <<'PY'
import glob, os, re, statistics, sys
out = sys.argv[1]
pts = {}  # (lib, bench, size) -> list of (median, p10, p90) per round
for f in sorted(glob.glob(os.path.join(out, "*.txt"))):
    lib = os.path.basename(f).split("-")[0]
    for line in open(f, errors="replace"):
        m = re.match(r"(\S+) size=(\d+) (.*)", line)
        if not m:
            continue
        kv = dict(x.split("=") for x in m.group(3).split() if "=" in x)
        bench, size = m.group(1), int(m.group(2))
        if "median_us" in kv:
            v = (float(kv["median_us"]), float(kv["p10_us"]), float(kv["p90_us"]))
        else:
            continue
        pts.setdefault((lib, bench, size), []).append(v)
keys = sorted({(b, s) for (_, b, s) in pts}, key=lambda k: (k[0], k[1]))
print(f"| bench | size | ours median [p10, p90] | GPI-2 1.6 TCP median [p10, p90] | ratio (>1: ours faster) | rounds |")
print("|---|---:|---:|---:|---:|---:|")
worse = 0
for b, s in keys:
    o, g = pts.get(("ours", b, s)), pts.get(("gpi2", b, s))
    def fmt(v):
        # write-bw: time per write, and the bandwidth of the median
        if not v:
            return "missing"
        med = statistics.median(x[0] for x in v)
        bw = f" ({s / med * 1e-3:.3g} GB/s)" if b == "write-bw" else ""
        return f"{med:.3f} [{min(x[1] for x in v):.3f}, {max(x[2] for x in v):.3f}] us{bw}"
    if o and g:
        om, gm = statistics.median(x[0] for x in o), statistics.median(x[0] for x in g)
        ratio = gm / om
        worse += ratio <= 1
        r = f"{ratio:.1f}x"
    else:
        worse += 1
        r = "-"
    sz = f"{s} doubles" if b == "allreduce" else ("-" if b == "barrier" else f"{s} B")
    print(f"| {b} | {sz} | {fmt(o)} | {fmt(g)} | {r} | {min(len(o or []), len(g or []))} |")
print(f"\nraw outputs: {out}")
sys.exit(1 if worse else 0)
PY
}
if [ -n "${JOIN_ONLY:-}" ]; then
    join "$JOIN_ONLY"
    exit $?
fi

# (a), (b) GPI-2
if [ -z "$(gpi2_lib)" ] || [ "${GPI2_REBUILD:-0}" = 1 ]; then
    if [ -z "${GPI2_SRC:-}" ] || [ ! -e "$GPI2_SRC/configure.ac.in" ]; then
        echo "set GPI2_SRC to a GPI-2 1.6 source tree (with configure.ac.in)" >&2
        exit 2
    fi
    for t in autoconf automake libtoolize; do
        if ! command -v $t >/dev/null; then
            if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
                apt-get install -y autoconf automake libtool >/dev/null
            else
                echo "need autoconf, automake, libtool" >&2
                exit 2
            fi
            break
        fi
    done
    rm -rf "$BUILD/src"
    cp -a "$GPI2_SRC" "$BUILD/src"
    (
        cd "$BUILD/src"
        ./autogen.sh
        ./configure --prefix="$GPI2_PREFIX" --with-ethernet --without-fortran \
            --disable-debug-lib --disable-stat-lib
        make -j"$(nproc)"
        make install
    ) >"$BUILD/build.log" 2>&1 || { echo "GPI-2 build failed: $BUILD/build.log" >&2; exit 2; }
fi
GPI2_LIB=$(gpi2_lib)
v=$(sed -n 's/^#define GASPI_\(MAJOR_VERSION\|MINOR_VERSION\|REVISION\) (\([0-9]*\))/\2/p' \
    "$GPI2_PREFIX/include/GPI2_VERSION.h" 2>/dev/null | paste -sd. || true)
echo "GPI-2 ${v:-(version unknown)}: $GPI2_PREFIX"

# (c) ours
(cd "$ROOT" && cargo build --release -q -p gaspi-capi -p gaspi-launch --bin gaspi-run)
ln -sf libGPI2.so "$ROOT/target/release/libGPI2.so.0"

# (d) the same sources against both
for src in "$ROOT"/bench/capi/*.c; do
    p=$(basename "$src" .c)
    cc -O2 -I"$ROOT/runtime/capi/include" "$src" -L"$ROOT/target/release" -lGPI2 \
        -Wl,-rpath,"$ROOT/target/release" -o "$BUILD/ours/$p"
    cc -O2 -I"$GPI2_PREFIX/include" "$src" -L"$GPI2_LIB" -lGPI2 -lpthread \
        -Wl,-rpath,"$GPI2_LIB" -o "$BUILD/gpi2/$p"
done
hostname >"$BUILD/machinefile"
hostname >>"$BUILD/machinefile"

# shellcheck disable=SC2086 # OURS_ENV is a list of VAR=value words
run_ours() { env ${OURS_ENV:-} timeout 300 "$ROOT/target/release/gaspi-run" -n 2 "$BUILD/ours/$1" ${2:-}; }
run_gpi2() {
    local pids=() rc=0
    for r in 0 1; do
        GASPI_MASTER=$(hostname) GASPI_SOCKET=$r GASPI_MFILE="$BUILD/machinefile" \
            GASPI_RANK=$r GASPI_NRANKS=2 GASPI_SET_NUMA_SOCKET=0 \
            timeout 300 "$BUILD/gpi2/$1" ${2:-} &
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || rc=$?; done
    sleep 1 # GPI-2's TCP device binds fixed ports
    return $rc
}

# (e) rounds, alternating which library goes first
for round in $(seq 1 "$ROUNDS"); do
    for prog in "${PROGS[@]}"; do
        set -- $prog
        order="ours gpi2"
        [ $((round % 2)) = 0 ] && order="gpi2 ours"
        for lib in $order; do
            f="$OUT/$lib-r$round-${1}${2:+-$2}.txt"
            echo "round $round: $lib $prog" >&2
            run_$lib "$1" "${2:-}" >"$f" 2>&1 || echo "  $lib $prog failed (rc $?), see $f" >&2
        done
    done
done

# (f) join
join "$OUT"
