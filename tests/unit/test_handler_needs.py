"""Handlers receive the few services they use: every API module types its node as a protocol of
the roles it needs (``cluster/services.py``), so mypy holds it to those, and none reaches past it
through the request's context."""

from __future__ import annotations

import re
from pathlib import Path

APIS = Path(__file__).resolve().parents[2] / "cluster" / "apis"


def test_every_api_module_names_the_roles_it_uses_and_reaches_no_further() -> None:
    checked = 0
    for f in sorted(APIS.glob("*.py")):
        src = f.read_text()
        if f.name == "__init__.py" or "node" not in src:
            continue
        checked += 1
        assert "NodeServices" not in src, f"{f.name}: types a node as the whole NodeServices"
        assert not re.search(r"ctx\.node\.", src), f"{f.name}: reaches the node through ctx.node.<...>"
        for use in re.findall(r"^.*\bctx\.node\b.*$", src, re.M):
            assert re.search(r"node: Needs = (self\.)?ctx\.node$", use.strip()), f"{f.name}: {use.strip()}"
        if re.search(r"\bnode: ", src):
            assert re.search(r"^class Needs\(", src, re.M), f"{f.name}: no Needs protocol"
    assert checked >= 15
