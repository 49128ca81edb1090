"""The transaction coordinator's part of a node: builds its driver and registers its APIs."""

from __future__ import annotations

import logging

from cluster.apis.transactions import TxnApi
from cluster.apis.transactions import register as register_handlers
from cluster.services import NodeServices
from cluster.txn_driver import TxnDriver
from transactions import commands as c
from transactions.config import TxnConfig

log = logging.getLogger("kcoord.transactions")


async def _no_markers_yet(markers: c.WriteMarkers, coordinator_epoch: int) -> None:
    """Data partitions refuse transactional batches and the group coordinator has no pending
    transactional offsets yet (issue 15), so no partition holds anything a marker would close;
    the control batches themselves come with read_committed support."""
    log.debug("event=txn_markers_skipped transactional_id=%r partitions=%d", markers.transactional_id,
              len(markers.partitions))


def register(node: NodeServices) -> TxnApi:
    cfg = node.config
    config = TxnConfig(max_timeout_ms=cfg.transaction_max_timeout_ms, id_expiration_ms=cfg.transactional_id_expiration_ms)
    driver = TxnDriver(config, node.topology.txn_log, node.txn_partitions, node.now_ms, _no_markers_yet)
    return register_handlers(node, driver)
