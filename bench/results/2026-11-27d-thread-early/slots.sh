#!/bin/bash
# matvec --gpus 0 with --slots variants alternating (feeder threads per GPU).
cd "$(dirname "$0")"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
nproc
for run in 1 2 3; do
  for v in default 8 10; do
    extra=""; [ "$v" != default ] && extra="--slots $v"
    timeout 100 ./matvec --json --gpus 0 $extra --repeat 1 --seconds 1 --batch 7680,15360 2>&1 | grep -E '^\{' | sed "s/^/S$v.$run /"
  done
done
