"""ApiVersions v3+ reports the node's features (KIP-584), and no level is finalized before every
node serves what it implies: a client trusting ``transaction.version`` 2 stops sending
AddPartitionsToTxn to every node, so a node that still needed it would refuse its batches."""

from __future__ import annotations

from kio.schema.api_versions.v3.request import ApiVersionsRequest as V3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as V4

from cluster import features
from cluster.metadata_log import METADATA_VERSION, TRANSACTION_V2
from tests.wire.raw import ask


def _ask(bootstrap: str, version: int) -> object:
    req = (V3 if version == 3 else V4)(client_software_name="kcoord-test", client_software_version="1")
    return ask(bootstrap, 18, version, req)


def test_v4_reports_supported_and_finalized_features_at_the_metadata_version(bootstrap: str) -> None:
    r = _ask(bootstrap, 4)
    assert {(f.name, f.min_version, f.max_version) for f in r.supported_features} == {
        ("group.version", 0, 1), ("transaction.version", 0, 2)}
    # a single node is all of its cluster: it finalizes what it serves
    assert {(f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features} == {
        ("group.version", 1, 1), ("transaction.version", 2, 2)}
    assert r.finalized_features_epoch == METADATA_VERSION
    for f in r.finalized_features:  # a finalized level lies in the supported range
        lo, hi = next((s.min_version, s.max_version) for s in r.supported_features if s.name == f.name)
        assert lo <= f.max_version_level <= hi


def test_v3_leaves_out_features_whose_lowest_level_is_zero(bootstrap: str) -> None:
    r = _ask(bootstrap, 3)
    assert r.supported_features == ()  # both start at level 0: v3 clients cannot read that
    assert {f.name for f in r.finalized_features} == {"group.version", "transaction.version"}


def test_every_finalized_level_has_its_apis_served(bootstrap: str) -> None:
    r = _ask(bootstrap, 4)
    served = {int(a.api_key): int(a.max_version) for a in r.api_keys}
    assert features.unserved(served, METADATA_VERSION) == []


def test_transaction_version_2_waits_for_every_node() -> None:
    """A cluster with a node of an older release (it reads metadata version 8) stays on
    transaction version 1; the last node's upgrade finalizes 2, at a higher epoch."""
    assert dict(features.finalized(TRANSACTION_V2 - 1)) == {"group.version": 1, "transaction.version": 1}
    assert dict(features.finalized(TRANSACTION_V2)) == {"group.version": 1, "transaction.version": 2}


def test_the_check_names_what_a_level_lacks() -> None:
    assert features.unserved({0: 12, 24: 5, 26: 5, 28: 5, 68: 1, 69: 1}, METADATA_VERSION) == []
    assert features.unserved({0: 11, 24: 5, 26: 5, 28: 5, 68: 1, 69: 1}, METADATA_VERSION) == [
        "transaction.version=2 needs api 0 v12, served v11"]
    assert features.unserved({0: 11, 68: 1, 69: 1}, TRANSACTION_V2 - 1) == []
