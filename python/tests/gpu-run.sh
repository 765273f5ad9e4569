#!/usr/bin/env bash
# The Python package's GPU tests, on a machine with CUDA and torch but no
# Rust toolchain and no network. Build the wheels where Rust and PyPI are:
#
#   pip wheel --no-deps -w WHEELS ./python            # gaspi (abi3: any CPython >= 3.9)
#   pip download -d WHEELS numpy pytest              # only if the GPU machine lacks them
#                                                    # (add --python-version X.Y --only-binary=:all:
#                                                    #  when its Python differs)
#
# then on the GPU machine, from the repository root:
#
#   bash python/tests/gpu-run.sh WHEELS
#
# It installs gaspi (and numpy / pytest from WHEELS where missing), then
# runs python/tests/test_gpu.py and test_ranks.py with pytest; without
# pytest it runs the GPU scenario on 1, 2 and 4 ranks by itself. Every
# line ends in PASSED / OK, or names what failed; the exit code says which.
set -euo pipefail
cd "$(dirname "$0")/../.."
wheels=${1:?usage: gpu-run.sh WHEELS_DIR}
py=${PYTHON:-python3}
$py -m pip install --no-index --find-links "$wheels" --no-deps --force-reinstall gaspi
for dep in numpy pytest; do
    $py -c "import $dep" 2>/dev/null \
        || $py -m pip install --no-index --find-links "$wheels" "$dep" \
        || echo "note: $dep is not installed and not in $wheels"
done
$py -c "import torch; print('torch', torch.__version__, 'CUDA devices:', torch.cuda.device_count())"
# Not from python/: its gaspi/ (the sources) would hide the installed package.
cd python/tests
if $py -c "import pytest" 2>/dev/null; then
    exec $py -m pytest -v -rs test_gpu.py test_ranks.py
fi
echo "pytest is missing: running the GPU scenario directly"
$py ranks.py gpu_dlpack | tee /tmp/gaspi-gpu-1.txt
grep -qx "OK gpu_dlpack rank 0" /tmp/gaspi-gpu-1.txt
for n in 2 4; do
    $py -m gaspi.run -n $n --timeout 300 $py ranks.py gpu_dlpack | tee /tmp/gaspi-gpu-$n.txt
    [[ $(grep -c "^OK gpu_dlpack rank" /tmp/gaspi-gpu-$n.txt) == "$n" ]]
done
echo "GPU scenario passed on 1, 2 and 4 ranks"
