#!/bin/bash
# One device call (gpubw, issue 26): the copy-engine probe, then ROUNDS
# rounds alternating gaspi-bench gpu-bw for every entry of VARIANTS
# (TAG:BINARY:ENV, ENV a comma-separated list of VAR=VALUE or '-'), then
# NVSHMEM's bandwidth program; then host-driven gpu-pingpong for the
# entries of PP_VARIANTS; with `tests`, the GPU tests of TEST_BIN's folder.
# bash callbw.sh OUT_FILE [tests]
set -uo pipefail
BIN=$(cd "$(dirname "$0")" && pwd); OUTF=${1:?}; TESTS=${2:-}
NV=""
for f in /usr/local/cuda/lib64/libnvrtc.so.13 /usr/local/cuda/lib64/libnvrtc.so; do [ -e "$f" ] && { NV=$(dirname "$f"); break; }; done
[ -z "$NV" ] && NV=$(dirname "$(find /usr /opt -name 'libnvrtc.so*' 2>/dev/null | grep -v builtins | head -1)" 2>/dev/null)
export LD_LIBRARY_PATH="${NV:-}:${LD_LIBRARY_PATH:-}"
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
log() { echo "$@" >>"$OUTF"; }
log "# $(date -u +%FT%TZ) $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | paste -sd';')"
if [ -n "${PROBE:-}" ]; then
    for r in $(seq "$PROBE"); do (cd "$BIN" && CUDA_VISIBLE_DEVICES=0,1 timeout 120 ./ce_probe $PROBE_ARGS 2>&1 | sed "s/^/P$r /") >>"$OUTF"; done
fi
SIZES=${SIZES:-65536,262144,1048576,4194304,16777216,67108864}
PP_SIZES=${PP_SIZES:-65536,1048576,4194304}
sed 's/for prog in nvshmem_pingpong nvshmem_bw/for prog in nvshmem_bw/' "$BIN/peers/nvshmem-run.sh" >/tmp/nvbw.sh
runv() { # TAG BINARY ENV CMD...
    local tag=$1 b=$2 envs=$3; shift 3
    local e=(); [ "$envs" != "-" ] && IFS=, read -ra e <<<"$envs"
    out=$(cd "$BIN" && env "${e[@]}" CUDA_VISIBLE_DEVICES=0,1 timeout 200 ./$b --json "$@" 2>&1)
    echo "rc=$? $tag $b $envs $1" >>"$OUTF"
    grep -E '^\{' <<<"$out" | sed "s/^/$tag /" >>"$OUTF"
    grep -vE '^\{' <<<"$out" | tail -5 >>"$OUTF"
}
for run in $(seq "${ROUNDS:-3}"); do
    for v in ${VARIANTS:-CE0:gaspi-bench:-}; do
        IFS=: read -r tag b envs <<<"$v"
        runv "$tag$run" "$b" "$envs" gpu-bw --sizes "$SIZES"
    done
    [ -z "${NO_NV:-}" ] && bash /tmp/nvbw.sh "$BIN/peers" /tmp/gnv --sizes "${NV_SIZES:-65536,1048576,4194304,16777216,67108864}" 2>&1 | sed "s/^/NV$run /" >>"$OUTF"
    for v in ${PP_VARIANTS:-}; do
        IFS=: read -r tag b envs <<<"$v"
        runv "PP$tag$run" "$b" "$envs" gpu-pingpong --sizes "$PP_SIZES"
    done
done
if [ -n "$TESTS" ]; then
    for t in ${TEST_DIRS:-.}; do
        cd "$BIN/$t" || continue
        log "TEST_DIR $t ${TEST_ENV:-}"
        log "GPU_TEST_SET all"; env ${TEST_ENV:-} timeout 300 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
        log "GPU_TEST_SET 0"; env ${TEST_ENV:-} CUDA_VISIBLE_DEVICES=0 timeout 300 ./gaspi-gpu-tests >>"$OUTF" 2>&1; log "rc=$?"
        [ -x ./capi-gpu/run.sh ] && { bash ./capi-gpu/run.sh ./capi-gpu >>"$OUTF" 2>&1; log "capi rc=$?"; }
    done
fi
# EXTRA: space-separated TAG:ENV:CASE (ENV as in VARIANTS): one test case,
# both GPUs, its output and exit status logged.
for x in ${EXTRA:-}; do
    IFS=: read -r tag envs case <<<"$x"
    e=(); [ "$envs" != "-" ] && IFS=, read -ra e <<<"$envs"
    log "EXTRA $tag $envs $case"
    (cd "$BIN" && env "${e[@]}" CUDA_VISIBLE_DEVICES=${EXTRA_GPUS:-0,1} timeout 120 ./gaspi-gpu-tests --case "$case") >>"$OUTF" 2>&1
    log "EXTRA $tag rc=$?"
done
log "# done $(date -u +%FT%TZ)"
