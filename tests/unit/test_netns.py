"""Network namespaces for nodes (cluster/tools/netns.py) and the nftables faults between them
(cluster/tools/netns_faults.py): the rules as text, and (as root) a real topology probed with
sockets: who reaches whom under each fault, and that nothing is left behind."""

from __future__ import annotations

import json
import subprocess
import sys
import time

import pytest

from cluster.tools import netns, netns_faults
from cluster.tools.netns import NetLayout

WHY = netns.unavailable() or netns_faults.unavailable()
LAYOUT = NetLayout("kc9", "10.213.109", 3)


def test_rules_render_cuts_loss_and_client_modes() -> None:
    r = netns_faults.NodeRules(drop_from=frozenset({"10.0.0.2", "10.0.0.3"}), drop_to=frozenset({"10.0.0.3"}),
                               loss_from={"10.0.0.2": 30}, clients="reject", client_port=9092).render()
    assert "ip saddr { 10.0.0.2, 10.0.0.3 } drop" in r
    assert "ip daddr { 10.0.0.3 } drop" in r
    assert "ip saddr 10.0.0.2 numgen random mod 100 < 30 drop" in r
    assert "tcp dport 9092 reject with tcp reset" in r
    # replaces any previous table in one transaction
    assert r.splitlines()[:3] == ["table inet kcoord", "delete table inet kcoord", "table inet kcoord {"]
    empty = netns_faults.NodeRules().render()
    assert "drop" not in empty and "reject" not in empty
    with pytest.raises(ValueError):
        netns_faults.NodeRules(loss_from={"10.0.0.2": 130}).render()
    with pytest.raises(ValueError):
        netns_faults.NodeRules(clients="sometimes").render()


def test_plans_isolate_split_and_bridge() -> None:
    iso = netns_faults.isolate(LAYOUT, 0)
    assert iso[0].drop_from == {LAYOUT.addr(1), LAYOUT.addr(2)} == iso[0].drop_to
    assert iso[1].drop_from == {LAYOUT.addr(0)} and iso[2].drop_to == {LAYOUT.addr(0)}
    assert netns_faults.split(LAYOUT, [2]) == netns_faults.isolate(LAYOUT, 2)
    br = netns_faults.bridge(LAYOUT, 0, 2)
    assert set(br) == {0, 2} and br[0].drop_from == {LAYOUT.addr(2)} and br[2].drop_to == {LAYOUT.addr(0)}


_SERVE = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind((sys.argv[1], 9092)); s.listen()
while True:
    c, _ = s.accept(); c.sendall(b"ok"); c.close()
"""
_PROBE = """
import socket, sys
try:
    print(socket.create_connection((sys.argv[1], 9092), timeout=0.4).recv(2).decode())
except OSError:
    print("x")
"""


def _grid(net: NetLayout) -> tuple[str, list[str]]:
    """What the host reaches ('ok'/'x' per node), and for each node what it reaches of the others."""
    def probe(frm: int | None, to: int) -> str:
        cmd = [*(net.run_in(frm) if frm is not None else []), sys.executable, "-c", _PROBE, net.addr(to)]
        ok = subprocess.run(cmd, capture_output=True, text=True, timeout=20).stdout.strip() == "ok"
        return "1" if ok else "0"

    host = "".join(probe(None, j) for j in range(net.nodes))
    return host, ["".join(probe(i, j) for j in range(net.nodes) if j != i) for i in range(net.nodes)]


@pytest.mark.skipif(WHY is not None, reason=WHY or "")
def test_a_namespaced_topology_under_faults_and_its_cleanup() -> None:
    net = netns.up(3)
    servers = []
    try:
        servers = [subprocess.Popen([*net.run_in(i), sys.executable, "-c", _SERVE, net.addr(i)]) for i in range(3)]
        time.sleep(0.5)
        assert _grid(net) == ("111", ["11", "11", "11"])
        # a node cannot reach anything beyond the layout (no forwarding, no default route)
        out = subprocess.run([*net.run_in(0), sys.executable, "-c", _PROBE, "192.0.2.1"], capture_output=True,
                             text=True, timeout=20).stdout.strip()
        assert out == "x"
        netns_faults.apply_plan(net, netns_faults.isolate(net, 0))
        assert _grid(net) == ("111", ["00", "01", "01"])  # clients still reach node 0
        netns_faults.apply_plan(net, netns_faults.bridge(net, 0, 2))
        assert _grid(net) == ("111", ["10", "11", "01"])
        netns_faults.apply_plan(net, {1: netns_faults.NodeRules(clients="drop")})
        assert _grid(net)[0] == "101"
        netns_faults.apply_plan(net, {})
        assert _grid(net) == ("111", ["11", "11", "11"])
        assert net in netns.running()
    finally:
        netns.teardown(net.prefix)
    for s in servers:
        s.wait(10)  # teardown killed what ran inside
    assert net not in netns.running()
    names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert f"{net.prefix}-" not in names
    assert net.host_link not in subprocess.run(["ip", "link"], capture_output=True, text=True).stdout


@pytest.mark.skipif(WHY is not None, reason=WHY or "")
def test_a_slot_whose_owner_died_is_reaped_by_the_next_claim() -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    stale = netns.up(3, owner=dead.pid)  # as if its runner crashed without cleaning up
    claim = json.loads((netns.STATE_DIR / f"{stale.prefix}.json").read_text())
    assert claim["owner"] == dead.pid
    fresh = netns.claim(3)
    try:
        names = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
        assert f"{stale.prefix}-hub" not in names or fresh.prefix == stale.prefix
        assert not (netns.STATE_DIR / f"{stale.prefix}.json").exists() or fresh.prefix == stale.prefix
    finally:
        netns.teardown(fresh.prefix)
