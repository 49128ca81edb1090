"""Share groups (KIP-932) as the group coordinator keeps them: membership, epochs, the simple
assignor's target, and which topic-partitions have share state (Kafka's record types 10-15)."""
