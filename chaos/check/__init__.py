"""``kcoord chaos check``: the PySpark checker of a chaos run's history (see chaos/check/job.py).

Importing this package does not import pyspark; ``run_check`` does.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chaos.check.model import Report


def run_check(run_dir: str, master: str | None = "local[*]", out_dir: str | None = None, **kw: Any) -> Report:
    from chaos.check.job import run_check as _run

    return _run(run_dir, master=master, out_dir=out_dir, **kw)


__all__ = ["run_check"]
