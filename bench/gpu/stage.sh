#!/bin/bash
# Builds what bench/gpu/run-all.sh needs and copies it into DIR (default
# .device-bin, git-ignored), with run-all.sh itself, tables.py and the
# NVSHMEM programs' sources (bench/peers/nvshmem*). The binaries load
# libcuda and libnvrtc at run time, so they build without CUDA.
set -euo pipefail
cd "$(dirname "$0")/../.."
DIR=${1:-.device-bin}
cargo build --release -p gaspi-bench -p gaspi-tests --bin gaspi-bench --bin gaspi-gpu-tests
cargo build --release -p gaspi-launch --bin gaspi-run
cargo build --release -p gaspi-examples --example matvec
mkdir -p "$DIR"
cp target/release/gaspi-bench target/release/gaspi-gpu-tests target/release/gaspi-run "$DIR"/
cp target/release/examples/matvec "$DIR"/
strip "$DIR"/gaspi-bench "$DIR"/gaspi-gpu-tests "$DIR"/gaspi-run "$DIR"/matvec  # debug info would pass the 64 MiB carry limit
cp bench/gpu/run-all.sh bench/gpu/tables.py "$DIR"/
# NVSHMEM's ping-pong and bandwidth programs, built there with nvcc.
mkdir -p "$DIR/peers"
cp bench/peers/nvshmem_common.cuh bench/peers/nvshmem_pingpong.cu bench/peers/nvshmem_bw.cu bench/peers/nvshmem-run.sh "$DIR/peers/"
# The C interface's GPU programs, compiled there with nvcc (run-all.sh runs them).
bash tests/capi/gpu/stage.sh "$DIR/capi-gpu" >/dev/null
ls -la "$DIR"
