"""The Raft journal keeps only positions, the first entry and a bounded cache of the newest
commands in memory; everything else is read back from its file. Checked against a plain list
under random adds, truncations, compactions and reopens (the operations pysyncobj makes)."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from replication.journal import SafeJournal

CACHE = 2000  # bytes: most entries below live on disk only

ops = st.lists(st.one_of(
    st.tuples(st.just("add"), st.integers(1, 40), st.integers(0, 900)),  # (op, count, size)
    st.tuples(st.just("from"), st.integers(0, 60), st.just(0)),  # deleteEntriesFrom
    st.tuples(st.just("to"), st.integers(0, 60), st.just(0)),  # deleteEntriesTo (compaction)
    st.tuples(st.just("reopen"), st.just(0), st.just(0)),
), min_size=1, max_size=25)


def _check(j: SafeJournal, model: list[tuple[bytes, int, int]]) -> None:
    assert len(j) == len(model)
    assert [j[i] for i in range(len(j))] == model
    assert j[:] == model and j[1:4] == model[1:4]
    if model:
        assert j[-1] == model[-1] and j[0] == model[0]
        mid = len(model) // 2
        assert j.entries(mid, None, 1500) == _pysyncobj_trim(model[mid:], 1500)
    assert j.cached_bytes <= max(CACHE, max((len(c) for c, _i, _t in model[-1:]), default=0))


def _pysyncobj_trim(result: list[tuple[bytes, int, int]], max_bytes: int) -> list[tuple[bytes, int, int]]:
    """pysyncobj's __getEntries rule, as it reads."""
    total, n = 0, 0
    for entry in result:
        total += len(entry[0])
        n += 1
        if total >= max_bytes:
            break
    return result[:n]


@settings(max_examples=60, deadline=None)
@given(ops=ops)
def test_journal_matches_a_list(tmp_path_factory: object, ops: list[tuple[str, int, int]]) -> None:
    path = str(Path(tmp_path_factory.mktemp("j")) / "raft.kcj")  # type: ignore[attr-defined]
    j = SafeJournal(path, cache_bytes=CACHE)
    model: list[tuple[bytes, int, int]] = []
    nxt = 1
    for op, n, size in ops:
        if op == "add":
            for _ in range(n):
                entry = (bytes([nxt % 251]) * size + str(nxt).encode(), nxt, 1 + nxt // 50)
                j.add(*entry)
                model.append(entry)
                nxt += 1
        elif op == "from":
            j.deleteEntriesFrom(n)
            del model[n:]
            nxt = model[-1][1] + 1 if model else nxt
        elif op == "to":
            j.deleteEntriesTo(n)
            del model[:n]
        else:
            j._destroy()
            j = SafeJournal(path, cache_bytes=CACHE)
        _check(j, model)
    j._destroy()


def test_a_large_journal_holds_its_commands_on_disk(tmp_path: Path) -> None:
    j = SafeJournal(str(tmp_path / "raft.kcj"), cache_bytes=1 << 20)
    for i in range(1, 2001):
        j.add(bytes([i % 256]) * 10_000, i, 1)  # 20 MB of commands
    assert j.cached_bytes <= 1 << 20
    assert j[5] == (bytes([6]) * 10_000, 6, 1)  # read back from the file
    j._destroy()
    again = SafeJournal(str(tmp_path / "raft.kcj"), cache_bytes=1 << 20)
    assert again.cached_bytes <= 1 << 20 and len(again) == 2000 and again[-1][1] == 2000
    again._destroy()
