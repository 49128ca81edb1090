"""The metrics endpoint: ``GET /metrics`` on the node's ``host`` at ``metrics_port`` (0 = off), in
Prometheus' text format, from a thread of its own.

Optional protection, for a port reachable beyond the host: ``metrics_basic_auth=user:password``
(HTTP Basic; a request without it, or with another, gets 401 and nothing else) and
``metrics_tls=true`` (HTTPS with the node's key and chain from ``ssl.keystore.location``). Prometheus
scrapes both with its ``basic_auth`` and ``scheme: https`` settings.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import ssl
import threading
from collections.abc import Callable, Iterable
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import make_wsgi_app
from prometheus_client.exposition import ThreadingWSGIServer

from cluster.config import NodeConfig
from cluster.metrics import REGISTRY

log = logging.getLogger("kcoord.metrics")

StartResponse = Callable[..., Any]


class _QuietHandler(WSGIRequestHandler):
    timeout = 10  # seconds a connection may stay silent
    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
        pass  # a scrape every few seconds is not news


def guarded(app: Callable[[dict[str, Any], StartResponse], Iterable[bytes]], credentials: str
            ) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    """``app`` behind HTTP Basic authentication with ``user:password``."""
    expected = hashlib.sha256(("Basic " + base64.b64encode(credentials.encode()).decode()).encode()).digest()

    def serve(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        given = hashlib.sha256(environ.get("HTTP_AUTHORIZATION", "").encode()).digest()  # same length: no timing tell
        if not hmac.compare_digest(given, expected):
            start_response("401 Unauthorized", [("WWW-Authenticate", 'Basic realm="kcoord metrics"'),
                                                ("Content-Length", "0")])
            return [b""]
        return app(environ, start_response)

    return serve


class MetricsServer:
    def __init__(self, host: str, port: int, *, basic_auth: str = "", tls: ssl.SSLContext | None = None) -> None:
        app = make_wsgi_app(REGISTRY)
        self._server = make_server(host, port, guarded(app, basic_auth) if basic_auth else app, ThreadingWSGIServer,
                                   handler_class=_QuietHandler)
        if tls is not None:
            # the handshake happens in the request's own thread (on its first read), not in accept():
            # a client that connects and stays silent holds its thread for `timeout`, not the server
            self._server.socket = tls.wrap_socket(self._server.socket, server_side=True,
                                                  do_handshake_on_connect=False)
        self.host = host
        self.scheme = "https" if tls is not None else "http"
        self._thread = threading.Thread(target=self._server.serve_forever, name="metrics", daemon=True)

    @property
    def port(self) -> int:
        return int(self._server.server_port)

    def start(self) -> MetricsServer:
        self._thread.start()
        log.info("event=metrics_listening host=%s port=%d scheme=%s", self.host, self.port, self.scheme)
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()


def start_server(config: NodeConfig, tls: ssl.SSLContext | None = None) -> MetricsServer | None:
    """Start the endpoint if ``config.metrics_port`` is set (``tls``: serve HTTPS); None when off."""
    if config.metrics_port <= 0:
        return None
    return MetricsServer(config.host, config.metrics_port, basic_auth=config.metrics_basic_auth, tls=tls).start()
