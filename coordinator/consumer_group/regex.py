"""SubscribedTopicRegex (ConsumerGroupHeartbeat v1): a member subscribes to every topic whose whole
name matches, with RE2's syntax as Kafka's RE2/J has it (no lookaround, no backreferences).

Kafka resolves a group's regexes in the background and stores the result (record 16); here a
regex is matched against the cluster's topics on each heartbeat, so the result is a function of
the topics the heartbeat sees: a new matching topic reaches the group on the next heartbeat
through the subscription hash, as it does in Kafka. Internal topics are not in that image, so no
regex reaches them.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache
from typing import Any

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad pattern is answered, not logged by the library


class InvalidRegex(ValueError):
    pass


@lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """The compiled pattern; raises InvalidRegex with RE2's reason."""
    try:
        return re2.compile(pattern, options=_OPTIONS)
    except re2.error as e:
        reason = e.args[0].decode() if e.args and isinstance(e.args[0], bytes) else str(e)
        raise InvalidRegex(reason) from None


def matching(pattern: str, names: Iterable[str]) -> frozenset[str]:
    """The names the whole of which the pattern matches (none for an invalid pattern)."""
    try:
        p = compiled(pattern)
    except InvalidRegex:
        return frozenset()
    return frozenset(n for n in names if p.fullmatch(n) is not None)
