"""A node without peers: local logs, and it leads every partition (cluster.single_node_topology)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cluster.broker_info import BrokerInfo
from cluster.config import load_config
from cluster.data_plane import PartitionStore
from cluster.metadata import ClusterMetadata
from cluster.single_node_topology import SingleNodeTopology
from cluster.topology import Topology

ME = BrokerInfo(0, "127.0.0.1", 19092)


def make(tmp_path: Path) -> SingleNodeTopology:
    cfg = load_config(None, env={}, overrides={"data_dir": str(tmp_path), "offsets_topic_num_partitions": 4})
    return SingleNodeTopology(cfg, ClusterMetadata(str(tmp_path), offsets_partitions=4),
                              PartitionStore(str(tmp_path), cfg), lambda: ME)


def test_it_leads_everything_it_has_and_nothing_else(tmp_path: Path) -> None:
    async def main() -> None:
        t: Topology = make(tmp_path)
        await t.start()
        assert await t.wait_formed(0.1)
        assert (t.brokers(), t.replica_ids(), t.controller_id()) == ([ME], [0], 0)
        assert [t.offsets_leader(p) for p in (0, 3, 4, -1)] == [ME, ME, None, None]
        assert t.likely_offsets_leader(0) is None  # never cut off
        await asyncio.wait_for(t.wait_offsets_leaders({0, 1}, 5.0), 0.5)  # nothing to wait for
        created = await t.create_topic("t", 2, {})
        assert created.partitions == 2 and t.partition_leader("t", 1) == (0, 1)
        assert t.partition("t", 1) is not None and t.partition("t", 2) is None and t.partition("u", 0) is None
        first, second = await t.allocate_producer_id_block(), await t.allocate_producer_id_block()
        assert second == first + 1000
        assert (await t.delete_topic("t")) == created and t.partition("t", 0) is None
        assert await t.delete_topic("t") is None
        lg = t.offsets_log(2)
        assert t.offsets_log(2) is lg  # opened once
        await t.stop()

    asyncio.run(main())


def test_its_offsets_logs_and_topics_survive_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        t = make(tmp_path)
        await t.start()
        await t.create_topic("kept", 1, {})
        lg = t.offsets_log(0)
        await lg.append(b"record", lg.leader_epoch())
        await t.stop()
        again = make(tmp_path)
        await again.start()
        assert again.partition("kept", 0) is not None
        assert [e.payload for e in again.offsets_log(0).read_committed(0)] == [b"record"]
        await again.stop()

    asyncio.run(main())
