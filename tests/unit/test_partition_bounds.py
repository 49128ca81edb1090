"""Bounds on what topics may be created, held where the creation is applied: max_partitions on
the committed metadata (concurrent requests each pass the request-time check), and a topic's
max.message.bytes within the node's message.max.bytes."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from cluster.broker_info import BrokerInfo
from cluster.config import load_config
from cluster.data_plane import PartitionStore
from cluster.metadata import ClusterMetadata, PartitionLimitError, validate_topic_config
from cluster.metadata_log import compact_metadata, fold_metadata
from cluster.metadata_log import metadata_op as _op
from cluster.single_node_topology import SingleNodeTopology


def _create(name: str, partitions: int, max_partitions: int | None = 10) -> bytes:
    extra = {} if max_partitions is None else {"max_partitions": max_partitions}
    return _op(op="create", name=name, partitions=partitions, configs={}, topic_id=f"id-{name}", **extra)


INIT = _op(op="init", cluster_id="c", n=4)


def test_two_creations_that_together_pass_max_partitions_the_second_is_refused_where_applied() -> None:
    """Both passed the request-time check (each saw 0 partitions); applied in log order, the
    second would make 12 > 10 and is refused, with the request-time check's message."""
    ops = [INIT, _create("a", 6), _create("b", 6)]
    state = fold_metadata(ops)
    assert list(state["topics"]) == ["a"] and state["next_slot"] == 5 + 6
    assert state["refused"] == {"id-b": "The cluster has 6 partitions; 6 more would pass max_partitions=10"}
    # the same after compaction, and the count follows deletions
    again = fold_metadata(compact_metadata(ops) + [_create("c", 5)])
    assert list(again["topics"]) == ["a"] and "id-c" in again["refused"]
    freed = fold_metadata(compact_metadata(ops) + [_op(op="delete", name="a"), _create("c", 5)])
    assert list(freed["topics"]) == ["c"]


def test_entries_written_without_a_bound_replay_as_they_were_applied() -> None:
    state = fold_metadata([INIT, _create("a", 8, None), _create("b", 8, None)])
    assert list(state["topics"]) == ["a", "b"] and state["refused"] == {}


def test_refusals_remembered_are_bounded() -> None:
    state = fold_metadata([INIT, _create("full", 10)] + [_create(f"t{i}", 1) for i in range(150)])
    assert len(state["refused"]) == 100 and "id-t149" in state["refused"] and "id-t49" not in state["refused"]


def test_a_single_node_refuses_a_creation_past_max_partitions_where_it_adds_it(tmp_path: Path) -> None:
    cfg = load_config(None, env={}, overrides={"data_dir": str(tmp_path), "max_partitions": 10})
    topology = SingleNodeTopology(cfg, ClusterMetadata(str(tmp_path), offsets_partitions=4),
                                  PartitionStore(str(tmp_path), cfg), lambda: BrokerInfo(0, "127.0.0.1", 9092))

    async def main() -> None:
        await topology.create_topic("a", 6, {})
        with pytest.raises(PartitionLimitError, match="The cluster has 6 partitions; 6 more"):
            await topology.create_topic("b", 6, {})
        assert set(topology.metadata.topics) == {"a"}

    asyncio.run(main())


def test_a_topics_max_message_bytes_is_bounded_by_the_nodes_message_max_bytes() -> None:
    assert validate_topic_config("max.message.bytes", "1048588", message_max_bytes=1048588) is None
    err = validate_topic_config("max.message.bytes", "2147483647", message_max_bytes=1048588)
    assert err is not None and "at most the broker's message.max.bytes (1048588)" in err
