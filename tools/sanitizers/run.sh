#!/usr/bin/env bash
# sanitizers/run.sh - the multi-process tests under AddressSanitizer or
# ThreadSanitizer (decision 0079), on the stable toolchain with
# RUSTC_BOOTSTRAP=1 (it ships the sanitizer runtimes).
#
#   bash tools/sanitizers/run.sh asan|tsan [ci]
#
# The set: the multi-process tests of gaspi-tests named in `full` below
# (shared memory: data_movement; TCP: tcp_transport; the rest of the model,
# collectives, atomics, refused input, faults), the runtime's own unit
# tests and the C interface through Rust programs (the capi crate's unit
# tests and its tests/: the list calls and the replayed fuzz corpora).
# `ci` runs the subset CI has time for: data_movement's 2-rank tests and
# tcp_transport. SAN_TESTS="a b" runs those gaspi-tests files instead.
# Not in the set: tests/capi.rs (C programs against libGPI2.so: an
# instrumented shared library needs the C programs built with the same
# sanitizer runtime, which gcc's libasan is not).
# ASan: std as shipped. TSan: std rebuilt instrumented (-Zbuild-std,
# needs the rust-src component; otherwise every std lock is a false race).
# Builds into target/san-<kind>; the tests' own launcher builds are
# pointed at the instrumented binaries (CARGO=/bin/false: they fall back
# to the programs already built there). Suppressions:
# tools/sanitizers/<kind>.supp, each line with its reason.
# The test runs hold /tmp/gaspi-tests.lock.
set -euo pipefail
cd "$(dirname "$0")/../.."
kind=${1:?usage: tools/sanitizers/run.sh asan|tsan [ci]}
mode=${2:-full}
target=x86_64-unknown-linux-gnu
export RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=$PWD/target/san-$kind
extra=()
case $kind in
asan)
    export RUSTFLAGS="-Zsanitizer=address" RUSTDOCFLAGS="-Zsanitizer=address"
    export ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:halt_on_error=1:detect_odr_violation=0"
    export LSAN_OPTIONS="suppressions=$PWD/tools/sanitizers/lsan.supp:print_suppressions=0"
    ;;
tsan)
    if ! rustup component list --installed 2>/dev/null | grep -q rust-src; then
        rustup component add rust-src >/dev/null 2>&1 || {
            echo "sanitizers: SKIPPED tsan: no rust-src component for -Zbuild-std" >&2
            exit 0
        }
    fi
    export RUSTFLAGS="-Zsanitizer=thread" RUSTDOCFLAGS="-Zsanitizer=thread"
    export TSAN_OPTIONS="suppressions=$PWD/tools/sanitizers/tsan.supp:halt_on_error=1:second_deadlock_stack=1"
    extra=(-Zbuild-std)
    ;;
*)
    echo "sanitizers: asan or tsan" >&2
    exit 2
    ;;
esac
build() { nice -n 10 cargo "$@" --release --target $target "${extra[@]}"; }
# The programs the tests launch, instrumented, where the tests look.
build build -q -p gaspi-launch --bin gaspi-run --bin gaspi_run
build build -q -p gaspi-tests --bins
full=(data_movement tcp_transport model collectives atomic_retry bad_input fault_semantics faults segment_size strangers)
if [ -n "${SAN_TESTS:-}" ]; then
    read -r -a tests <<<"$SAN_TESTS"
elif [ "$mode" = ci ]; then
    tests=(data_movement tcp_transport)
else
    tests=("${full[@]}")
fi
capi_tests=(list_calls fuzz_corpus_calls fuzz_corpus_config)
build test -q -p gaspi-tests --no-run "${tests[@]/#/--test=}"
[ "$mode" = ci ] || build test -q -p gaspi -p gaspi-capi --lib --no-run
[ "$mode" = ci ] || build test -q -p gaspi-capi --no-run "${capi_tests[@]/#/--test=}"
dir=$CARGO_TARGET_DIR/$target/release
status=0
run() { # name, binary, args...
    local name=$1
    shift
    echo "== $kind: $name"
    if ! CARGO=/bin/false flock /tmp/gaspi-tests.lock nice -n 10 "$@" --test-threads=1 2>&1 | tee "$CARGO_TARGET_DIR/$name.log" | grep -E "^test |test result|SUMMARY|WARNING: ThreadSanitizer|ERROR: AddressSanitizer"; then
        status=1
    fi
    if grep -qE "SUMMARY: (Address|Thread|Leak)Sanitizer" "$CARGO_TARGET_DIR/$name.log"; then
        echo "sanitizers: $kind reports in $name (see $CARGO_TARGET_DIR/$name.log)" >&2
        status=1
    fi
}
for t in "${tests[@]}"; do
    bin=$(ls -t "$dir"/deps/$t-* | grep -v '\.d$' | head -1)
    if [ "$mode" = ci ] && [ "$t" = data_movement ]; then
        run "$t" "$bin" with_2_ranks
    else
        run "$t" "$bin"
    fi
done
if [ "$mode" != ci ]; then
    bin=$(ls -t "$dir"/deps/gaspi-* | grep -v '\.d$' | head -1)
    run runtime-unit "$bin" --skip loom
    # The capi crate's library is named GPI2: its unit tests are GPI2-<hash>.
    bin=$(ls -t "$dir"/deps/GPI2-* | grep -v '\.d$' | head -1)
    run capi-unit "$bin"
    for t in "${capi_tests[@]}"; do
        bin=$(ls -t "$dir"/deps/$t-* | grep -v '\.d$' | head -1)
        run "capi-$t" "$bin"
    done
fi
[ $status = 0 ] && echo "sanitizers: $kind clean" || echo "sanitizers: $kind FAILED" >&2
exit $status
