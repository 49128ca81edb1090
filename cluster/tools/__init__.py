"""Operators' tools: ``kcoord groups``, ``kcoord topics``, ``kcoord status``.

They speak only the Kafka protocol (through confluent-kafka), so they work against a kcoord
cluster and against Apache Kafka alike.
"""
