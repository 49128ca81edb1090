"""Config values parsed as Kafka's ``ConfigDef`` parses them (Java's ``trim``, ``Long.parseLong``,
``Double.parseDouble``, ``Boolean`` by name), ASCII only: Python's ``int``, ``float`` and ``strip``
follow the interpreter's Unicode tables (other digits, other spaces, underscores), so two nodes on
two Python versions could fold one metadata record differently."""

from __future__ import annotations

import re

_LONG = re.compile(r"[+-]?[0-9]+")
_DOUBLE = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


def trim(text: str) -> str:
    """Java's ``String.trim``: every character up to U+0020 off both ends, nothing else."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_long(text: str) -> int | None:
    """The integer ``text`` writes (None: not one). Its range is the caller's to check."""
    t = trim(text)
    return int(t) if len(t) <= 40 and _LONG.fullmatch(t) else None


def parse_double(text: str) -> float | None:
    t = trim(text)
    return float(t) if len(t) <= 40 and _DOUBLE.fullmatch(t) else None


def parse_bool(text: str) -> bool | None:
    t = trim(text)
    return {"true": True, "false": False}.get(t.lower() if t.isascii() else t)
