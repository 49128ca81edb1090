"""Compact ``key=value`` log lines on stderr."""

from __future__ import annotations

import logging
import re
import sys
import time
from collections.abc import Iterable

_PLAIN = re.compile(r"[A-Za-z0-9_.:/@+-]+")


class KeyValueFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        ts = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created)) + f".{int(record.msecs):03d}Z"
        msg = record.getMessage()
        if not msg.startswith("event="):
            msg = f"msg={msg!r}"
        line = f"ts={ts} level={record.levelname.lower()} logger={record.name} {msg}"
        if record.exc_info:
            line += " exc=" + repr(self.formatException(record.exc_info))
        return line


def fmt_fields(fields: Iterable[tuple[str, object]]) -> str:
    """``k=v`` pairs; a value that is not plain (a client's group id with spaces, quotes or a
    newline) is quoted, so one event stays one line."""
    return " ".join(f"{k}={v}" if _PLAIN.fullmatch(str(v)) else f"{k}={str(v)!r}" for k, v in fields)


def setup_logging(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(KeyValueFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
