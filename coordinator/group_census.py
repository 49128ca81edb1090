"""What changed in a shard's groups, as data for whoever counts them (metrics).

A shard notes which groups a step touched; after the step the runtime asks for the views of
those whose state or member count changed since it last reported them, and hands them out as
an effect. Nobody outside has to scan the shard's groups (nor reach into them from another
thread) to count groups by state, members, or rebalances.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from .consumer_group.group import ConsumerGroup
from .group import ClassicGroup, GroupState


@dataclass(frozen=True, slots=True)
class GroupView:
    group_id: str
    state: str | None  # GroupState's value; None: the group is gone (deleted, expired, Dead)
    members: int
    since_ms: int | None  # when it entered ``state`` (coordinator time)


class GroupCensus:
    __slots__ = ("_last", "_touched", "_all")

    def __init__(self) -> None:
        self._last: dict[str, tuple[str | None, int]] = {}
        self._touched: set[str] = set()
        self._all = False

    def touch(self, group_id: str | None) -> None:
        if group_id:
            self._touched.add(group_id)

    def touch_many(self, group_ids: Iterable[str]) -> None:
        self._touched.update(group_ids)

    def touch_all(self) -> None:
        self._all = True

    def changes(self, groups: Mapping[str, ClassicGroup],
                consumer: Mapping[str, ConsumerGroup] | None = None) -> list[GroupView]:
        """Views of the touched groups (classic, and consumer groups of KIP-848) that differ from
        what was last reported; clears the marks."""
        consumer = consumer or {}
        if self._all:
            touched: Iterable[str] = set(groups) | set(consumer) | set(self._last)
        elif self._touched:
            touched = self._touched
        else:
            return []
        views = []
        for group_id in sorted(touched):  # the same order in every run (set order is salted)
            view = _view(group_id, groups.get(group_id), consumer.get(group_id))
            now = (view.state, view.members)
            if self._last.get(group_id, (None, 0)) != now:
                views.append(view)
                if view.state is None:
                    self._last.pop(group_id, None)
                else:
                    self._last[group_id] = now
        self._touched = set()
        self._all = False
        return views

    def everything(self, groups: Mapping[str, ClassicGroup],
                   consumer: Mapping[str, ConsumerGroup] | None = None) -> list[GroupView]:
        """Every live group (after a load): the census starts over from these."""
        self._last.clear()
        self._touched = set()
        self._all = False
        views = [_view(group_id, group) for group_id, group in groups.items()]
        views += [_view(group_id, None, group) for group_id, group in (consumer or {}).items()]
        views = [v for v in views if v.state is not None]
        self._last = {v.group_id: (v.state, v.members) for v in views}
        return views


def _view(group_id: str, group: ClassicGroup | None, consumer: ConsumerGroup | None = None) -> GroupView:
    if consumer is not None:
        return GroupView(group_id, consumer.state.value, len(consumer.members), None)
    if group is None or group.state is GroupState.DEAD:
        return GroupView(group_id, None, 0, None)
    return GroupView(group_id, group.state.value, len(group.members), group.current_state_timestamp)
