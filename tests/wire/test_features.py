"""ApiVersions v3+ reports the node's features (KIP-584), and no level is finalized before every
API version it implies is served: a client trusting ``transaction.version`` 2 would otherwise stop
sending AddPartitionsToTxn to a node that still needs it."""

from __future__ import annotations

from kio.schema.api_versions.v3.request import ApiVersionsRequest as V3
from kio.schema.api_versions.v4.request import ApiVersionsRequest as V4

from cluster import features
from tests.wire.raw import ask


def _ask(bootstrap: str, version: int) -> object:
    req = (V3 if version == 3 else V4)(client_software_name="kcoord-test", client_software_version="1")
    return ask(bootstrap, 18, version, req)


def test_v4_reports_supported_and_finalized_features_at_one_epoch(bootstrap: str) -> None:
    r = _ask(bootstrap, 4)
    assert {(f.name, f.min_version, f.max_version) for f in r.supported_features} == {
        ("group.version", 0, 1), ("transaction.version", 0, 1)}
    assert {(f.name, f.min_version_level, f.max_version_level) for f in r.finalized_features} == {
        ("group.version", 1, 1), ("transaction.version", 1, 1)}
    assert r.finalized_features_epoch == features.FINALIZED_EPOCH >= 1
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
    assert features.unserved(served) == []
    # the check bites: transaction.version 2 needs Produce v12 and EndTxn v5, not served yet
    tv2 = [f for f in features.FEATURES if f.name == "transaction.version"][0]
    assert any(k == 26 for k in tv2.apis[2]) and served.get(26, -1) < 5


def test_the_check_names_what_a_level_lacks() -> None:
    assert features.unserved({68: 1, 69: 1}) == []
    assert features.unserved({68: 0, 69: 1}) == ["group.version=1 needs api 68 v1, served v0"]
