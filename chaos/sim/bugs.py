"""Deliberately broken coordinator builds, injected into one simulated runtime instance only.

Nothing is patched at class level: each node's ``CoordinatorRuntime`` instance gets the
broken method, so other runtimes (and other tests in the same process) are untouched.
"""

from __future__ import annotations

from collections.abc import Iterable
from types import MethodType
from typing import Any

from coordinator.image import DurableImage
from coordinator.records import OffsetCommitKey, Record
from coordinator.runtime import CoordinatorRuntime, Effect, Respond

BUGS = ("release-before-commit", "lose-commit-on-load")


def _release_before_commit(self: CoordinatorRuntime, partition: int, ctx: Any, result: Any) -> list[Effect]:
    effects = self._write(partition, ctx, result.records)
    for token, response in result.completions:
        if ctx.outstanding.pop(token, None) is not None:
            effects.append(Respond(token, response))  # no commit gate
    return effects


def _drop_last_offset_commit(records: Iterable[Record]) -> list[Record]:
    """An off-by-one in the loader: the partition's last offset commit is not replayed."""
    out = list(records)
    for i in range(len(out) - 1, -1, -1):
        if isinstance(out[i].key, OffsetCommitKey) and out[i].value is not None:
            del out[i]
            break
    return out


def inject(runtime: CoordinatorRuntime, bug: str | None) -> None:
    if bug is None:
        return
    if bug == "release-before-commit":
        runtime._apply = MethodType(_release_before_commit, runtime)  # type: ignore[method-assign]
    elif bug == "lose-commit-on-load":
        original = runtime.complete_load

        def complete_load(partition: int, epoch: int, records: Iterable[Record], now_ms: int,
                          image: DurableImage | None = None) -> list[Effect]:
            return original(partition, epoch, _drop_last_offset_commit(records), now_ms, image)

        runtime.complete_load = complete_load  # type: ignore[method-assign]
    else:
        raise ValueError(f"unknown bug {bug!r}; known: {', '.join(BUGS)}")
