"""The README and its docs stay in sync with the code: the README's first lines, every setting
(docs/configuration.md), every advertised API (docs/compatibility.md)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from cluster.apis.groups import RANGES
from cluster.config import KAFKA_NAMES, NodeConfig
from cluster.metrics import api_name

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"


def text() -> str:
    return README.read_text()


def test_readme_starts_with_exactly_make_run_and_make_test() -> None:
    lines = text().splitlines()
    assert lines[:4] == ["```", "make run", "make test", "```"]


def test_every_setting_is_in_the_configuration_reference() -> None:
    section = (DOCS / "configuration.md").read_text()
    for f in dataclasses.fields(NodeConfig):
        if f.name == "extra":
            continue
        row = next((ln for ln in section.splitlines() if ln.startswith(f"| `{f.name}` |")), None)
        assert row is not None, f"setting {f.name} missing from docs/configuration.md"
        assert f"`KCOORD_{f.name.upper()}`" in row
        if f.name in KAFKA_NAMES:
            assert f"`{KAFKA_NAMES[f.name]}`" in row, f.name
        default = f.default
        if isinstance(default, bool):
            assert f"`{str(default).lower()}`" in row, f.name
        elif isinstance(default, int):
            assert f"`{default}`" in row, f.name


def test_group_api_versions_in_the_compatibility_table_match_the_registry() -> None:
    section = (DOCS / "compatibility.md").read_text().split("## APIs and versions", 1)[1].split("\n## ", 1)[0]
    for key, (lo, hi) in RANGES.items():
        m = re.search(rf"^\| {api_name(key)} \| {key} \| (\d+)–(\d+) \|$", section, re.M)
        assert m is not None, f"API {api_name(key)} missing from docs/compatibility.md"
        assert (int(m.group(1)), int(m.group(2))) == (lo, hi), api_name(key)


def test_placeholders_for_the_lead() -> None:
    t = text()
    assert "(docs/performance.md)" in t and "(docs/chaos.md)" in t
    assert (DOCS / "performance.md").read_text().startswith("# Performance\n")
    assert (DOCS / "chaos.md").read_text().startswith("# Chaos testing\n")
