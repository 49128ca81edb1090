"""The transaction coordinator's driver: the one driver (``cluster.shard_driver``) with what is
the transaction coordinator's own. Its records are encoded by ``cluster.txn_entries``;
``SendMarkers`` hands a decided transaction to the marker writer and reports back once every
partition has its marker (retrying while this node still owns the partition at that epoch);
balancing leaves a partition here while it holds open transactions.
"""

from __future__ import annotations

import asyncio
import logging
import struct
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import replace
from typing import Any

from cluster import metrics
from cluster.shard_driver import AppendErrors, EntryRefused, ShardDriver
from cluster.txn_entries import decode_entry, encode_entries
from replication.api import CoordinatorLog
from replication.raft.settings import EPOCH_STRIDE
from transactions import commands as c
from transactions.config import TxnConfig
from transactions.errors import TxnError
from transactions.runtime import SendMarkers, TransactionRuntime, error_response

log = logging.getLogger("kcoord.transactions")

# Writes the markers of one decided transaction (the coordinator epoch they carry is the second
# argument); returns the partitions still without theirs (retried), raises MarkersAbandoned to stop.
MarkerWriter = Callable[[c.WriteMarkers, int], Awaitable[tuple[tuple[str, int], ...]]]
MARKER_RETRY_S = (0.05, 0.1, 0.2, 0.5, 1.0)


def marker_epoch(epoch: int) -> int:
    """The coordinator epoch a marker carries (Kafka's int32): the Raft term of the partition's
    leadership (the epoch is term * EPOCH_STRIDE + re-fences), which only grows with it."""
    return min(epoch // EPOCH_STRIDE, (1 << 31) - 1)


class MarkersAbandoned(Exception):
    """A partition refused the markers for good (a newer epoch of the producer wrote there): the
    transaction stays decided until the partition's next owner tries again, as in Kafka."""


class TxnDriver(ShardDriver[TransactionRuntime, c.Request, c.Response]):
    log = log
    name = "txn_shard"
    errors = AppendErrors(TxnError.NOT_COORDINATOR, TxnError.COORDINATOR_NOT_AVAILABLE, TxnError.COORDINATOR_NOT_AVAILABLE)

    def __init__(self, config: TxnConfig, logs: Callable[[int], CoordinatorLog], num_partitions: int,
                 now_ms: Callable[[], int], write_markers: MarkerWriter, commit_timeout_ms: int = 5000) -> None:
        super().__init__(TransactionRuntime(config), logs, num_partitions, now_ms, commit_timeout_ms)
        self._write_markers = write_markers

    def _encode(self, records: Sequence[Any]) -> list[tuple[bytes, int]]:
        try:
            return encode_entries(records, self.max_entry_bytes)
        except (ValueError, struct.error) as exc:  # (struct: a field out of its wire range)
            raise EntryRefused(str(exc)) from exc

    def _decode(self, payload: bytes) -> list[Any]:
        return decode_entry(payload)

    def _error_response(self, request: c.Request, error: Any) -> c.Response:
        return error_response(request, error)

    def _busy(self, partition: int) -> bool:
        """Leadership balancing leaves this partition here while it loads or holds open
        transactions (a move would stall them behind the new owner's load)."""
        if self.runtime.epoch_of(partition) is None:
            return False
        shard = self.runtime.shard(partition)
        return shard is None or shard.open > 0

    def _on_effect(self, effect: Any) -> bool:
        if not isinstance(effect, SendMarkers):
            raise TypeError(f"no driver step for {type(effect).__name__}")
        self._spawn(self._send_markers(effect))
        return True

    def _on_step(self) -> None:
        metrics.set_open_transactions(self.runtime.open_transactions())

    async def _send_markers(self, send: SendMarkers) -> None:
        m = send.markers
        todo = m
        attempt = 0
        while self.runtime.epoch_of(send.partition) == send.epoch:
            try:
                left = await self._write_markers(todo, marker_epoch(send.epoch))
            except MarkersAbandoned as exc:
                log.warning("event=txn_markers_abandoned transactional_id=%r producer_id=%d error=%r",
                            m.transactional_id, m.producer_id, str(exc))
                return
            except Exception as exc:  # noqa: BLE001 - every other failure is retried while we own the partition
                log.info("event=txn_markers_retry transactional_id=%r attempt=%d error=%r", m.transactional_id,
                         attempt, str(exc))
                left = todo.partitions
            if not left:
                log.info("event=txn_markers_written transactional_id=%r producer_id=%d epoch=%d commit=%s "
                         "partitions=%d", m.transactional_id, m.producer_id, m.producer_epoch, m.commit,
                         len(m.partitions))
                metrics.count_transaction_end(m.commit)
                self._run(self.runtime.markers_written(send.partition, send.epoch, m, self._now_ms()))
                return
            todo = replace(m, partitions=tuple(left))
            await asyncio.sleep(MARKER_RETRY_S[min(attempt, len(MARKER_RETRY_S) - 1)])
            attempt += 1
