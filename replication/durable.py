"""Durable file primitives shared by every log.

- ``append_at``: write at a file's tracked end with no user-space buffer (a buffered write that
  fails keeps its bytes and writes them before the next one). On any error the file is cut back
  to that end and the node stops (``replication.failstop``): nothing is acknowledged that is not
  in the log, and no half frame stays behind it.
- ``replace_durably``: a fsync'd temporary file becomes the real one, and the rename survives a
  power loss.
- ``remove_dir``: a directory tree goes away by rename first, so a crash never leaves half of
  it under its name.
"""

from __future__ import annotations

import os
import shutil

from replication.failstop import fail_stop

_pwrite = os.pwrite  # every durable append goes through this name, so tests can fault it (EIO, ENOSPC)


def append_at(fd: int, data: bytes, end: int, component: str, path: str) -> int:
    """Write ``data`` at ``end`` (where the file's last whole frame ends); returns the new end."""
    view = memoryview(data)
    try:
        written = 0
        while written < len(view):  # a short write (a nearly full disk): finish or raise
            written += _pwrite(fd, view[written:], end + written)
    except OSError as e:
        try:
            os.ftruncate(fd, end)
        except OSError:
            pass  # recovery finds the torn tail
        fail_stop(component, f"{path}: write failed: {type(e).__name__}: {e}")
    return end + len(view)


def fsync_dir(path: str) -> None:
    fd = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: str, path: str) -> None:
    """``tmp`` (written and fsync'd by the caller) becomes ``path``, and the rename survives a
    power loss."""
    os.replace(tmp, path)
    fsync_dir(path)


def remove_dir(path: str) -> None:
    """Remove a directory tree; a rename first, so a crash never leaves half of it in place."""
    if not os.path.isdir(path):
        return
    tomb = path + ".deleted"
    shutil.rmtree(tomb, ignore_errors=True)
    os.replace(path, tomb)
    shutil.rmtree(tomb, ignore_errors=True)
