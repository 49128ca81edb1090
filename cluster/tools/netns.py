"""Nodes on their own addresses, in network namespaces: a local stand-in for separate hosts.

One namespace per node (``<prefix>-n<i>``, address ``<subnet>.<11+i>``, a single ``eth0``),
plugged into a bridge that lives in a namespace of its own (``<prefix>-hub``), plus one veth
in the root namespace (``<prefix>-host``, ``<subnet>.1``) so that clients here reach every
node. No forwarding is enabled anywhere: a node can reach the other nodes and the host side,
nothing else. Every node uses the same ports on its own address, as on real hosts.

Needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) and ``ip``; :func:`unavailable` says why not.
A layout is claimed in a slot (prefix ``kc<slot>``, subnet ``10.213.<100+slot>``); the claim
file in :data:`STATE_DIR` names the owning pid, and a later claim tears down any slot whose
owner is gone, so a crash leaves nothing behind for long. Teardown kills what runs inside a
namespace before deleting it (a deleted name alone keeps a namespace with live processes).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

STATE_DIR = Path("/run/kcoord-netns")
SLOTS = 100
FIRST_HOST = 11  # node i is <subnet>.<FIRST_HOST + i>


@dataclass(frozen=True, slots=True)
class NetLayout:
    prefix: str  # "kc7": namespaces kc7-hub, kc7-n0.., root-side veth kc7-host
    subnet: str  # "10.213.107": a /24
    nodes: int

    def ns(self, i: int) -> str:
        return f"{self.prefix}-n{i}"

    @property
    def hub(self) -> str:
        return f"{self.prefix}-hub"

    @property
    def host_link(self) -> str:
        return f"{self.prefix}-host"

    def addr(self, i: int) -> str:
        return f"{self.subnet}.{FIRST_HOST + i}"

    @property
    def host_addr(self) -> str:
        return f"{self.subnet}.1"

    def run_in(self, i: int) -> list[str]:
        """The command prefix that runs a program inside node ``i``'s namespace (it execs, so
        the pid a caller gets is the program's own)."""
        return ["ip", "netns", "exec", self.ns(i)]

    def to_json(self) -> dict[str, object]:
        return {"prefix": self.prefix, "subnet": self.subnet, "nodes": self.nodes}


def unavailable() -> str | None:
    """Why namespaces cannot be used here, or None when they can."""
    if os.geteuid() != 0:
        return "network namespaces need root (CAP_NET_ADMIN, CAP_SYS_ADMIN)"
    if shutil.which("ip") is None:
        return "the `ip` command (iproute2) is not installed"
    return None


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)}: {proc.stderr.strip() or proc.returncode}")
    return proc


def _namespaces() -> list[str]:
    out = _ip("netns", "list", check=False).stdout
    return [line.split()[0] for line in out.splitlines() if line.strip()]


def _routed(subnet: str) -> bool:
    """Does this namespace already route somewhere inside ``subnet``.0/24 (other than by default)?"""
    out = _ip("-4", "route", "show", check=False).stdout
    return any(line.split()[0].startswith(subnet + ".") for line in out.splitlines()
               if line.strip() and not line.startswith("default"))


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def teardown(prefix: str) -> None:
    """Remove everything of ``prefix``: kill what runs in its namespaces, then delete them
    and the root-side veth. Idempotent."""
    mine = [ns for ns in _namespaces() if ns.startswith(prefix + "-")]
    for sig in (signal.SIGTERM, signal.SIGKILL):
        pids = [int(p) for ns in mine for p in _ip("netns", "pids", ns, check=False).stdout.split() if p.isdigit()]
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
        if pids and sig == signal.SIGTERM:
            time.sleep(0.5)
    for ns in mine:
        _ip("netns", "del", ns, check=False)
    _ip("link", "del", f"{prefix}-host", check=False)
    with contextlib.suppress(FileNotFoundError):
        (STATE_DIR / f"{prefix}.json").unlink()


