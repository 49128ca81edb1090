"""What an assignor is given and returns (Kafka's GroupSpec and SubscribedTopicDescriber, reduced
to what the built-in assignors read)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

# topic -> partition count; a subscribed topic missing here does not exist (an error, as in Kafka)
TopicSizes = Mapping[str, int]
# member id -> topic -> partitions
Assignment = dict[str, dict[str, frozenset[int]]]


class AssignorError(Exception):
    """Kafka's PartitionAssignorException: the heartbeat fails with UNKNOWN_SERVER_ERROR."""


@dataclass(frozen=True, slots=True)
class MemberSpec:
    member_id: str
    topics: frozenset[str]  # the subscribed topics
    instance_id: str | None = None
    previous: Mapping[str, frozenset[int]] = field(default_factory=dict)  # the member's previous target


def sizes_of(members: Mapping[str, MemberSpec], sizes: TopicSizes) -> dict[str, int]:
    """The partition count of every subscribed topic; an unknown one is an error."""
    out: dict[str, int] = {}
    for m in members.values():
        for t in m.topics:
            n = sizes.get(t, -1)
            if n < 0:
                raise AssignorError(f"topic {t!r} is subscribed but unknown")
            out[t] = n
    return out


def utf16_key(s: str) -> bytes:
    """Java's String.compareTo order (UTF-16 code units), which Kafka's assignors sort ids by."""
    return s.encode("utf-16-be")
