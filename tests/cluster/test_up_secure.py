"""``kcoord up --secure`` (issue 17): one command starts a 3-node cluster that clients reach over
SASL_SSL, with a CA it generated, an admin user and ACLs on. The admin's settings file works with
the tools and librdkafka as written; a wrong password and a user without ACLs are refused; the
nodes' own listener takes only certificates of the cluster's CA, and their Raft port speaks only TLS."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer
from confluent_kafka.admin import AdminClient

from cluster.tools.local_cluster import free_raft_bases, port_in_use
from tests.cluster.harness import ROOT

pytestmark = pytest.mark.cluster


def _free_base() -> int:
    """Client ports above every Raft range free_raft_bases hands out (10000-30064), below 32768."""
    for base in range(30200, 32500, 7):
        if not any(port_in_use(p) for p in (*range(base, base + 3), *range(base + 100, base + 103))):
            return base
    raise RuntimeError("no free ports")


def _properties(path: Path) -> dict[str, str]:
    return dict(line.split("=", 1) for line in path.read_text().splitlines() if "=" in line)


def test_up_secure_starts_a_sasl_ssl_cluster_with_acls(tmp_path: Path) -> None:
    base, raft = _free_base(), free_raft_bases(3)[0]
    proc = subprocess.Popen([sys.executable, "-m", "cluster.cli", "up", "--secure", "--base-port", str(base),
                             "--raft-port", str(raft), "--data-dir", str(tmp_path / "data")], cwd=ROOT,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"))
    try:
        assert proc.stdout is not None
        bootstrap = proc.stdout.readline().strip()  # printed once every node is up
        if not bootstrap:
            proc.wait(10)
            assert proc.stderr is not None
            pytest.fail(f"kcoord up --secure exited ({proc.returncode}): {proc.stderr.read()[-3000:]}")
        assert bootstrap == ",".join(f"127.0.0.1:{base + 100 + i}" for i in range(3))
        secure = tmp_path / "data" / "secure"
        assert all(oct((secure / f).stat().st_mode)[-3:] == "600" for f in ("node.pem", "ca-key.pem", "admin.properties"))
        admin_conf = _properties(secure / "admin.properties")
        args = subprocess.run(["ps", "-eo", "args"], capture_output=True, text=True).stdout
        assert "cluster.cli node" in args and admin_conf["sasl.password"] not in args  # not on a command line
        topic = f"sec-{uuid.uuid4().hex[:8]}"
        made = subprocess.run([sys.executable, "-m", "cluster.cli", "topics", "create", "--topic", topic,
                               "--partitions", "3", "--command-config", str(secure / "admin.properties")],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert made.returncode == 0, made.stderr
        p = Producer(admin_conf)
        for i in range(30):
            p.produce(topic, value=f"m{i}".encode(), partition=i % 3)
        assert p.flush(30) == 0
        c = Consumer({**admin_conf, "group.id": "g", "auto.offset.reset": "earliest"})
        c.subscribe([topic])
        seen: list[bytes | None] = []
        for _ in range(150):
            m = c.poll(0.3)
            if m is not None and not m.error():
                seen.append(m.value())
            if len(seen) == 30:
                break
        c.close()
        assert sorted(seen) == sorted(f"m{i}".encode() for i in range(30))

        errors: list[KafkaError] = []
        wrong = AdminClient({**admin_conf, "sasl.password": "wrong", "error_cb": errors.append})
        with pytest.raises(KafkaException):
            wrong.list_topics(timeout=2)
        wrong.poll(0.3)
        assert any(e.code() == KafkaError._AUTHENTICATION for e in errors), errors
        # a user the admin creates has no rights until an ACL gives them
        user = subprocess.run([sys.executable, "-m", "cluster.cli", "users", "create", "--user", "app",
                               "--password", "app-pw", "--command-config", str(secure / "admin.properties")],
                              cwd=ROOT, capture_output=True, text=True, timeout=60)
        assert user.returncode == 0, user.stderr
        app = {**admin_conf, "sasl.username": "app", "sasl.password": "app-pw"}
        failed: list[KafkaError] = []
        p = Producer({**app, "message.timeout.ms": 10000, "on_delivery": lambda e, _m: failed.append(e)})
        p.produce(topic, value=b"x", partition=0)
        p.flush(15)
        assert [e.code() for e in failed if e is not None] == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
        # the nodes' own listener wants a certificate of the cluster's CA
        errors.clear()
        internal = AdminClient({"bootstrap.servers": f"127.0.0.1:{base}", "security.protocol": "SSL",
                                "ssl.ca.location": admin_conf["ssl.ca.location"], "error_cb": errors.append})
        with pytest.raises(KafkaException):
            internal.list_topics(timeout=2)
        # the Raft port: TLS, and only with a certificate of the cluster's CA
        tls = ssl.create_default_context(cafile=admin_conf["ssl.ca.location"])
        tls.load_cert_chain(str(secure / "node.pem"))
        with socket.create_connection(("127.0.0.1", raft), timeout=5) as s, \
                tls.wrap_socket(s, server_hostname="127.0.0.1") as t:
            assert t.version() == "TLSv1.3"
        anonymous = ssl.create_default_context(cafile=admin_conf["ssl.ca.location"])
        with socket.create_connection(("127.0.0.1", raft), timeout=5) as s:
            try:
                with anonymous.wrap_socket(s, server_hostname="127.0.0.1") as t:
                    t.sendall(b"x")
                    got = t.recv(1)  # TLS 1.3: the refusal comes after the client's handshake
            except TimeoutError:
                pytest.fail("a client without a certificate stayed connected")
            except (ssl.SSLError, ConnectionError):
                got = b""
            assert got == b""
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
