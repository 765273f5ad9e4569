#!/bin/bash
# Session 3, call 7: GPU tests of the committed code (one H200); then write
# bandwidth across two namespaces, host segments vs GPU to GPU, 3 runs
# alternating (both ranks on GPU 0 under MPS).
R=$(pwd); D=$R/.device-bin/new
NV=$(dirname "$(ls /usr/local/cuda/lib64/libnvrtc.so* 2>/dev/null | head -1)")
export LD_LIBRARY_PATH=$NV:${LD_LIBRARY_PATH:-}
(cd $D && timeout 300 ./gaspi-gpu-tests > $OUT/gpu-tests.txt 2>&1; echo "gpu tests rc=$?"; grep -E "^GPU_TESTS|FAIL" $OUT/gpu-tests.txt | cut -c1-220)
o=$OUT/bw; mkdir -p $o
ONLY="write-bw gpu-bw host-gpu-bw" RUNS=3 OUT=$o timeout 400 bash $D/cross-host.sh > $o/table.txt 2>&1
echo "bw rc=$?"; grep -A12 "Bandwidth" $o/table.txt | head -14
cd $OUT && tar czf s3call7.tgz gpu-tests.txt bw && rm -rf bw && ls
