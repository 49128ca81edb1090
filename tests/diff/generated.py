"""Generated differential scenarios: every API kcoord serves, at every version it serves (its
lowest and highest among them), with a minimal request built from the API's schema (kio's
dataclasses).

A minimal request names things that do not exist (a group, a topic, a transactional id named
after the scenario, partition 0, offset 0) and leaves every field with a schema default at it:
what each server answers to it is mostly its error paths (unknown topic, group not found, no
such transaction, an empty list). Requests that would not be answered as asked (Produce with
acks=0) or would change the cluster for the scenarios after them are adjusted in ``FIELDS``.
Group-keyed requests go to the group's coordinator and transactional ones to the transaction
coordinator, so which node happens to be asked does not differ between the two servers.
"""

from __future__ import annotations

import dataclasses
import datetime
import types
import typing
import uuid
from typing import Any

from cluster.apis.common import req_mod
from tests.diff.harness import SCENARIOS, Session

# The versions kcoord serves (its ApiVersions; ``test_the_generated_table_is_what_kcoord_serves``
# checks it against a live node): api key -> (lowest, highest). Left out: ApiVersions (18) and the
# SASL handshake (17), which scenarios of their own cover, and SaslAuthenticate (36), which needs
# a handshake first.
SERVED: dict[int, tuple[int, int]] = {
    0: (3, 12), 1: (4, 12), 2: (1, 11), 3: (0, 13), 8: (2, 10), 9: (1, 10), 10: (0, 6), 11: (0, 9), 12: (0, 4),
    13: (0, 5), 14: (0, 5), 15: (0, 6), 16: (0, 5), 19: (2, 7), 20: (1, 6), 21: (0, 2), 22: (0, 5), 23: (2, 4),
    24: (0, 5), 25: (0, 4), 26: (0, 5), 27: (1, 2), 28: (0, 5), 29: (1, 3), 30: (1, 3), 31: (1, 3), 32: (1, 4),
    33: (0, 2), 35: (1, 5), 37: (0, 3), 42: (0, 2), 43: (0, 2), 44: (0, 1), 47: (0, 0), 50: (0, 0),
    51: (0, 0), 55: (0, 2), 60: (0, 2), 61: (0, 0), 65: (0, 0), 66: (0, 1), 68: (0, 1), 69: (0, 1), 75: (0, 0),
    76: (1, 1), 77: (1, 1), 78: (1, 2), 79: (1, 2), 80: (0, 1), 81: (0, 0), 84: (0, 0), 85: (1, 1),
    90: (0, 1),
}
GROUP_KEYED = frozenset({8, 9, 11, 12, 13, 14, 15, 28, 42, 47, 68, 69, 76, 77, 90})
TXN_KEYED = frozenset({24, 25, 26, 65})
LIST_GROUPS = 16
LIST_TRANSACTIONS = 66
MS = datetime.timedelta(milliseconds=1)
# (api key, field) -> value, where the minimal value would not do
FIELDS: dict[tuple[int, str], Any] = {
    (0, "acks"): -1,  # acks=0 is never answered
    (0, "records"): b"",  # Kafka never answers a Produce of null records to a partition it leads
    (0, "timeout"): 1000 * MS,  # Kafka holds a Produce of no records until its timeout
    (1, "max_wait"): 0 * MS,  # answer at once
    (1, "replica_id"): -1,
    (1, "max_bytes"): 1 << 20,
    (1, "partition_max_bytes"): 1 << 20,
    (2, "replica_id"): -1,
    (2, "timestamp"): -1,
    (19, "num_partitions"): 1,
    (19, "replication_factor"): 3,
    (19, "validate_only"): True,  # a topic created by one scenario would show in others' answers
    (22, "transaction_timeout"): 60000 * MS,
    (22, "transactional_id"): None,
    (33, "validate_only"): True,
    (44, "validate_only"): True,
    (51, "iterations"): 8192,
    # ACLs: filters matching anything, a creation of a valid ACL (no authorizer on either side)
    (29, "resource_type_filter"): 1, (29, "pattern_type_filter"): 1, (29, "operation"): 1, (29, "permission_type"): 1,
    (31, "resource_type_filter"): 1, (31, "pattern_type_filter"): 1, (31, "operation"): 1, (31, "permission_type"): 1,
    (30, "resource_type"): 2, (30, "resource_pattern_type"): 3, (30, "principal"): "User:alice", (30, "host"): "*",
    (30, "operation"): 3, (30, "permission_type"): 3,
    (68, "rebalance_timeout"): 30000 * MS,
    (68, "member_epoch"): 0,
    (80, "voter_id"): 99,  # AddRaftVoter of a node neither has
    (80, "timeout"): 1000 * MS,
    (81, "voter_id"): 99,  # RemoveRaftVoter of a node neither has (node 0 would leave the cluster)
}


