#!/usr/bin/env bash
# tests/gpi2-conformance.sh LIBDIR [NRANKS]: runs GPI-2 1.6's own test suite
# against our libGPI2 and compares with GPI-2's results (decision 0032).
#
# The suite and GPI-2's results lie outside the project (GPL-3.0, never
# copied in): SUITE, default ../shared/gpi2-conformance beside the
# repository (its run.sh, gpi2-reference-N.txt). Prints our summary line,
# GPI-2's, the programs GPI-2 fails that ours passes, and the regressions:
# programs that pass on GPI-2 (the reference for NRANKS, else the 2-rank
# one) and do not pass on ours. Exits 1 when there is a regression, 0
# otherwise; 0 with a SKIPPED line when the suite is not there.
#
# Environment: SUITE; REFERENCE (a results file); GASPI_TRANSPORT and the
# other GASPI_* variables reach the ranks; run.sh's own (ONLY, TIMEOUT,
# GAP, LOGDIR, KEEP) pass through; TIMEOUT defaults to the reference run's,
# at most 120 s. Run from anywhere.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
libdir=$(readlink -f "${1:?usage: tests/gpi2-conformance.sh LIBDIR [NRANKS]}")
nranks=${2:-2}
suite=${SUITE:-$root/../shared/gpi2-conformance}
if [ ! -f "$suite/run.sh" ]; then
    echo "SKIPPED gpi2-conformance: no GPI-2 suite at $suite (set SUITE)"
    exit 0
fi
suite=$(readlink -f "$suite")
reference=${REFERENCE:-$suite/gpi2-reference-$nranks.txt}
[ -f "$reference" ] || reference=$suite/gpi2-reference-2.txt

# The per-program time limit of GPI-2's own run (its reference line
# "TIMEOUT=N"), at most 120 s: bandwidth-bound programs (read_write and
# comm_limits move 19 GiB over TCP with 4 ranks) need more than run.sh's
# default 60 s on 2 cores, as they did on GPI-2.
if [ -z "${TIMEOUT:-}" ]; then
    ref_timeout=$(sed -n 's/.*TIMEOUT=\([0-9]*\).*/\1/p' "$reference" | head -n1)
    export TIMEOUT=$(( ${ref_timeout:-60} < 120 ? ${ref_timeout:-60} : 120 ))
fi

out=$(mktemp)
trap 'rm -f "$out"' EXIT
# run.sh takes its headers from INCDIR relative to the working directory.
(cd "$root" && bash "$suite/run.sh" "$libdir" "$nranks") | tee "$out"

status() { # file test -> PASS|FAIL|TIMEOUT|SKIP|absent
    awk -v t="$2" '$1 == "TEST" && $2 == t { print $3; found = 1; exit }
                   END { if (!found) print "absent" }' "$1"
}
ours=$(grep '^GPI2TESTS' "$out" | tail -n1)
theirs=$(grep '^GPI2TESTS' "$reference" | tail -n1)
transport=${GASPI_TRANSPORT:-auto}
echo "== GPI-2 conformance, $nranks ranks, GASPI_TRANSPORT=$transport"
echo "ours:  ${ours:-no summary line (run.sh failed)}"
echo "GPI-2: $theirs ($(basename "$reference"))"
[ -n "$ours" ] || exit 1
better=()
regressions=()
while read -r _ name state _; do
    mine=$(status "$out" "$name")
    # A program that did not run here (ONLY) is not compared.
    if [ "$state" = PASS ] && [ "$mine" != PASS ] && [ "$mine" != absent ]; then
        regressions+=("$name ($mine: $(grep -m1 "^TEST $name " "$out" | cut -d' ' -f4- | cut -c1-160))")
    elif [ "$state" != PASS ] && [ "$state" != SKIP ] && [ "$mine" = PASS ]; then
        better+=("$name")
    fi
done < <(grep '^TEST ' "$reference")
if [ ${#better[@]} -gt 0 ]; then
    echo "passing here, not on GPI-2: ${better[*]}"
fi
if [ ${#regressions[@]} -gt 0 ]; then
    echo "REGRESSIONS (pass on GPI-2, not here): ${#regressions[@]}"
    printf '  %s\n' "${regressions[@]}"
    exit 1
fi
echo "no regressions"
