"""Producer-id blocks come from the replicated metadata log: distinct across nodes and requests,
a retried request granted once, and kept through the log's compaction (a node whose disk was
replaced used to start its local counter again and hand out ids already in use)."""

from __future__ import annotations

from cluster.metadata_log import PID_BASE, PID_BLOCK, compact_metadata, fold_metadata
from cluster.metadata_log import metadata_op as _op


def test_blocks_are_granted_once_and_never_repeat() -> None:
    ops = [_op(op="init", cluster_id="c", n=16),
           _op(op="pid_block", node=0, request="r1"),
           _op(op="pid_block", node=1, request="r2"),
           _op(op="pid_block", node=0, request="r1"),  # the same request again (a retried submit)
           _op(op="pid_block", node=0, request="r3")]
    state = fold_metadata(ops)
    assert state["pid_grants"][1] == ["r2", PID_BASE + PID_BLOCK]
    assert state["pid_grants"][0] == ["r3", PID_BASE + 2 * PID_BLOCK]
    compacted = compact_metadata(ops)
    again = fold_metadata(compacted + [_op(op="pid_block", node=2, request="r4")])
    assert again["pid_grants"][2] == ["r4", PID_BASE + 3 * PID_BLOCK]  # the counter survived compaction
