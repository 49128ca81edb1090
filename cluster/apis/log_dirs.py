"""DescribeLogDirs (35) v1–5: the node's one log directory (its data dir), the size of each data
partition it holds there, and the directory's file system totals.

Kafka's rules (``ReplicaManager.describeLogDirs``): DESCRIBE on the cluster, else
CLUSTER_AUTHORIZATION_FAILED and no directories; topics null means every partition, else only the
named ones the node holds. ``OffsetLag`` is 0, as Kafka's is for every replica that is not a
future one (kcoord moves no replica between directories). kcoord's ``__consumer_offsets`` and ``__transaction_state`` are Raft logs of their own, not
data partitions, and are not listed.
"""

from __future__ import annotations

import os
from typing import Any, Protocol

from kio.schema.errors import ErrorCode

from cluster.apis.common import ZERO, mk, resp_mod, version_of
from cluster.dispatch import RequestContext
from cluster.security.authorizer import CLUSTER_NAME, Operation, ResourceType
from cluster.services import Catalog, Identity, Placement, Registers


class Needs(Registers, Placement, Identity, Catalog, Protocol):
    """What this module uses of its node (``cluster.services``)."""


API_KEY = 35


def _wanted(node: Needs, request: Any) -> dict[str, list[int]]:
    """The partitions asked about that exist: every one when ``topics`` is null."""
    if request.topics is None:
        return {name: list(range(t.partitions)) for name, t in sorted(node.metadata.topics.items())}
    out: dict[str, list[int]] = {}
    for t in request.topics:
        meta = node.topic(t.topic)
        if meta is not None:
            out.setdefault(t.topic, []).extend(p for p in t.partitions if 0 <= p < meta.partitions)
    return out


def build(node: Needs, request: Any, *, error: ErrorCode | None = None,
          ctx: RequestContext | None = None) -> Any:
    v = version_of(request)
    m = resp_mod(API_KEY, v)
    if error is None and ctx is not None and not ctx.allowed(Operation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME):
        error = ErrorCode.cluster_authorization_failed
    if error is not None:
        return mk(m.DescribeLogDirsResponse, throttle_time=ZERO, error_code=error, results=())
    topics = []
    for name, parts in _wanted(node, request).items():
        described = []
        for p in parts:
            part = node.topology.partition(name, p)
            if part is None:
                continue  # not open here (yet)
            described.append(mk(m.DescribeLogDirsPartition, partition_index=p, partition_size=part.data.size_bytes,
                                offset_lag=0, is_future_key=False))
        if described:
            topics.append(mk(m.DescribeLogDirsTopic, name=name, partitions=tuple(described)))
    path = os.path.abspath(node.config.data_dir)
    try:
        st = os.statvfs(path)
        total, usable = st.f_blocks * st.f_frsize, st.f_bavail * st.f_frsize
    except OSError:
        total = usable = -1
    result = mk(m.DescribeLogDirsResult, error_code=ErrorCode.none, log_dir=path, topics=tuple(topics),
                total_bytes=total, usable_bytes=usable, is_cordoned=False)
    return mk(m.DescribeLogDirsResponse, throttle_time=ZERO, error_code=ErrorCode.none, results=(result,))


async def handle(ctx: RequestContext, request: Any) -> Any:
    node: Needs = ctx.node
    return build(node, request, ctx=ctx)


def register(node: Needs) -> None:
    node.registry.register(API_KEY, 1, 5, handle, error_response=lambda req, code: build(node, req, error=code))
