"""The coordinator's requests are listed once: a type missing from the request table or from the
shard's handlers is an error at import, never a silent default."""

from __future__ import annotations

import pytest

from coordinator import commands as c
from coordinator import shard
from coordinator.errors import ErrorCode


def test_every_request_type_has_a_kind_and_a_handler() -> None:
    types = set(c.REQUESTS)
    assert types == set(shard._HANDLERS)
    for t in types:
        assert hasattr(shard.GroupCoordinatorShard, shard._HANDLERS[t])


def test_a_table_missing_a_request_type_is_refused() -> None:
    partial = {t: kind for t, kind in c.REQUESTS.items() if t is not c.OffsetDeleteRequest}
    with pytest.raises(TypeError, match="OffsetDeleteRequest"):
        c.check_covers(partial, "test table")


def test_reads_are_the_requests_answered_from_state() -> None:
    reads = {t.__name__ for t, kind in c.REQUESTS.items() if kind.reads}
    assert reads == {"JoinGroupRequest", "SyncGroupRequest", "HeartbeatRequest", "OffsetFetchRequest",
                     "DescribeGroupsRequest", "ListGroupsRequest", "ConsumerGroupDescribeRequest",
                     "ShareGroupDescribeRequest", "ShareOffsetsRequest"}
    assert c.error_response(c.ListGroupsRequest(), ErrorCode.NOT_COORDINATOR) == \
        c.ListGroupsResponse(ErrorCode.NOT_COORDINATOR)
