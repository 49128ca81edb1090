"""``python -m chaos.reaper RUNNER_PID PIDFILE``: kills the run's processes if the runner dies.

The runner appends the pid of every node and client process it starts to ``PIDFILE``.
Should the runner die without cleaning up (e.g. a C-level abort in a client library), this
process SIGKILLs every pid still listed, so no node or client outlives its run. The
runner terminates the reaper itself when it finishes normally.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time


def main(argv: list[str]) -> int:
    runner, pidfile = int(argv[0]), argv[1]
    while True:
        try:
            os.kill(runner, 0)
        except ProcessLookupError:
            break
        if os.getppid() != runner:
            break
        time.sleep(1.0)
    try:
        with open(pidfile, encoding="utf-8") as f:
            pids = {int(x) for x in f.read().split() if x.strip().isdigit()}
    except OSError:
        return 0
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGCONT)
            os.kill(pid, signal.SIGKILL)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
