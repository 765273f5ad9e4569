#!/bin/bash
# Session 3, call 9: the whole cross-host table once with the final code,
# one H200 (both ranks on GPU 0 under MPS; NCCL skipped: one GPU).
R=$(pwd); D=$R/.device-bin/new
o=$OUT/full; mkdir -p $o
RUNS=1 OUT=$o timeout 430 bash $D/cross-host.sh > $o/table.txt 2>&1
echo "rc=$?"; sed -n '/## Half/,$p' $o/table.txt | head -60
cd $OUT && tar czf s3call9.tgz full && rm -rf full && ls
