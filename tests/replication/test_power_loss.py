"""Simulated power loss (replication/durable.py): what was fsync'd survives, what was only written
may not, torn at page granularity. And the fault finds the commit-hint bug: after a power loss
a journal can end before the commit index stored beside it."""

from __future__ import annotations

import os
import random
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest

from replication import durable
from replication.durable import PAGE, append_at, drop_unsynced, record_syncs, replace_durably, sync
from tests.replication.test_follower_truncation import Follower


@pytest.fixture
def ledger(tmp_path: Path) -> Iterator[Path]:
    data = tmp_path / "node-0"
    record_syncs(data)
    yield data
    durable.stop_recording()


def test_synced_bytes_survive_and_the_rest_is_cut_at_a_page(ledger: Path) -> None:
    path = ledger / "log"
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    synced = os.urandom(10 * PAGE + 100)
    end = append_at(fd, synced, 0, "test", str(path))
    sync(fd)
    whole = synced + os.urandom(20 * PAGE)
    append_at(fd, whole[end:], end, "test", str(path))
    os.close(fd)
    kept_lengths = set()
    for seed in range(20):
        path.write_bytes(whole)  # as the killed node left it (the ledger still says what was synced)
        dropped = drop_unsynced(ledger, random.Random(seed))
        data = path.read_bytes()
        assert len(data) <= len(whole) and data[:len(synced)] == synced  # the fsync'd part is all there
        # the rest: whole pages of what was written, then possibly zeros (length without data)
        kept = [k for k in range(len(synced), len(whole) + 1, PAGE)] + [len(whole)]
        k = max(k for k in kept if k <= len(data) and data[:k] == whole[:k] and not data[k:].strip(b"\0"))
        kept_lengths.add(k)
        assert dropped.get("log", 0) == len(whole) - k
    assert len(kept_lengths) > 3  # the loss varies with the seed


def test_a_durable_replace_survives_and_an_unsynced_new_file_may_not(ledger: Path) -> None:
    tmp, final = ledger / "meta.tmp", ledger / "meta"
    with open(tmp, "wb") as f:
        f.write(b"m" * 3000)
        f.flush()
        sync(f.fileno())
    replace_durably(str(tmp), str(final))
    (ledger / "hint").write_bytes(b"h" * 5000)  # written, never fsync'd
    lost = 0
    for seed in range(12):
        (ledger / "hint").write_bytes(b"h" * 5000)
        drop_unsynced(ledger, random.Random(seed))
        assert final.read_bytes() == b"m" * 3000
        lost += (ledger / "hint").read_bytes() != b"h" * 5000
    assert lost > 0


def test_a_power_loss_can_leave_a_journal_shorter_than_its_commit_hint(tmp_path: Path) -> None:
    """Without fsync (durability = "replicated") the journal's tail and the commit-index file
    reach the disk independently; some seeds keep the hint and cut the journal. A replica then
    starts with its commit index at most at its journal's end (it used to trust the hint)."""
    found = None
    for seed in range(40):
        data = tmp_path / f"run-{seed}"
        record_syncs(data)
        try:
            f = Follower(data)
            f.ae(1, (1, 0), [(i, 1) for i in range(2, 400)], commit=399)
            f.close()  # stores the hint: 399
        finally:
            durable.stop_recording()
        drop_unsynced(data, random.Random(seed))
        raw = (data / "raft.kcj.commit").read_bytes() if (data / "raft.kcj.commit").exists() else b""
        hint = struct.unpack("<IQ", raw)[1] if len(raw) == 12 else 0
        g = Follower(data)
        try:
            end = g.log[-1][0]
            if hint > end:
                found = (seed, hint, end)
                assert g.commit <= end, f"seed {seed}: commit {g.commit} past the journal's end {end}"
                break
        finally:
            g.close()
    assert found is not None, "no seed left a commit hint past the journal's end"
