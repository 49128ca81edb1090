"""One module per API family; ``register_all(node)`` registers this node's own APIs.

Group APIs (JoinGroup, SyncGroup, ...) are registered by ``cluster.group_api``.
"""

from __future__ import annotations

from cluster.apis import (
    acls,
    add_raft_voter,
    alter_configs,
    api_versions,
    configs,
    delete_records,
    describe_quorum,
    elect_leaders,
    fetch,
    find_coordinator,
    log_dirs,
    metadata,
    offset_for_leader_epoch,
    partitions,
    produce,
    remove_raft_voter,
    sasl,
    scram_users,
    topic_partitions,
    topics,
)
from cluster.services import NodeServices


def register_all(node: NodeServices) -> None:
    for mod in (acls, alter_configs, api_versions, configs, delete_records, describe_quorum, metadata, partitions, topics, topic_partitions,
                log_dirs, elect_leaders, produce, fetch, find_coordinator, sasl, scram_users, remove_raft_voter,
                add_raft_voter, offset_for_leader_epoch):
        mod.register(node)
