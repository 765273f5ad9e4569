"""Every call of the package on 2 and 4 ranks under ``gaspi-run``.

Each test starts ``python -m gaspi.run -n N python3 ranks.py NAME`` (the
launcher the package ships) and checks that every rank printed its
``OK`` line and that the job exited 0; the data checks are in ``ranks.py``.
The module's last test checks that the jobs left nothing behind.
"""

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
RANKS = str(HERE / "ranks.py")
#: Most seconds a job may take (the launcher stops it after that).
JOB_TIMEOUT = 180


def shm_files():
    try:
        return set(os.listdir("/dev/shm"))
    except FileNotFoundError:
        return set()


def our_processes():
    """Processes running ranks.py (the jobs of this module)."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if RANKS.encode() in cmd and int(pid) != os.getpid():
            found.append(int(pid))
    return found


SHM_BEFORE = shm_files()


def job(n, scenario, *launcher_args, env=None):
    cmd = [sys.executable, "-m", "gaspi.run", "-n", str(n), "--timeout", str(JOB_TIMEOUT)]
    cmd += list(launcher_args) + [sys.executable, RANKS, scenario]
    p = subprocess.run(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        timeout=JOB_TIMEOUT + 30,
        env={**os.environ, **(env or {})},
        # Not python/: its gaspi/ (the sources) would hide the installed package.
        cwd=HERE,
    )
    return p


def check_ok(p, n, scenario, ranks=None):
    ranks = range(n) if ranks is None else ranks
    msg = f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert p.returncode == 0, msg
    for r in ranks:
        assert f"OK {scenario} rank {r}" in p.stdout.splitlines(), msg


SCENARIOS = ["ring", "write_read", "lists", "atomics", "passive", "groups", "allreduce", "alias", "segments", "errors", "gil"]


@pytest.mark.parametrize("n", [2, 4])
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_scenario(scenario, n):
    check_ok(job(n, scenario), n, scenario)


@pytest.mark.parametrize("n", [2, 4])
def test_ring_over_tcp(n):
    """The same calls over the TCP transport (GASPI_TRANSPORT=tcp)."""
    for scenario in ("ring", "write_read", "atomics"):
        check_ok(job(n, scenario, env={"GASPI_TRANSPORT": "tcp"}), n, scenario)


@pytest.mark.parametrize("n", [2, 4])
def test_killed_peer_is_named(n):
    """Rank 1 exits without a goodbye; rank 0's calls raise PeerDeadError
    naming rank 1. The launcher (--keep-going) returns rank 1's code."""
    p = job(n, "peer_dead", "--keep-going", env={"GASPI_PEER_TIMEOUT_MS": "5000"})
    msg = f"exit {p.returncode}\nstdout:\n{p.stdout}\nstderr:\n{p.stderr}"
    assert "dead peer named: rank 1" in p.stdout, msg
    assert "OK peer_dead rank 0" in p.stdout, msg
    assert p.returncode == 9, msg


def test_alone_is_a_job_of_one():
    """Without a launcher a script is a job of one rank."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GASPI_", "OMPI_", "PMI_", "SLURM_"))}
    p = subprocess.run([sys.executable, RANKS, "ring"], capture_output=True, text=True, timeout=120, env=env, cwd=HERE)
    assert p.returncode == 0 and "OK ring rank 0" in p.stdout, p.stdout + p.stderr


def test_ctrl_c_interrupts_a_blocking_wait():
    """SIGINT raises KeyboardInterrupt in a blocking notify_waitsome."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GASPI_", "OMPI_", "PMI_", "SLURM_"))}
    p = subprocess.Popen(
        [sys.executable, RANKS, "interrupt"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        cwd=HERE,
    )
    try:
        assert p.stdout.readline().strip() == "waiting"
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        # What it printed says how far it got.
        p.kill()
        out, err = p.communicate()
        pytest.fail(f"no exit within 30 s of SIGINT\nstdout:\n{out}\nstderr:\n{err}")
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, out + err
    assert "interrupted" in out.splitlines() and "interrupted again" in out.splitlines(), out + err
    assert "OK interrupt rank 0" in out, out + err


def test_launcher_reports_a_failing_rank():
    """A rank that fails makes the job fail with its code."""
    p = subprocess.run(
        [sys.executable, "-m", "gaspi.run", "-n", "2", sys.executable, "-c", "import sys; sys.exit(3)"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=HERE,
    )
    assert p.returncode == 3, p.stdout + p.stderr


def test_zz_nothing_leaks():
    """After the jobs: no shared-memory file of ours and no rank left."""
    deadline = time.monotonic() + 10
    while our_processes() and time.monotonic() < deadline:
        time.sleep(0.1)
    assert our_processes() == [], "ranks left running"
    assert shm_files() - SHM_BEFORE == set(), "shared-memory files left behind"
