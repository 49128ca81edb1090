"""``kcoord bench``: workloads with real clients against kcoord and, side by side, a peer broker.

Scenarios live in one module each (``commit``, ``rebalance``, ``e2e``, ``cluster3`` for the
3-node ``failover``/``load``); ``brokers`` starts and stops tansu and a kcoord node;
``report`` prints the rich table and the JSON line. Nothing here is imported by the node.
"""
