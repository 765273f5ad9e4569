#!/bin/bash
# Session 3, call 6: GPU tests (one H200, no MPS) of the final inline path
# (one payload per slot, 256 slots x 64 KiB); then the cross-host table,
# inline off (0) vs on (default), rotating, both ranks on GPU 0 under MPS.
R=$(pwd); D=$R/.device-bin/new
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$NV:${LD_LIBRARY_PATH:-}
(cd $D && timeout 300 ./gaspi-gpu-tests > $OUT/gpu-tests.txt 2>&1; echo "gpu tests rc=$?"; grep -E "^GPU_TEST" $OUT/gpu-tests.txt | cut -c1-220)
grep -B2 -A8 " FAIL" $OUT/gpu-tests.txt | head -30
for i in 1 2; do
  for v in 0 65536; do
    o=$OUT/t-$v-$i; mkdir -p $o
    GASPI_BENCH_RING_INLINE_MAX=$v ONLY="gpu-pingpong pingpong gpu-bw" RUNS=1 OUT=$o timeout 150 bash $D/cross-host.sh > $o/table.txt 2>&1
    echo "t $v $i rc=$?"; grep -E "ours|GPU to GPU" $o/table.txt | head -8
  done
done
pgrep -a nvidia-cuda-mps || echo "no MPS left"
cd $OUT && tar czf s3call6.tgz gpu-tests.txt t-* && rm -rf t-* && ls
