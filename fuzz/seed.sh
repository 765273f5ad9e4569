#!/usr/bin/env bash
# seed.sh - seeds the fuzz corpora from real traffic: records the loopback
# TCP traffic of a run of tests/tests/tcp_transport.rs (tcpdump), splits it
# into connection streams (fuzz/pcap_streams.py) and writes at most 30
# seeds per target (`gaspi::fuzzing::seeds_from_streams`) as
# fuzz/corpus/<target>/seed-*, replacing the old seeds (inputs the fuzzers
# found stay). Needs root and tcpdump; holds /tmp/gaspi-tests.lock while
# the tests run.
#
#   bash fuzz/seed.sh
set -euo pipefail
cd "$(dirname "$0")/.."
command -v tcpdump >/dev/null || { echo "seed.sh: needs tcpdump" >&2; exit 2; }
work=$(mktemp -d /tmp/fuzz-seed.XXXXXX)
trap 'rm -rf "$work"' EXIT
nice -n 10 cargo test -q --release -p gaspi-tests --test tcp_transport --no-run
(
    flock 9
    tcpdump -i lo -s 0 -U -w "$work/run.pcap" tcp 2>/dev/null &
    dump=$!
    sleep 1
    cargo test -q --release -p gaspi-tests --test tcp_transport || true
    sleep 1
    kill "$dump"
    wait "$dump" || true
) 9>/tmp/gaspi-tests.lock
python3 fuzz/pcap_streams.py "$work/run.pcap" "$work/streams"
rm -f fuzz/corpus/*/seed-*
GASPI_FUZZ_STREAMS="$work/streams" GASPI_FUZZ_OUT="$PWD/fuzz/corpus" nice -n 10 \
    cargo test -q --release -p gaspi --lib fuzzing::tests::write_seeds -- --ignored --nocapture
du -sh fuzz/corpus
