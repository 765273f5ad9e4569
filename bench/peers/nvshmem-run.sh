#!/bin/bash
# Builds the NVSHMEM reference programs (nvshmem_pingpong.cu, nvshmem_bw.cu)
# with nvcc against the NVSHMEM of this machine's Python environment (the
# nvidia-nvshmem-cu13 wheel) and runs each as 2 PEs on GPUs 0 and 1.
#   bash nvshmem-run.sh SRC_DIR BUILD_DIR [--quick]
# Prints the programs' JSON lines; a failed build or run prints
# {"bench":"nvshmem","note":"..."} and exits non-zero, nothing else stops.
set -uo pipefail
SRC=${1:?usage: nvshmem-run.sh SRC_DIR BUILD_DIR [--quick]}
BUILD=${2:?usage: nvshmem-run.sh SRC_DIR BUILD_DIR [--quick]}
shift 2
mkdir -p "$BUILD"
note() { echo "{\"bench\":\"nvshmem\",\"note\":\"$*\"}"; }
# nvidia.nvshmem is a namespace package (no __file__): take its path.
NV=${NVSHMEM_HOME:-$(python3 -c 'import nvidia.nvshmem as m; print(list(m.__path__)[0])' 2>/dev/null)}
if [ -z "$NV" ] || [ ! -e "$NV/include/nvshmem.h" ]; then
    NV=$(dirname "$(find / -path '*nvidia/nvshmem/include/nvshmem.h' 2>/dev/null | head -1)" 2>/dev/null)
    NV=${NV%/include}
fi
if [ -z "$NV" ] || [ ! -e "$NV/include/nvshmem.h" ]; then
    note "skipped: no NVSHMEM found (nvidia-nvshmem-cu13)"; exit 1
fi
NVCC=$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)
# The wheel ships libnvshmem_host.so.3 without the unversioned link:
# handed to the linker as a file.
HOSTLIB=$(ls "$NV"/lib/libnvshmem_host.so* 2>/dev/null | head -1)
# NVLink multicast stays off (KINDS.md); no network transport on one host.
export NVSHMEM_DISABLE_NVLS=1 NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1
export NVSHMEM_REMOTE_TRANSPORT=${NVSHMEM_REMOTE_TRANSPORT:-none}
export NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME=${NVSHMEM_BOOTSTRAP_UID_SOCK_IFNAME:-lo}
export LD_LIBRARY_PATH="$NV/lib:${LD_LIBRARY_PATH:-}"
rc=0
for prog in nvshmem_pingpong nvshmem_bw; do
    # Built once per BUILD_DIR (a later call with the same folder runs it again).
    if [ ! -x "$BUILD/$prog" ] && ! "$NVCC" -O2 -rdc=true -std=c++17 -gencode=arch=compute_90,code=sm_90 -I"$NV/include" \
        "$SRC/$prog.cu" -o "$BUILD/$prog" -L"$NV/lib" -lnvshmem_device -Xlinker "$HOSTLIB" -lcuda \
        -Xlinker -rpath -Xlinker "$NV/lib" >"$BUILD/$prog.build.log" 2>&1; then
        note "$prog: build failed: $(tail -3 "$BUILD/$prog.build.log" | tr '"\n' "' ")"
        rc=1; continue
    fi
    uid="$BUILD/$prog.uid"
    rm -f "$uid" "$uid.tmp"
    timeout "${NVSHMEM_TIMEOUT:-150}" "$BUILD/$prog" 1 "$uid" "$@" >"$BUILD/$prog.pe1.log" 2>&1 &
    pe1=$!
    timeout "${NVSHMEM_TIMEOUT:-150}" "$BUILD/$prog" 0 "$uid" "$@" 2>"$BUILD/$prog.pe0.err"
    rc0=$?
    wait $pe1
    rc1=$?
    if [ $rc0 -ne 0 ] || [ $rc1 -ne 0 ]; then
        note "$prog: PE 0 rc $rc0, PE 1 rc $rc1: $(tail -2 "$BUILD/$prog.pe0.err" | tr '"\n' "' ") / $(tail -2 "$BUILD/$prog.pe1.log" | tr '"\n' "' ")"
        rc=1
    fi
done
exit $rc
