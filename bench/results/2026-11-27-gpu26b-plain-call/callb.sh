#!/bin/bash
# One device call (gpu26b, issue 26): ROUNDS launches each of gaspi-bench
# gpu-pingpong (words in GPU memory) for every entry of VARIANTS, then
# NVSHMEM's ping-pong, alternating; with `tests`, then the GPU tests.
# VARIANTS: space-separated TAG:BINARY[:HEADER] (BINARY relative to
# BIN_DIR, e.g. v7/gaspi-bench for a second staged build); HEADER (a file in BIN_DIR)
# replaces the device header at run time (GASPI_EXP_DEVICE_HEADER, only in
# an experiment build). bash callb.sh BIN_DIR OUT_FILE [tests]
set -uo pipefail
BIN=$(cd "${1:?}" && pwd); OUTF=${2:?}; TESTS=${3:-}
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do
    [ -e "$f" ] && { NV=$(dirname "$f"); break; }
done
[ -z "$NV" ] && NV=$(dirname "$(find /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
log() { echo "$@" >>"$OUTF"; }
log "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';')"
SIZES=${SIZES:-8,64,512,4096,32768,65536}
VARIANTS=${VARIANTS:-OURS:gaspi-bench}
sed 's/for prog in nvshmem_pingpong nvshmem_bw/for prog in nvshmem_pingpong/' "$BIN/peers/nvshmem-run.sh" >/tmp/nvpp.sh
for run in $(seq "${ROUNDS:-3}"); do
    for v in $VARIANTS; do
        IFS=: read -r tag b hdr <<<"$v"
        if [ -n "$hdr" ]; then export GASPI_EXP_DEVICE_HEADER="$BIN/$hdr"; else unset GASPI_EXP_DEVICE_HEADER; fi
        out=$(cd "$BIN" && CUDA_VISIBLE_DEVICES=0,1 GASPI_GPU_NOTIFICATIONS=device timeout 300 ./$b --json gpu-pingpong --device-driven --sizes "$SIZES" 2>&1)
        echo "rc=$? $tag $b ${hdr:-}" >>"$OUTF"
        grep -E '^\{' <<<"$out" | sed "s/^/$tag$run /" >>"$OUTF"
        grep -vE '^\{' <<<"$out" | tail -5 >>"$OUTF"
    done
    unset GASPI_EXP_DEVICE_HEADER
    bash /tmp/nvpp.sh "$BIN/peers" /tmp/gnv --sizes "$SIZES" 2>&1 | sed "s/^/NV$run /" >>"$OUTF"
done
if [ -n "$TESTS" ]; then
    # TEST_DIRS: staged directories (relative to BIN_DIR) whose tests run.
    # PICK="A:DIR_A B:DIR_B": the tests of the one pick.py keeps.
    if [ -n "${PICK:-}" ]; then
        read -r pa pb <<<"$PICK"
        w=$(python3 "$BIN/pick.py" "$OUTF" "${pa%%:*}" "${pb%%:*}")
        log "PICKED $w"
        if [ "$w" = "${pb%%:*}" ]; then TEST_DIRS=${pb#*:}; else TEST_DIRS=${pa#*:}; fi
    fi
    for t in ${TEST_DIRS:-.}; do
        cd "$BIN/$t" || continue
        log "TEST_DIR $t"
        log "GPU_TEST_SET all"; timeout 300 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
        log "GPU_TEST_SET 0"; CUDA_VISIBLE_DEVICES=0 timeout 300 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
        [ -x ./capi-gpu/run.sh ] && { bash ./capi-gpu/run.sh ./capi-gpu >>"$OUTF" 2>&1; log "capi rc=$?"; }
    done
fi
log "# done $(date -u +%FT%TZ)"
