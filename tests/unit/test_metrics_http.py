"""The metrics endpoint's protection (issue 17): HTTP Basic authentication and HTTPS with the
node's key, certificates made by trustme here."""

from __future__ import annotations

import base64
import socket
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import trustme

from cluster.config import ConfigError, NodeConfig
from cluster.metrics_http import start_server
from cluster.security.tls import server_context
from cluster.tools.local_cluster import free_port


def _get(url: str, auth: str | None = None, context: ssl.SSLContext | None = None) -> tuple[int, bytes]:
    req = urllib.request.Request(url)
    if auth is not None:
        req.add_header("Authorization", "Basic " + base64.b64encode(auth.encode()).decode())
    try:
        with urllib.request.urlopen(req, timeout=5, context=context) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def test_basic_auth_lets_in_only_the_right_credentials_and_tls_serves_https(tmp_path: Path) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    keystore = tmp_path / "node.pem"
    cert.private_key_and_cert_chain_pem.write_to_path(str(keystore))
    cfg = NodeConfig(host="127.0.0.1", metrics_port=free_port(), metrics_basic_auth="prom:scrape-pw",
                     metrics_tls=True, ssl_keystore_location=str(keystore)).validate()
    server = start_server(cfg, server_context(cfg, "none"))
    assert server is not None
    client = ssl.create_default_context()
    ca.configure_trust(client)
    url = f"https://127.0.0.1:{server.port}/metrics"
    try:
        silent = socket.create_connection(("127.0.0.1", server.port))  # says nothing: holds only its own thread
        assert _get(url, None, client)[0] == 401
        assert _get(url, "prom:wrong", client)[0] == 401
        status, body = _get(url, "prom:scrape-pw", client)
        assert status == 200 and b"kcoord_" in body
        with pytest.raises((urllib.error.URLError, ConnectionError)):  # plain HTTP to the TLS port gets nothing
            _get(f"http://127.0.0.1:{server.port}/metrics", "prom:scrape-pw")
        silent.close()
    finally:
        server.stop()


@pytest.mark.parametrize("kw,setting", [({"metrics_basic_auth": "no-colon"}, "metrics_basic_auth"),
                                        ({"metrics_basic_auth": "prom:"}, "metrics_basic_auth"),
                                        ({"metrics_tls": True}, "metrics_tls")])
def test_bad_settings(kw: dict[str, object], setting: str) -> None:
    with pytest.raises(ConfigError, match=setting):
        NodeConfig(metrics_port=9404, **kw).validate()  # type: ignore[arg-type]
