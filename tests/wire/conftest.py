from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.cluster.harness import NodeProcess


@pytest.fixture
def kcoord_node(tmp_path, request) -> Iterator[NodeProcess]:
    """A fresh single node; yields the NodeProcess (``.bootstrap`` is the address)."""
    node = NodeProcess(tmp_path).start()
    yield node
    node.kill()
    rep = getattr(request.node, "rep_call", None)
    if rep is not None and rep.failed:
        print(f"--- node log ---\n{node.log_text()[-5000:]}")


@pytest.fixture
def bootstrap(kcoord_node: NodeProcess) -> str:
    return kcoord_node.bootstrap


@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
