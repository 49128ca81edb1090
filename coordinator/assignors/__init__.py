"""Server-side partition assignors of the consumer group protocol (KIP-848): pure functions from
the members' subscriptions and previous targets to new targets. ``uniform`` (balanced, sticky) and
``range`` (co-partitioning), as Kafka's ``group.consumer.assignors`` names them."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from .range import assign_range
from .spec import Assignment, AssignorError, MemberSpec, TopicSizes
from .uniform import assign_uniform

Assignor = Callable[[Mapping[str, MemberSpec], TopicSizes], Assignment]
ASSIGNORS: dict[str, Assignor] = {"uniform": assign_uniform, "range": assign_range}

__all__ = ["ASSIGNORS", "Assignment", "Assignor", "AssignorError", "MemberSpec", "TopicSizes", "assign_range",
           "assign_uniform"]
