"""Render a checker Report: summary.json, summary.txt and index.html (matplotlib PNGs inlined)."""

from __future__ import annotations

import base64
import html
import io
import json
import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from chaos.check.model import Report

STATUS_MARK = {"pass": "PASS", "fail": "FAIL", "skipped": "SKIP", "inconclusive": "????"}


def text_summary(report: Report) -> str:
    lines = [f"kcoord chaos check: {report.run_dir}",
             f"verdict: {'OK' if report.ok else 'INVARIANT VIOLATED'}   events: {report.stats.get('events')}   "
             f"fault windows: {len(report.faults)}   checked in {report.timings.get('total')} s "
             f"({report.stats.get('master')})", ""]
    for v in report.verdicts.values():
        lines.append(f"  [{STATUS_MARK.get(v.status, v.status)}] {v.id} {v.title}"
                     + (f": {v.violations} violation(s)" if v.violations else ""))
        for ce in v.counterexamples[:3]:
            lines.append("         e.g. " + json.dumps(ce, default=str)[:300])
    if report.partition_faults:
        lines += ["", "network partitions (cut -> cut-off node gave up its last partition; cut -> first commit "
                  "acknowledged, groups whose coordinator was cut off):"]
        for r in report.partition_faults:
            served = {g: v["served_s"] for g, v in r["groups"].items() if v["coordinator_cut_off"]}
            lines.append(f"  #{r['id']} {r['kind']} at {r['start']:.1f}s for {r['length_s']:.1f}s ({r['net']}): "
                         f"cut off {r['cut_off'] or '-'}, stepped down {r['stepped_down_s'] or '-'}, "
                         f"served {served or '-'}")
    learners = report.stats.get("learners") or []
    if learners:
        lines += ["", "new replicas (a node back on an empty disk: learner from, promoted at, catch-up time):"]
        for r in learners:
            promoted = "never" if r.get("promoted_t") is None else f"{r['promoted_t']:.1f}s ({r['caught_up_s']} s)"
            since = "?" if r.get("learner_t") is None else f"{r['learner_t']:.1f}s"
            lines.append(f"  node {r['node']} directory {str(r['directory'])[:8]}: learner from {since}, promoted {promoted}")
    joins = report.stats.get("joins") or []
    if joins:
        lines += ["", "nodes that joined (started at; then a learner in every group, promoted once caught up):"]
        for r in joins:
            took = "never voted everywhere" if r.get("promoted_s") is None else f"voted in every group after {r['promoted_s']} s"
            lines.append(f"  node {r['node']} at {r['t']:.1f}s: {took}")
    return "\n".join(lines) + "\n"


def write_report(report: Report, out_dir: str) -> None:
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "summary.json"), "w", encoding="utf-8") as fh:
        json.dump(report.to_dict(), fh, indent=2, default=str)
    with open(os.path.join(out_dir, "summary.txt"), "w", encoding="utf-8") as fh:
        fh.write(text_summary(report))
    with open(os.path.join(out_dir, "index.html"), "w", encoding="utf-8") as fh:
        fh.write(render_html(report))


def _png(fig: Any) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=90, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _shade(ax: Any, faults: list[dict[str, Any]]) -> None:
    for w in faults:
        end = w["end"] if w["end"] > w["start"] else w["start"] + 0.5
        ax.axvspan(w["start"], end, color="tab:red", alpha=0.12, lw=0)


