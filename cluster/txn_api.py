"""The transaction coordinator's part of a node: builds its driver and registers its APIs."""

from __future__ import annotations

from cluster.apis import producers, txn_markers
from cluster.apis.transactions import TxnApi
from cluster.apis.transactions import register as register_handlers
from cluster.apis.txn_markers import MarkerWriter
from cluster.services import NodeServices
from cluster.txn_driver import TxnDriver
from transactions.config import TxnConfig


def register(node: NodeServices) -> TxnApi:
    cfg = node.config
    config = TxnConfig(max_timeout_ms=cfg.transaction_max_timeout_ms, id_expiration_ms=cfg.transactional_id_expiration_ms)
    driver = TxnDriver(config, node.topology.txn_log, node.txn_partitions, node.now_ms, MarkerWriter(node))
    txn_markers.register(node)
    producers.register(node)
    return register_handlers(node, driver)
