"""``python -m chaos.reaper RUNNER_PID PIDFILE [NETNS_PREFIX]``: kills the run's processes if the runner dies.

The runner appends the pid of every node and client process it starts to ``PIDFILE``.
Should the runner die without cleaning up (e.g. a C-level abort in a client library), this
process SIGKILLs every pid still listed, so no node or client outlives its run. The
runner terminates the reaper itself when it finishes normally. With a network-namespace
prefix it then removes the run's namespaces too (``cluster/tools/netns.py``).
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time


def main(argv: list[str]) -> int:
    runner, pidfile = int(argv[0]), argv[1]
    prefix = argv[2] if len(argv) > 2 else None
    while True:
        try:
            os.kill(runner, 0)
        except ProcessLookupError:
            break
        if os.getppid() != runner:
            break
        time.sleep(1.0)
    pids: set[int] = set()
    with contextlib.suppress(OSError):
        with open(pidfile, encoding="utf-8") as f:
            pids = {int(x) for x in f.read().split() if x.strip().isdigit()}
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
    if prefix is not None:
        from cluster.tools import netns

        netns.teardown(prefix)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
