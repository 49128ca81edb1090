"""``kcoord`` command line: ``kcoord node`` runs one node; ``kcoord up`` runs a local node."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
from typing import Any

from cluster.config import ConfigError, NodeConfig, load_config
from cluster.logfmt import setup_logging
from replication.durable import POWER_LOSS_ENV, record_syncs

log = logging.getLogger("kcoord.cli")


async def _run_node(config: NodeConfig) -> int:
    from cluster.node import Node

    node = Node(config)
    await node.start()
    print(f"kcoord node {config.node_id} listening on {config.advertised}:{node.port}", flush=True)
    stop = node.stop_requested
    assert stop is not None
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("event=shutdown_requested node_id=%d", config.node_id)
    await node.stop()
    return node.exit_code


def _run(config: NodeConfig) -> int:
    if os.environ.get(POWER_LOSS_ENV) == "1":  # tests and the chaos tool: simulated power loss
        record_syncs(config.data_dir)
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    from cluster import bootstrap
    from cluster.data_dir import DataDirError
    from cluster.node import NodeStartError

    try:
        config = bootstrap.resolve(config)  # a node started with bootstrap: its id and peers, from the cluster
    except (ConfigError, DataDirError) as e:
        print(f"kcoord: {e}", file=sys.stderr)
        log.error("event=node_refused_to_start error=%r", str(e))
        return 2
    except OSError as e:  # its Raft port taken
        log.error("event=node_failed error=%r", str(e))
        return 1
    try:
        code = runner(_run_node(config))
    except NodeStartError as e:
        print(f"kcoord: {e}", file=sys.stderr)
        log.error("event=node_refused_to_start error=%r", str(e))
        return 2
    except OSError as e:
        log.error("event=node_failed error=%r", str(e))
        return 1
    if code:
        print(f"kcoord: node stopped: {code}", file=sys.stderr)
    return int(code or 0)


# Subcommands that live in their own modules: each has ``add_parser(subparsers)`` and ``run(args) -> int``.
TOOL_MODULES = ("cluster.tools.groups", "cluster.tools.topics", "cluster.tools.status", "cluster.tools.net",
                "cluster.tools.transactions", "cluster.tools.acls", "cluster.tools.users", "cluster.tools.configs",
                "cluster.tools.cluster_nodes")


def _tools() -> dict[str, Any]:
    import importlib

    found: dict[str, Any] = {}
    for name in TOOL_MODULES:
        try:
            mod = importlib.import_module(name)
        except ModuleNotFoundError as e:
            if e.name is not None and name.startswith(e.name):
                continue  # not built yet
            raise
        found[mod.COMMAND] = mod
    # Plug-ins registered as entry points (`kcoord chaos`, `kcoord bench`): loaded by name, never
    # imported statically, so the rule that nothing imports chaos/ or bench/ still holds.
    from importlib.metadata import entry_points

    for ep in entry_points(group="kcoord.commands"):
        try:
            plugin = ep.load()
        except ImportError:
            continue
        found.setdefault(plugin.COMMAND, plugin)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kcoord", description="Kafka-wire-compatible group coordinator cluster")
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="cmd", required=True)
    tools = _tools()
    for mod in tools.values():
        mod.add_parser(sub)
    p_node = sub.add_parser("node", help="run one node in the foreground")
    p_node.add_argument("--config", help="TOML config file")
    p_node.add_argument("--node-id", type=int)
    p_node.add_argument("--host")
    p_node.add_argument("--port", type=int)
    p_node.add_argument("--data-dir")
    p_node.add_argument("--bootstrap", metavar="HOST:RAFT_PORT,...",
                        help="join the cluster of these running nodes (instead of peers; node id given by the cluster)")
    p_node.add_argument("--raft-port", type=int, help="this node's Raft port (with --bootstrap)")
    p_node.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="any setting, by field name or Kafka dotted name (repeatable)")
    p_up = sub.add_parser("up", help="start a local 3-node cluster on 127.0.0.1:9092-9094 (data in ./data)")
    p_up.add_argument("--nodes", type=int, default=3, help="1 = a single node without Raft")
    p_up.add_argument("--base-port", "--port", dest="port", type=int, default=9092)
    p_up.add_argument("--raft-port", type=int, default=19000)
    p_up.add_argument("--data-dir", default="./data")
    p_up.add_argument("--set", action="append", default=[], metavar="NAME=VALUE")
    p_up.add_argument("--secure", action="store_true",
                      help="SASL_SSL for clients (ports +100), a generated CA, an admin user and ACLs (data/secure)")
    p_up.add_argument("--netns", action="store_true",
                      help="each node in a network namespace of its own, on its own address, as on separate hosts "
                           "(root; ports --base-port and 9192 on every node)")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    if args.cmd in tools:
        return int(tools[args.cmd].run(args))
    try:
        if args.cmd == "node":
            overrides: dict[str, Any] = {"node_id": args.node_id, "host": args.host, "port": args.port,
                                         "data_dir": args.data_dir, "bootstrap": args.bootstrap,
                                         "raft_port": args.raft_port}
            for item in args.set:
                if "=" not in item:
                    raise ConfigError(f"--set expects NAME=VALUE, got {item!r}")
                k, v = item.split("=", 1)
                overrides[k.strip()] = v
            config = load_config(args.config, overrides=overrides)
        else:
            settings = dict(item.split("=", 1) for item in args.set if "=" in item)
            if args.nodes > 1:
                from cluster.tools.launcher import up

                return up(args.nodes, args.port, args.raft_port, args.data_dir, settings, use_netns=args.netns,
                          secure=args.secure)
            config = load_config(None, overrides={"node_id": 0, "host": "127.0.0.1", "port": args.port,
                                                  "data_dir": os.path.join(args.data_dir, "node-0"), **settings})
    except ConfigError as e:
        print(f"kcoord: {e}", file=sys.stderr)
        return 2
    return _run(config)


if __name__ == "__main__":
    sys.exit(main())
