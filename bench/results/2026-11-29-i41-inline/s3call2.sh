#!/bin/bash
# Session 3, call 2: GPU tests (one H200, no MPS) with the ring's inline
# path; then an A/B of it (GASPI_BENCH_RING_INLINE_MAX=0 vs 4096) in the
# cross-host ping-pong, both ranks on GPU 0 under MPS, alternating.
R=$(pwd); D=$R/.device-bin/new
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$NV:${LD_LIBRARY_PATH:-}
nvidia-smi -L
(cd $D && timeout 320 ./gaspi-gpu-tests > $OUT/gpu-tests.txt 2>&1; echo "gpu tests rc=$?"; grep -E "^GPU_TEST" $OUT/gpu-tests.txt | cut -c1-160)
grep -B2 -A8 " FAIL" $OUT/gpu-tests.txt | head -30
for i in 1 2; do
  for v in 0 4096; do
    mkdir -p $OUT/ab-$v-$i
    GASPI_BENCH_RING_INLINE_MAX=$v ONLY="gpu-pingpong pingpong" RUNS=1 OUT=$OUT/ab-$v-$i timeout 200 bash $D/cross-host.sh > $OUT/ab-$v-$i/table.txt 2>&1
    echo "ab $v $i rc=$?"; grep -E "ours|one GPU" $OUT/ab-$v-$i/table.txt | head -8
  done
done
pgrep -a nvidia-cuda-mps || echo "no MPS left"
cd $OUT && tar czf s3call2.tgz gpu-tests.txt ab-* && rm -rf ab-* && ls