def reap_stale() -> list[str]:
    """Tear down every slot whose owner process is gone (or whose claim file is missing)."""
    reaped = []
    claimed: dict[str, int] = {}
    for f in STATE_DIR.glob("kc*.json") if STATE_DIR.exists() else []:
        with contextlib.suppress(OSError, ValueError, KeyError):
            claimed[f.stem] = int(json.loads(f.read_text())["owner"])
    prefixes = {ns.split("-", 1)[0] for ns in _namespaces() if ns.startswith("kc") and "-" in ns}
    for prefix in sorted(prefixes | set(claimed)):
        if not prefix[2:].isdigit():
            continue
        owner = claimed.get(prefix)
        if owner is None or not _alive(owner):
            teardown(prefix)
            reaped.append(prefix)
    return reaped


def running() -> list[NetLayout]:
    """The layouts claimed by live processes (``kcoord up --netns``, chaos runs)."""
    found = []
    for f in sorted(STATE_DIR.glob("kc*.json")) if STATE_DIR.exists() else []:
        with contextlib.suppress(OSError, ValueError, KeyError):
            d = json.loads(f.read_text())
            if _alive(int(d["owner"])):
                found.append(NetLayout(str(d["prefix"]), str(d["subnet"]), int(d["nodes"])))
    return found


def claim(nodes: int, owner: int | None = None) -> NetLayout:
    """Reserve a free slot for ``owner`` (default: this process) and record the claim."""
    reap_stale()
    STATE_DIR.mkdir(parents=True, exist_ok=True)
    taken = {ns.split("-", 1)[0] for ns in _namespaces()}
    for slot in range(SLOTS):
        layout = NetLayout(f"kc{slot}", f"10.213.{100 + slot}", nodes)
        if layout.prefix in taken or _routed(layout.subnet):
            continue
        path = STATE_DIR / f"{layout.prefix}.json"
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        with os.fdopen(fd, "w") as fh:
            json.dump({**layout.to_json(), "owner": owner or os.getpid()}, fh)
        return layout
    raise RuntimeError("no free network-namespace slot (kc0..kc99)")


def build(layout: NetLayout) -> None:
    """Create the namespaces, the bridge and the veths (about 0.1 s); on failure, undo."""
    try:
        _ip("netns", "add", layout.hub)
        _ip("-n", layout.hub, "link", "set", "lo", "up")
        _ip("-n", layout.hub, "link", "add", "br0", "type", "bridge")
        _ip("-n", layout.hub, "link", "set", "br0", "up")
        for i in range(layout.nodes):
            ns = layout.ns(i)
            _ip("netns", "add", ns)
            _ip("-n", ns, "link", "set", "lo", "up")
            _ip("-n", layout.hub, "link", "add", f"n{i}", "type", "veth", "peer", "name", "eth0", "netns", ns)
            _ip("-n", layout.hub, "link", "set", f"n{i}", "master", "br0", "up")
            _ip("-n", ns, "addr", "add", f"{layout.addr(i)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
        _ip("link", "add", layout.host_link, "type", "veth", "peer", "name", "host", "netns", layout.hub)
        _ip("-n", layout.hub, "link", "set", "host", "master", "br0", "up")
        _ip("addr", "add", f"{layout.host_addr}/24", "dev", layout.host_link)
        _ip("link", "set", layout.host_link, "up")
        check_route(layout)
    except BaseException:
        teardown(layout.prefix)
        raise


def check_route(layout: NetLayout) -> None:
    """Refuse to go on unless traffic to the nodes leaves through our veth: with the veth
    missing, the default route would send it off the machine."""
    for i in range(layout.nodes):
        out = _ip("route", "get", layout.addr(i), check=False).stdout
        if f"dev {layout.host_link}" not in out:
            raise RuntimeError(f"{layout.addr(i)} is not routed through {layout.host_link}: {out.strip()!r}")


def up(nodes: int, owner: int | None = None) -> NetLayout:
    """Claim a slot and build it."""
    layout = claim(nodes, owner)
    build(layout)
    return layout