def _value(api_key: int, name: str, field: str, hint: Any, nullable_none: bool = True) -> Any:
    if (api_key, field) in FIELDS:
        return FIELDS[(api_key, field)]
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = next(a for a in args if a is not type(None))
        if typing.get_origin(inner) is tuple or (nullable_none is False):
            return _value(api_key, name, field, inner)
        return None
    if origin is tuple:
        elem = args[0]
        if dataclasses.is_dataclass(elem):
            return (minimal(api_key, elem, name),)
        if elem is str or (isinstance(elem, type) and issubclass(elem, str)):
            return (f"{name}-x",)
        return ()
    if dataclasses.is_dataclass(hint):
        return minimal(api_key, hint, name)
    if isinstance(hint, type) and issubclass(hint, datetime.timedelta):
        return 30000 * MS
    if hint is uuid.UUID:
        return uuid.UUID(int=0)
    if hint is bool:
        return False
    if hint is bytes:
        return b""
    if isinstance(hint, type) and issubclass(hint, str):
        return f"{name}-x"
    if isinstance(hint, type) and issubclass(hint, float):
        return 0.0
    if isinstance(hint, type) and issubclass(hint, int):
        return hint(0)
    raise TypeError(f"no minimal value for {field}: {hint!r}")


def minimal(api_key: int, cls: Any, name: str) -> Any:
    """An instance of kio entity ``cls`` with every field at its default or its minimal value."""
    hints = typing.get_type_hints(cls)
    kwargs: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if (api_key, f.name) in FIELDS:
            kwargs[f.name] = FIELDS[(api_key, f.name)]
        elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
            kwargs[f.name] = _value(api_key, name, f.name, hints[f.name])
    return cls(**kwargs)


def _request_class(api_key: int, version: int) -> Any:
    m = req_mod(api_key, version)
    return next(getattr(m, n) for n in dir(m) if n.endswith("Request") and not n.startswith("_")
                and getattr(getattr(m, n), "__api_key__", None) == api_key)


PARTITION_KEYED = frozenset({0, 1, 2, 21, 23})  # answered by the partition's leader


def _ask_minimal(s: Session, label: str, api_key: int, version: int, leader: str | None = None) -> None:
    """Send the API's minimal request where it is answered (a group's or transaction's
    coordinator, the partition's ``leader`` when known) and record the answer under ``label``."""
    name = f"{s.name}-x"
    body = minimal(api_key, _request_class(api_key, version), s.name)
    if api_key == LIST_GROUPS:  # a node lists the groups it coordinates: only this scenario's count
        s.ask(label, api_key, version, body, to=s.coordinator(name), only=lambda r: dataclasses.replace(
            r, groups=tuple(g for g in r.groups if g.group_id.startswith(s.name))))
        return
    if api_key == LIST_TRANSACTIONS:  # and the transactions it coordinates
        s.ask(label, api_key, version, body, to=s.coordinator(name, key_type=1),
              only=lambda r: dataclasses.replace(r, transaction_states=tuple(
                  t for t in r.transaction_states if t.transactional_id.startswith(s.name))))
        return
    to = None
    if api_key in GROUP_KEYED:
        to = s.coordinator(name)
    elif api_key in TXN_KEYED:
        to = s.coordinator(name, key_type=1)
    elif api_key in PARTITION_KEYED:
        to = leader
    s.ask_settled(label, api_key, version, body, to=to, tries=10)


def _scenario(api_key: int, version: int) -> Any:
    def run(s: Session) -> None:
        _ask_minimal(s, "minimal", api_key, version)

    run.__name__ = f"minimal_{api_key}_v{version}"
    return run


def _existing_scenario(api_key: int, version: int) -> Any:
    """The minimal request once its names exist: a topic of one partition, a group with an offset
    committed on it, a transactional id with a producer id."""
    from tests.diff.scenarios import _create_topic, _leader

    def run(s: Session) -> None:
        name = f"{s.name}-x"
        _create_topic(s, name, 1)
        oc = req_mod(8, 8)  # settled: a Kafka broker learns of a new topic a moment after it is created
        s.ask_settled("setup.commit", 8, 8, oc.OffsetCommitRequest(
            group_id=name, generation_id_or_member_epoch=-1, member_id="", group_instance_id=None,
            topics=(oc.OffsetCommitRequestTopic(name=name, partitions=(oc.OffsetCommitRequestPartition(
                partition_index=0, committed_offset=1, committed_leader_epoch=-1, committed_metadata=""),)),)),
            to=s.coordinator(name), done=lambda r: int(r.topics[0].partitions[0].error_code) == 0)
        init = req_mod(22, 4)
        s.ask_settled("setup.init", 22, 4, init.InitProducerIdRequest(
            transactional_id=name, transaction_timeout=60000 * MS, producer_id=-1, producer_epoch=-1),
            to=s.coordinator(name, key_type=1))
        _ask_minimal(s, "existing", api_key, version, leader=_leader(s, name))

    run.__name__ = f"existing_{api_key}_v{version}"
    return run


for _key, (_lo, _hi) in SERVED.items():
    for _version in sorted({_lo, _hi}):
        _fn = _existing_scenario(_key, _version)
        SCENARIOS[_fn.__name__] = _fn
for _key, (_lo, _hi) in SERVED.items():
    for _version in range(_lo, _hi + 1):  # every served version: the lowest and highest, and between
        _fn = _scenario(_key, _version)
        SCENARIOS[_fn.__name__] = _fn
