#!/bin/bash
# The GPU tests with a mutant device header (the one-thread call's fourth
# early vector never stored): test_gpu_pingpong must fail.
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
echo "MUTANT"; GASPI_EXP_DEVICE_HEADER=$PWD/mut.cuh timeout 200 ./gaspi-gpu-tests-exp 2>&1 | grep -E "GPU_TEST (kernel-gpu-gpu|ordering)|GPU_TESTS"
echo "T4 via exp"; GASPI_EXP_DEVICE_HEADER=$PWD/t4.cuh timeout 200 ./gaspi-gpu-tests-exp 2>&1 | grep -E "GPU_TEST kernel-gpu-gpu|GPU_TESTS"
