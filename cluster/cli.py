"""``kcoord`` command line: ``kcoord node`` runs one node; ``kcoord up`` runs a local node."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from cluster.config import ConfigError, NodeConfig, load_config
from cluster.logfmt import setup_logging

log = logging.getLogger("kcoord.cli")


async def _run_node(config: NodeConfig) -> None:
    from cluster.node import Node

    node = Node(config)
    await node.start()
    print(f"kcoord node {config.node_id} listening on {config.advertised}:{node.port}", flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    log.info("event=shutdown_requested node_id=%d", config.node_id)
    await node.stop()


def _run(config: NodeConfig) -> int:
    try:
        import uvloop

        runner: Any = uvloop.run
    except ImportError:  # pragma: no cover
        runner = asyncio.run
    try:
        runner(_run_node(config))
    except OSError as e:
        log.error("event=node_failed error=%r", str(e))
        return 1
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kcoord", description="Kafka-wire-compatible group coordinator cluster")
    parser.add_argument("--log-level", default="INFO")
    sub = parser.add_subparsers(dest="cmd", required=True)
    p_node = sub.add_parser("node", help="run one node in the foreground")
    p_node.add_argument("--config", help="TOML config file")
    p_node.add_argument("--node-id", type=int)
    p_node.add_argument("--host")
    p_node.add_argument("--port", type=int)
    p_node.add_argument("--data-dir")
    p_node.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="any setting, by field name or Kafka dotted name (repeatable)")
    p_up = sub.add_parser("up", help="start a local node on 127.0.0.1:9092 (data in ./data/node-0)")
    p_up.add_argument("--port", type=int, default=9092)
    p_up.add_argument("--data-dir", default="./data/node-0")
    args = parser.parse_args(argv)
    setup_logging(args.log_level)
    try:
        if args.cmd == "node":
            overrides: dict[str, Any] = {"node_id": args.node_id, "host": args.host, "port": args.port,
                                         "data_dir": args.data_dir}
            for item in args.set:
                if "=" not in item:
                    raise ConfigError(f"--set expects NAME=VALUE, got {item!r}")
                k, v = item.split("=", 1)
                overrides[k.strip()] = v
            config = load_config(args.config, overrides=overrides)
        else:
            config = load_config(None, overrides={"node_id": 0, "host": "127.0.0.1", "port": args.port,
                                                  "data_dir": args.data_dir})
    except ConfigError as e:
        print(f"kcoord: {e}", file=sys.stderr)
        return 2
    return _run(config)


if __name__ == "__main__":
    sys.exit(main())
