"""The README and docs/ stay readable and true: short README, links that resolve, no internal
references, and a configuration page generated from the code."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cluster import config_doc

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
PAGES = sorted([README, ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])

_FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
_INLINE_CODE = re.compile(r"`[^`\n]*`")
_LINK = re.compile(r"(?<!!)\[[^\]\n]*\]\(([^)\s]+)\)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$", re.M)


def _name(page: Path) -> str:
    return str(page.relative_to(ROOT))


def prose(text: str) -> str:
    """The text without fenced code blocks and inline code."""
    return _INLINE_CODE.sub("", _FENCE.sub("", text))


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "").lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for m in _HEADING.finditer(_FENCE.sub("", page.read_text())):
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else f"{base}-{n}")
    return out


def links(page: Path) -> list[str]:
    return _LINK.findall(prose(page.read_text()))


def test_the_readme_is_under_300_lines() -> None:
    assert len(README.read_text().splitlines()) < 300


def test_the_docs_index_lists_every_page_under_docs() -> None:
    listed = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    missing = [_name(p) for p in (ROOT / "docs").rglob("*.md") if p.resolve() not in listed]
    assert not missing, f"README links none of {missing}"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_every_relative_link_resolves_inside_the_repository(page: Path) -> None:
    bad = []
    for target in links(page):
        path, _, anchor = target.partition("#")
        if re.match(r"^[a-z][a-z0-9+.-]*:", path):
            bad.append(f"{target}: links outside the repository")
            continue
        dest = (page.parent / path).resolve() if path else page.resolve()
        if not dest.is_relative_to(ROOT):
            bad.append(f"{target}: outside the repository")
        elif not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest):
            bad.append(f"{target}: no heading #{anchor} in {_name(dest)}")
    assert not bad, f"{_name(page)}: " + "; ".join(bad)


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_code_fences_are_closed(page: Path) -> None:
    fences = [ln for ln in page.read_text().splitlines() if ln.lstrip().startswith("```")]
    assert len(fences) % 2 == 0, f"{_name(page)}: a code block is not closed"
    assert "```\n```" not in page.read_text(), f"{_name(page)}: an empty code block (a doubled fence?)"


@pytest.mark.parametrize("page", PAGES, ids=_name)
def test_no_internal_references(page: Path) -> None:
    text = page.read_text()
    assert "../shared" not in text
    assert not re.findall(r"(?i)\bissues? \d+", text), "internal issue numbers"
    # "#31" alone is an internal issue; owner/repo#31 names an outside project's, and is kept.
    assert not re.findall(r"(?<![\w/])#\d+\b", prose(text)), "internal issue numbers"


def test_every_setting_has_a_description() -> None:
    names = {f.name for f in config_doc.settings()}
    assert names - set(config_doc.DESCRIPTIONS) == set(), "describe them in cluster/config_doc.py"
    assert set(config_doc.DESCRIPTIONS) - names == set(), "descriptions of settings that are gone"
    assert all(d.strip() and "\n" not in d for d in config_doc.DESCRIPTIONS.values())


def test_the_configuration_page_is_current() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert page == config_doc.render(), (
        "docs/configuration.md is stale: run `python -m cluster.config_doc > docs/configuration.md`")


def test_the_configuration_page_names_every_setting_its_env_var_and_kafka_name() -> None:
    page = (ROOT / "docs" / "configuration.md").read_text()
    for f in config_doc.settings():
        row = next((ln for ln in page.splitlines() if ln.startswith(f"| `{f.name}` |")), None)
        assert row is not None, f.name
        assert f"`KCOORD_{f.name.upper()}`" in row
        kafka = config_doc.kafka_name(f.name)
        assert kafka is None or f"`{kafka}`" in row, f.name
