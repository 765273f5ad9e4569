#!/bin/bash
# Session 3, call 3: the inline threshold (4096 vs 65536) and where the
# words live (host-mapped vs device), device-driven ping-pong across two
# namespaces, both ranks on GPU 0 under MPS; rotating, 2 rounds.
R=$(pwd); D=$R/.device-bin/new
for i in 1 2; do
  for v in 4096:host-mapped 65536:host-mapped 4096:device 65536:device; do
    max=${v%%:*}; words=${v##*:}; o=$OUT/x-$max-$words-$i; mkdir -p $o
    GASPI_GPU_NOTIFICATIONS=$words GASPI_BENCH_RING_INLINE_MAX=$max SIZES=8,4096,16384,65536 ONLY="gpu-pingpong" RUNS=1 OUT=$o timeout 150 bash $D/cross-host.sh > $o/table.txt 2>&1
    echo "$v $i rc=$?"; grep -E "ours GPU" $o/table.txt | head -4
  done
done
pgrep -a nvidia-cuda-mps || echo "no MPS left"
cd $OUT && tar czf s3call3.tgz x-* && rm -rf x-* && ls
