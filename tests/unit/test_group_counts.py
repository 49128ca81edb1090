"""Group metrics kept from the runtime's events (cluster.metrics.GroupCounts), without a scan."""

from __future__ import annotations

from cluster import metrics
from coordinator.group_census import GroupView


def live(counts: metrics.GroupCounts) -> dict[str, int]:
    return {k: v for k, v in counts.states.items() if v}


def test_counts_follow_the_events_and_a_rebalance_is_timed_in_coordinator_time() -> None:
    counts = metrics.GroupCounts()
    before = metrics.REBALANCES._value.get()
    took_before = metrics.REBALANCE_DURATION._sum.get()
    counts.observe(0, [GroupView("a", "Stable", 2, 1_000), GroupView("b", "Empty", 0, 1_000)], reset=True)
    assert (counts.states, counts.members) == ({"Stable": 1, "Empty": 1}, 2)
    counts.observe(0, [GroupView("a", "PreparingRebalance", 3, 5_000)], reset=False)
    counts.observe(0, [GroupView("a", "CompletingRebalance", 3, 5_200)], reset=False)
    counts.observe(0, [GroupView("a", "Stable", 3, 5_750)], reset=False)
    assert metrics.REBALANCES._value.get() == before + 1
    assert abs(metrics.REBALANCE_DURATION._sum.get() - took_before - 0.75) < 1e-9  # 5.000 s -> 5.750 s
    assert (counts.states["Stable"], counts.members) == (1, 3)
    counts.observe(1, [GroupView("c", "Stable", 1, 0)], reset=True)
    counts.observe(0, [GroupView("b", None, 0, None)], reset=False)  # deleted
    assert (live(counts), counts.members) == ({"Stable": 2}, 4)
    counts.observe(0, [], reset=True)  # partition 0 unloaded
    assert (counts.states["Stable"], counts.members) == (1, 1)
    counts.shard_state(0, "loading")
    counts.shard_state(1, "active")
    counts.shard_state(0, None)
    assert counts.shards == {1: "active"}


def test_a_scrape_adds_up_every_drivers_counts() -> None:
    a, b = metrics.group_counts(), metrics.group_counts()
    a.observe(0, [GroupView("x", "Stable", 4, 0)], reset=True)
    b.observe(1, [GroupView("y", "Stable", 1, 0)], reset=True)
    a.shard_state(0, "active")
    b.shard_state(1, "active")
    families = {f.name: f for f in metrics.GroupCollector().collect()}
    stable = [s.value for s in families["kcoord_groups"].samples if s.labels == {"state": "Stable"}]
    assert stable and stable[0] >= 2
    assert families["kcoord_group_members"].samples[0].value >= 5
    del a, b
