"""The consumer group protocol of KIP-848 (ConsumerGroupHeartbeat), beside the classic groups:
member state and reconciliation so far (``reconcile``); the heartbeat, records and replay are
still to come (issue 16)."""