def plots(report: Report) -> dict[str, str]:
    """name -> base64 PNG; empty when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return {}
    data = report.plots
    faults = data.get("faults", [])
    out: dict[str, str] = {}

    fig, ax = plt.subplots(figsize=(11, 3.6))
    lat = data.get("latency", [])
    okp = [(t, d * 1000) for t, d, s in lat if s == "ok" and d is not None]
    if okp:
        ax.scatter([p[0] for p in okp], [p[1] for p in okp], s=3, alpha=0.5, label="ok")
    for status, color in (("unknown", "tab:orange"), ("fail", "tab:red")):
        pts = [(t, d * 1000 if d is not None else None) for t, d, s in lat if s == status]
        if pts:
            top = max([p[1] for p in okp] or [1.0])
            ax.scatter([p[0] for p in pts], [p[1] if p[1] is not None else top for p in pts], s=12, marker="x",
                       color=color, label=status)
    _shade(ax, faults)
    ax.set_yscale("log")
    ax.set_xlabel("run time (s)")
    ax.set_ylabel("commit latency (ms)")
    ax.set_title("OffsetCommit latency" + (" (sampled)" if data.get("latency_sampled") else "")
                 + "; fault windows shaded")
    ax.legend(loc="upper right", fontsize=8)
    out["commit_latency"] = _png(fig)

    fo = [d for d in data.get("failovers", []) if d.get("failover") is not None]
    if fo:
        fig, ax = plt.subplots(figsize=(11, 3.2))
        ax.bar(range(len(fo)), [d["failover"] for d in fo], color="tab:purple")
        ax.set_xticks(range(len(fo)), [f"{d['type']}\n{d['node'] or ''}@{d['start']:.0f}s" for d in fo],
                      fontsize=7)
        ax.set_ylabel("s to next acked commit")
        ax.set_title("Failover duration per fault (slowest group)")
        out["failover"] = _png(fig)

    gens = data.get("generations", [])
    if gens:
        groups = sorted({g["group"] for g in gens})[:40]
        fig, ax = plt.subplots(figsize=(11, max(2.0, 0.35 * len(groups) + 1)))
        for i, grp in enumerate(groups):
            ts = [g["t"] for g in gens if g["group"] == grp]
            ax.scatter(ts, [i] * len(ts), s=14, marker="|", color="tab:blue")
        _shade(ax, faults)
        ax.set_yticks(range(len(groups)), groups, fontsize=7)
        ax.set_xlabel("run time (s)")
        ax.set_title("Rebalances (first assignment of each generation) per group")
        out["rebalances"] = _png(fig)
    return out


def render_html(report: Report) -> str:
    esc = html.escape
    rows = []
    for v in report.verdicts.values():
        color = {"pass": "#2a2", "fail": "#c22", "skipped": "#888", "inconclusive": "#c80"}.get(v.status, "#000")
        ces = "".join(f"<li><code>{esc(json.dumps(ce, default=str))}</code></li>" for ce in v.counterexamples)
        notes = "".join(f"<li>{esc(n)}</li>" for n in v.notes)
        rows.append(f"<tr><td>{v.id}</td><td>{esc(v.title)}</td><td style='color:{color};font-weight:bold'>"
                    f"{v.status.upper()}</td><td>{v.violations}</td><td><ul>{ces}</ul>"
                    f"<ul style='color:#666'>{notes}</ul></td></tr>")
    imgs = "".join(f"<h3>{esc(k)}</h3><img src='data:image/png;base64,{b}'/>" for k, b in plots(report).items())
    faults = "".join(f"<tr><td>{w['id']}</td><td>{esc(str(w['type']))}</td><td>{esc(str(w['node']))}</td>"
                     f"<td>{w['start']:.2f}</td><td>{w['end']:.2f}</td></tr>" for w in report.faults)
    cuts = "".join(
        f"<tr><td>{r['id']}</td><td>{esc(str(r['kind']))}</td><td>{r['start']:.2f}</td><td>{r['length_s']:.2f}</td>"
        f"<td>{esc(str(r['cut_off']))}</td><td>{esc(json.dumps(r['stepped_down_s']))}</td>"
        f"<td>{esc(json.dumps({g: v['served_s'] for g, v in r['groups'].items() if v['coordinator_cut_off']}))}"
        f"</td><td>{esc(json.dumps({g: v['served_s'] for g, v in r['groups'].items()}))}</td></tr>"
        for r in report.partition_faults)
    cut_table = ("<h3>network partitions</h3><table><tr><th>id</th><th>kind</th><th>start</th><th>length</th>"
                 "<th>cut off</th><th>stepped down after (s)</th><th>cut-off groups served after (s)</th>"
                 f"<th>all groups (s)</th></tr>{cuts}</table>") if cuts else ""
    return f"""<!doctype html><html><head><meta charset="utf-8"><title>kcoord chaos check</title>
<style>body{{font-family:sans-serif;margin:1.5em}} td{{vertical-align:top;border-top:1px solid #ddd;padding:4px}}
code{{font-size:11px}}</style></head><body>
<h1>kcoord chaos check: {'OK' if report.ok else 'INVARIANT VIOLATED'}</h1>
<p>{esc(report.run_dir)} &mdash; {report.stats.get('events')} events, {len(report.faults)} fault windows,
checked in {report.timings.get('total')} s on {esc(str(report.stats.get('master')))}</p>
<table><tr><th>id</th><th>invariant</th><th>verdict</th><th>violations</th><th>counterexamples / notes</th></tr>
{''.join(rows)}</table>
{imgs}
<h3>fault windows</h3><table><tr><th>id</th><th>type</th><th>node</th><th>start</th><th>end</th></tr>{faults}</table>
{cut_table}
<h3>stats</h3><pre>{esc(json.dumps(report.stats, indent=2, default=str))}</pre>
<h3>timings (s)</h3><pre>{esc(json.dumps(report.timings, indent=2))}</pre>
</body></html>
"""
