#!/bin/bash
# Stages the device check of the GPU layer in .device-bin/ (git-ignored):
# gpu_smoke, the unit-test binaries of gaspi-segments, gaspi-notify and
# gaspi-gpu-kernels (their GPU paths run there), and run.sh. Then, with the
# device tool: run `bash .device-bin/run.sh` with carry [".device-bin"].
# The binaries load libcuda and libnvrtc at run time, so they build here
# without CUDA. Results of a run: gpu-kernels/results/.
set -euo pipefail
cd "$(dirname "$0")/../.."
cargo build --release --example gpu_smoke -p gaspi-gpu-kernels
tests=$(cargo test --release --no-run -p gaspi-segments -p gaspi-notify -p gaspi-gpu-kernels \
    --message-format=json 2>/dev/null |
    python3 -c 'import sys, json
for line in sys.stdin:
    m = json.loads(line)
    if m.get("profile", {}).get("test") and m.get("executable") and m["target"]["kind"] == ["lib"]:
        print(m["target"]["name"], m["executable"])')
mkdir -p .device-bin
cp target/release/examples/gpu_smoke .device-bin/gpu_smoke
while read -r name exe; do
    case $name in
        gaspi_segments) cp "$exe" .device-bin/seg_tests ;;
        gaspi_notify) cp "$exe" .device-bin/notify_tests ;;
        gaspi_gpu_kernels) cp "$exe" .device-bin/gk_tests ;;
    esac
done <<<"$tests"
cp gpu-kernels/device/run.sh .device-bin/run.sh
ls -la .device-bin
