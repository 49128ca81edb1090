"""Directories that belong to one incarnation of a topic partition.

A topic deleted and created again under the same name must start empty. Its directories (the
partition's segments, its Raft journal) carry the name, so a node that was down during the
delete would find the old incarnation's files and replay them into the new topic. Each such
directory holds an ``.incarnation`` file; a directory of another incarnation is removed before
it is opened. A directory without the file (written before this existed) is adopted.
"""

from __future__ import annotations

import logging
import os
import re

from replication.durable import remove_dir, renamed, sync
from replication.failstop import EXIT_CORRUPT, fail_stop

log = logging.getLogger("kcoord.incarnation")
MARKER = ".incarnation"
_INCARNATION = re.compile(r"slot--?\d+")  # what this build writes (``RaftCluster._open_data``)


def claim_dir(path: str, incarnation: str) -> None:
    marker = os.path.join(path, MARKER)
    if os.path.isdir(path):
        try:
            with open(marker, encoding="utf-8") as fh:
                found: str | None = fh.read().strip()
        except FileNotFoundError:
            found = None
        if found is not None and not _INCARNATION.fullmatch(found):
            fail_stop("incarnation", f"{marker}: {found[:40]!r} is not an incarnation this build writes "
                      "(slot-<n>): written by a newer release? refusing to remove the directory", EXIT_CORRUPT)
        if found is not None and found != incarnation:
            log.info("event=stale_incarnation_removed path=%s found=%s wanted=%s", path, found, incarnation)
            remove_dir(path)
        elif found == incarnation:
            return
    os.makedirs(path, exist_ok=True)
    tmp = marker + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(incarnation)
        fh.flush()
        sync(fh.fileno())
    os.replace(tmp, marker)
    renamed(tmp, marker)
