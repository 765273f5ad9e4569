#!/bin/bash
# Builds what tests/capi/gpu/run.sh needs and copies it into DIR (default
# .device-bin-capi, git-ignored): libGPI2.so and gaspi-run (stripped), the
# headers, tests/capi/check.h and gpu/, gpu-kernels/cuda/gaspi_device.cuh,
# run.sh. Nothing here needs CUDA: nvcc runs on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/../../.."
DIR=${1:-.device-bin-capi}
cargo build --release -p gaspi-capi
cargo build --release -p gaspi-launch --bin gaspi-run
rm -rf "$DIR"
mkdir -p "$DIR/include" "$DIR/src/gpu"
cp target/release/libGPI2.so target/release/gaspi-run "$DIR"/
strip "$DIR"/libGPI2.so "$DIR"/gaspi-run
cp runtime/capi/include/*.h "$DIR/include/"
cp tests/capi/check.h "$DIR/src/"
cp tests/capi/gpu/*.c tests/capi/gpu/*.cu gpu-kernels/cuda/gaspi_device.cuh "$DIR/src/gpu/"
cp tests/capi/gpu/run.sh "$DIR"/
ls -la "$DIR"
