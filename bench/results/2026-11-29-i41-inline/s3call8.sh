#!/bin/bash
# Session 3, call 8: write bandwidth, host segments and GPU to GPU, across
# two namespaces (one H200, MPS): builds A (main), B (outbox 4 MiB), C
# (staging chunks 128 KiB, depth 16, pool 64), rotating, 3 rounds.
R=$(pwd); D=$R/.device-bin/new; V=$R/.device-bin/var
for i in 1 2 3; do
  case $i in 1) order="A B C";; 2) order="B C A";; 3) order="C A B";; esac
  for v in $order; do
    o=$OUT/v-$v-$i; mkdir -p $o
    GASPI_BENCH=$V/gaspi-bench-$v ONLY="write-bw gpu-bw" RUNS=1 OUT=$o timeout 120 bash $D/cross-host.sh > $o/table.txt 2>&1
    echo "$v $i: $(grep -E 'ours GPU to GPU|ours host segments \| 1048576' $o/table.txt | tr '\n' ' ')"
  done
done
cd $OUT && tar czf s3call8.tgz v-* && rm -rf v-* && ls
