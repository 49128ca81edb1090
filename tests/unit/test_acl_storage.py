"""ACLs in the cluster's metadata (issue 17): in the replicated metadata log (one ``acls`` operation
removes then adds, atomically, as Kafka's controller writes a batch of ACL records; compaction keeps
them) and, for a single node, in its cluster.json; both behind ``Topology.create_acls`` and
``delete_acls``."""

from __future__ import annotations

import asyncio
from pathlib import Path

from cluster.metadata import ClusterMetadata
from cluster.metadata_log import compact_metadata, fold_metadata
from cluster.metadata_log import metadata_op as _op

READ_T = (2, "t", 3, "User:alice", "*", 3, 3)  # ALLOW alice READ on topic t (literal)
DENY_G = (3, "g-", 4, "User:*", "10.0.0.1", 2, 2)  # DENY everyone ALL on groups g-* from 10.0.0.1


def test_the_log_folds_acl_changes_and_compaction_keeps_them() -> None:
    ops = [_op(op="init", cluster_id="c", n=16),
           _op(op="acls", create=[list(READ_T), list(DENY_G)], delete=[]),
           _op(op="acls", create=[list(READ_T)], delete=[]),  # creating what exists changes nothing
           _op(op="acls", create=[], delete=[list(READ_T), [2, "absent", 3, "User:x", "*", 3, 3]])]
    state = fold_metadata(ops)
    assert state["acls"] == [list(DENY_G)]
    assert fold_metadata(compact_metadata(ops))["acls"] == [list(DENY_G)]
    # removals go first, so one step can replace an ACL with itself
    again = fold_metadata(compact_metadata(ops) + [_op(op="acls", create=[list(DENY_G)], delete=[list(DENY_G)])])
    assert again["acls"] == [list(DENY_G)]


def test_a_single_node_keeps_its_acls_on_disk(tmp_path: Path) -> None:
    from cluster.config import NodeConfig
    from cluster.data_plane import PartitionStore
    from cluster.single_node_topology import SingleNodeTopology

    meta = ClusterMetadata(str(tmp_path), offsets_partitions=4)
    config = NodeConfig(data_dir=str(tmp_path))
    topology = SingleNodeTopology(config, meta, PartitionStore(str(tmp_path), config), lambda: None)  # type: ignore[arg-type,return-value]
    from cluster.security.authorizer import AclFilter, Operation, ResourceType

    asyncio.run(topology.create_acls([READ_T, DENY_G]))
    alices = AclFilter(ResourceType.TOPIC, principal="User:alice", operation=Operation.READ)
    assert asyncio.run(topology.delete_acls([alices, AclFilter(name="none")])) == [[READ_T], []]
    assert meta.acls == {DENY_G}
    assert ClusterMetadata(str(tmp_path), offsets_partitions=4).acls == {DENY_G}
