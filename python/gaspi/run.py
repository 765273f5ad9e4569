"""``gaspi-run`` (also ``python -m gaspi.run``): starts the ranks of a job.

    gaspi-run -n 4 python3 app.py
    python -m gaspi.run -n 4 app.py           # a .py program runs under this Python
    gaspi-run -m hosts.txt -n 8 python3 app.py  # over ssh, on the listed hosts

The same launcher as the Rust crate's ``gaspi-run`` (``gaspi-launch``): each
rank gets its rank, the size, the rendezvous address and a fresh job key;
``--tag-output`` prefixes its lines with ``[rank]``; the job's exit code is
that of the rank that failed first; a failing rank, Ctrl-C or ``--timeout``
stops them all, and nothing is left running.
"""

import argparse
import os
import shutil
import sys
from typing import List, Optional

from . import _gaspi


def _agent(argv: List[str]) -> int:
    """``gaspi-run --agent ...``: the remote half ssh starts on each host."""
    p = argparse.ArgumentParser(prog="gaspi-run --agent")
    p.add_argument("--wdir")
    p.add_argument("--rendezvous-host")
    p.add_argument("command", nargs=argparse.REMAINDER)
    a = p.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        p.error("the program is missing")
    return _gaspi.agent(command[0], command[1:], a.wdir, a.rendezvous_host)


def main(argv: Optional[List[str]] = None) -> int:
    """The command line of ``gaspi-run``; returns the job's exit code."""
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["--agent"]:
        return _agent(argv[1:])
    p = argparse.ArgumentParser(
        prog="gaspi-run",
        description="Start N ranks of PROGRAM on this host, or on the hosts of a hostfile.",
    )
    p.add_argument("-n", "--ranks", type=int, help="number of ranks (with -m: default, every slot)")
    p.add_argument(
        "-m",
        "--hostfile",
        "--machinefile",
        help="start the ranks on these hosts over ssh: one host a line, 'host', "
        "'host slots=K' or 'host:K'",
    )
    p.add_argument(
        "-x",
        "--export",
        action="append",
        default=[],
        metavar="NAME[=VALUE]",
        help="pass this variable to every rank",
    )
    p.add_argument("-t", "--tag-output", action="store_true", help='prefix every output line with "[rank] "')
    p.add_argument("-k", "--keep-going", action="store_true", help="keep the other ranks running when one fails")
    p.add_argument("--timeout", type=int, metavar="S", help="stop the whole job after S seconds")
    p.add_argument("command", nargs=argparse.REMAINDER, help="the program and its arguments")
    a = p.parse_args(argv)
    command = a.command[1:] if a.command[:1] == ["--"] else a.command
    if not command:
        p.error("the program is missing")
    if command[0].endswith(".py") and not os.access(command[0], os.X_OK):
        # A script: run under this interpreter.
        command = [sys.executable] + command
    ranks = a.ranks
    if ranks is None:
        if a.hostfile is None:
            p.error("give the number of ranks (-n N) or a hostfile (-m FILE)")
        ranks = _gaspi.hostfile_slots(a.hostfile)
    if ranks < 1:
        p.error("a job needs at least one rank")
    env = []
    for x in a.export:
        name, eq, value = x.partition("=")
        if not eq:
            if name not in os.environ:
                p.error(f"-x {name}: no such variable here")
            value = os.environ[name]
        env.append((name, value))
    if a.hostfile is not None and not os.environ.get("GASPI_RUN_AGENT"):
        # The remote agent is this launcher at the same path on every host.
        agent = shutil.which("gaspi-run") or os.path.abspath(sys.argv[0])
        os.environ["GASPI_RUN_AGENT"] = agent
    try:
        return _gaspi.launch(
            ranks,
            command[0],
            command[1:],
            tag_output=a.tag_output,
            keep_going=a.keep_going,
            timeout_s=a.timeout,
            env=env,
            hostfile=a.hostfile,
        )
    except RuntimeError as e:
        print(f"gaspi-run: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
