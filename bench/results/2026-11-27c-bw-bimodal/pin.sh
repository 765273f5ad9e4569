#!/bin/bash
# Runs a rank of gaspi-run pinned to the CPU PIN lists for its rank ("0 16": rank 0 on CPU 0, rank 1 on CPU 16).
read -ra cpus <<<"$PIN"
exec taskset -c "${cpus[$GASPI_RANK]}" "$@"
