"""GPU segments from Python: DLPack and ``__cuda_array_interface__`` with
torch, host <-> GPU writes between ranks, on a machine with CUDA and torch.

Without torch or a GPU the GPU tests skip with the reason (``pytest -rs``
prints it); the check that a GPU segment is refused runs there instead.
On the GPU machine (torch and CUDA, no Rust, no network):
``bash python/tests/gpu-run.sh WHEELS`` installs the wheel built here and
runs this file (see that script).
"""

import os
import subprocess
import sys

import pytest

from test_ranks import JOB_TIMEOUT, RANKS, HERE, check_ok, job


def _cuda_reason():
    try:
        import torch
    except ImportError as e:
        return f"torch is not installed ({e})"
    if not torch.cuda.is_available():
        return "torch finds no CUDA device"
    return None


REASON = _cuda_reason()
needs_gpu = pytest.mark.skipif(REASON is not None, reason=f"GPU test skipped: {REASON}")


@needs_gpu
def test_gpu_segment_alone_as_a_torch_tensor():
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GASPI_", "OMPI_", "PMI_", "SLURM_"))}
    p = subprocess.run(
        [sys.executable, RANKS, "gpu_dlpack"],
        capture_output=True,
        text=True,
        timeout=JOB_TIMEOUT,
        env=env,
        cwd=HERE,
    )
    assert p.returncode == 0 and "OK gpu_dlpack rank 0" in p.stdout, p.stdout + p.stderr


@needs_gpu
@pytest.mark.parametrize("n", [2, 4])
def test_gpu_segments_between_ranks(n):
    check_ok(job(n, "gpu_dlpack"), n, "gpu_dlpack")


@pytest.mark.skipif(
    REASON is None or os.path.exists("/dev/nvidiactl"),
    reason="a GPU driver is present: the refusal cannot be seen",
)
def test_gpu_segment_refused_without_a_gpu():
    check_ok(job(2, "gpu_absent"), 2, "gpu_absent")
