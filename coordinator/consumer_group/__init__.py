"""The consumer group protocol of KIP-848, pure: member state and reconciliation (``member``,
``reconcile``), the target assignment (``target``), the heartbeat step (``heartbeat``,
``heartbeat_request``), regex subscriptions (``regex``), the group rebuilt by replay (``group``),
its records and their encoding (``records``, ``codec``), and the consumer protocol that classic
members embed (``classic_protocol``). The shard serves it in ``coordinator.consumer_groups`` and
``coordinator.mixed_groups``."""
