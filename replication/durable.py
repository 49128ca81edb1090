"""Durable file primitives shared by every log.

- ``append_at``: write at a file's tracked end with no user-space buffer (a buffered write that
  fails keeps its bytes and writes them before the next one). On any error the file is cut back
  to that end and the node stops (``replication.failstop``): nothing is acknowledged that is not
  in the log, and no half frame stays behind it.
- ``replace_durably``: a fsync'd temporary file becomes the real one, and the rename survives a
  power loss.
- ``remove_dir``: a directory tree goes away by rename first, so a crash never leaves half of
  it under its name.
- ``sync``: every fsync of a file's data goes through it.

Power loss, simulated (tests and the chaos tool only): a SIGKILL keeps the page cache, so a
killed node loses nothing the kernel had; a power loss loses what was not fsync'd. With
``record_syncs`` on, each fsync and each rename is noted in a ledger beside the data directory
(an append-only file the kill does not touch); after the kill, ``drop_unsynced`` cuts every file
back to what its last fsync covered, keeping a random number of whole pages of the rest (pages
reach the disk in the background, some before the loss), sometimes with the file's length
written but not its data (a zero-filled tail).
"""

from __future__ import annotations

import os
import random
import shutil
from pathlib import Path

from replication.failstop import fail_stop

_pwrite = os.pwrite  # every durable append goes through this name, so tests can fault it (EIO, ENOSPC)
PAGE = 4096
POWER_LOSS_ENV = "KCOORD_POWER_LOSS_LEDGER"  # "1": the node keeps a ledger for simulated power loss
_ledger_fd = -1


def ledger_path(data_dir: str | Path) -> Path:
    return Path(str(data_dir).rstrip("/") + ".power-ledger")


def record_syncs(data_dir: str | Path) -> None:
    """Start a ledger for ``data_dir``: what is on disk now counts as synced (the node starts from
    it), and every later fsync and rename is appended."""
    global _ledger_fd
    os.makedirs(data_dir, exist_ok=True)
    path = ledger_path(data_dir)
    _ledger_fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
    lines = [f"S\t{f.stat().st_size}\t{f.resolve()}\n" for f in Path(data_dir).rglob("*") if f.is_file()]
    if lines:
        os.write(_ledger_fd, "".join(lines).encode())


def stop_recording() -> None:
    global _ledger_fd
    if _ledger_fd >= 0:
        os.close(_ledger_fd)
    _ledger_fd = -1


def _note(line: str) -> None:
    if _ledger_fd >= 0:
        os.write(_ledger_fd, line.encode())


def sync(fd: int) -> None:
    """fsync a file's data (the caller handles OSError as its own write failure)."""
    os.fsync(fd)
    if _ledger_fd >= 0:
        _note(f"S\t{os.fstat(fd).st_size}\t{os.path.realpath(f'/proc/self/fd/{fd}')}\n")


def drop_unsynced(data_dir: str | Path, rng: random.Random) -> dict[str, int]:
    """After the node was killed: lose what a power loss would. Returns bytes dropped per file."""
    synced: dict[str, int] = {}
    ledger = ledger_path(data_dir)
    if ledger.exists():
        for line in ledger.read_text(errors="replace").splitlines():
            fields = line.split("\t")
            if len(fields) != 3:
                continue  # a line cut by the kill
            if fields[0] == "S":
                synced[fields[2]] = int(fields[1])
            elif fields[0] == "R":
                synced[fields[2]] = synced.pop(fields[1], 0)
    dropped: dict[str, int] = {}
    for f in sorted(Path(data_dir).rglob("*")):
        if not f.is_file():
            continue
        name = str(f.resolve())
        size, kept = f.stat().st_size, min(f.stat().st_size, synced.get(name, 0))
        if size <= kept:
            continue
        pages = -(-(size - kept) // PAGE)
        keep = min(size, kept + rng.randint(0, pages) * PAGE)
        if keep == size:
            continue
        with open(f, "r+b") as fh:
            fh.truncate(keep)
            if rng.random() < 0.3:  # the new length reached the disk, the data did not
                fh.truncate(rng.randint(keep, size))
        dropped[str(f.relative_to(data_dir))] = size - keep
    return dropped


def append_at(fd: int, data: bytes | memoryview, end: int, component: str, path: str) -> int:
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
    renamed(tmp, path)


def write_durably(path: str, data: bytes, mode: int = 0o644) -> None:
    """``path`` holds ``data`` whole, even after a power loss: written to ``path + ".tmp"`` (created
    with ``mode``), fsync'd, then renamed over ``path`` (``replace_durably``). OSError is the
    caller's to handle as its own write failure."""
    tmp = path + ".tmp"
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb", buffering=0) as f:
        view = memoryview(data)
        while view:
            view = view[f.write(view) or 0:]
        sync(f.fileno())
    replace_durably(tmp, path)


def renamed(tmp: str, path: str) -> None:
    """Note a rename in the power-loss ledger (``path`` now holds what ``tmp`` had synced)."""
    if _ledger_fd >= 0:
        src = os.path.join(os.path.realpath(os.path.dirname(os.path.abspath(tmp))), os.path.basename(tmp))
        _note(f"R\t{src}\t{os.path.realpath(path)}\n")


def remove_dir(path: str) -> None:
    """Remove a directory tree; a rename first, so a crash never leaves half of it in place."""
    if not os.path.isdir(path):
        return
    tomb = path + ".deleted"
    shutil.rmtree(tomb, ignore_errors=True)
    os.replace(path, tomb)
    shutil.rmtree(tomb, ignore_errors=True)
