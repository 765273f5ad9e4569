#!/bin/bash
# Stages bench/gpu/cross-host.sh for the GPU machine (no Rust, no `ip`):
# the binaries, the script, its table, the NCCL program, Debian's ip and
# the libraries it needs (not libc) into DIR (default .device-bin).
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.device-bin}
cargo build --release -p gaspi-bench -p gaspi-tests --bin gaspi-bench --bin gaspi-gpu-tests
cargo build --release -p gaspi-examples --example matvec
mkdir -p "$DIR/lib"
cp target/release/gaspi-bench target/release/gaspi-gpu-tests target/release/examples/matvec "$DIR"/
strip "$DIR"/gaspi-bench "$DIR"/gaspi-gpu-tests "$DIR"/matvec
cp bench/gpu/cross-host.sh bench/gpu/cross_host_table.py bench/peers/nccl_sendrecv.py bench/peers/tcp_duplex.py "$DIR"/
cp /usr/sbin/ip "$DIR"/ip
for l in $(ldd /usr/sbin/ip | awk '/=>/ {print $3}' | grep -v -E 'libc\.so|ld-linux'); do cp -L "$l" "$DIR/lib/"; done
ls -la "$DIR" "$DIR/lib"
