"""Figures, the rich table, the JSON line and the progress display of a bench run."""

from __future__ import annotations

import contextlib
import json
import math
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, SpinnerColumn, TextColumn, TimeElapsedColumn
from rich.table import Table


def percentile(values: Sequence[float], q: float) -> float | None:
    """Nearest-rank percentile (q in 0..100) of ``values``; None when empty."""
    if not values:
        return None
    s = sorted(values)
    k = max(0, min(len(s) - 1, math.ceil(q / 100.0 * len(s)) - 1))
    return float(s[k])


def rnd(x: float | None, nd: int = 2) -> float | None:
    return None if x is None else round(float(x), nd)


@dataclass(frozen=True, slots=True)
class Metric:
    key: str
    label: str
    unit: str = ""
    better: str = "higher"  # "higher", "lower" or "" (informational)


class Reporter:
    """Progress on stderr (rich), the table on stdout, the JSON line last on stdout."""

    def __init__(self, quiet: bool = False) -> None:
        self.err = Console(stderr=True)
        self.out = Console(file=sys.stdout, soft_wrap=True)
        self.quiet = quiet

    def note(self, text: str) -> None:
        if not self.quiet:
            self.err.print(f"[dim]{text}[/dim]", highlight=False)

    @contextlib.contextmanager
    def phase(self, label: str, seconds: float | None = None,
              count: Callable[[], int] | None = None, unit: str = "") -> Iterator[None]:
        """Show a phase while it runs: a timed bar when ``seconds`` is known, live count and rate."""
        if self.quiet:
            yield
            return
        cols: list[Any] = [SpinnerColumn(), TextColumn("{task.description}")]
        if seconds:
            cols.append(BarColumn())
        cols += [TimeElapsedColumn(), TextColumn("{task.fields[extra]}")]
        stop = threading.Event()
        with Progress(*cols, console=self.err, transient=False) as prog:
            task = prog.add_task(label, total=seconds or None, extra="")
            t0 = time.monotonic()

            def tick() -> None:
                last_n, last_t = 0, t0
                while not stop.wait(0.5):
                    now = time.monotonic()
                    extra = ""
                    if count is not None:
                        n = count()
                        rate = (n - last_n) / max(now - last_t, 1e-6)
                        last_n, last_t = n, now
                        extra = f"{n:,} {unit} ({rate:,.0f}/s)"
                    prog.update(task, completed=min(now - t0, seconds) if seconds else None, extra=extra)

            th = threading.Thread(target=tick, daemon=True)
            th.start()
            try:
                yield
            finally:
                stop.set()
                th.join()
                prog.update(task, completed=seconds if seconds else None)

    def table(self, title: str, metrics: Sequence[Metric], results: dict[str, dict[str, Any]],
              ratios: dict[str, float | None], subject: str, peer: str | None) -> None:
        t = Table(title=title, title_justify="left")
        t.add_column("metric")
        for name in results:
            t.add_column(name, justify="right")
        if peer is not None:
            t.add_column(f"{subject}/{peer}", justify="right")
        for m in metrics:
            row = [f"{m.label}" + (f" ({m.unit})" if m.unit else "")]
            for name in results:
                row.append(fmt(results[name].get(m.key)))
            if peer is not None:
                r = ratios.get(m.key)
                row.append("" if r is None else _ratio_cell(r, m.better))
            t.add_row(*row)
        self.out.print(t)

    def json_line(self, payload: dict[str, Any]) -> None:
        sys.stdout.flush()
        print(json.dumps(payload, sort_keys=False), flush=True)


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return "yes" if v else "no"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:,.2f}"
    if isinstance(v, int):
        return f"{v:,}"
    return str(v)


def _ratio_cell(r: float, better: str) -> str:
    good = (r >= 1.0) if better == "higher" else (r <= 1.0) if better == "lower" else None
    color = "" if good is None else ("green" if good else "red")
    text = f"{r:.2f}x"
    return f"[{color}]{text}[/{color}]" if color else text


def ratios_of(metrics: Sequence[Metric], results: dict[str, dict[str, Any]], subject: str,
              peer: str | None) -> dict[str, float | None]:
    """subject value / peer value for every numeric metric (None where either is missing or 0)."""
    if peer is None:
        return {}
    out: dict[str, float | None] = {}
    a, b = results.get(subject, {}), results.get(peer, {})
    for m in metrics:
        x, y = a.get(m.key), b.get(m.key)
        if isinstance(x, bool) or isinstance(y, bool) or not isinstance(x, int | float) \
                or not isinstance(y, int | float) or y == 0:
            out[m.key] = None
        else:
            out[m.key] = round(x / y, 3)
    return out
