"""How values read on the pages: ages, times, counts that may be estimates,
JSON, the throughput chart and a workflow's graph (SVGs drawn here, so the
page needs no script to show them). Every string built here is escaped before it reaches
markup; the templates escape everything else."""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from markupsafe import Markup, escape

from ..queue.browse import Count, Minute
from ..queue.model import JobStatus
from ..queue.workflows import WorkflowJob

CHART_WIDTH: Final = 720
CHART_HEIGHT: Final = 140
JSON_SHOWN_CHARS: Final = 100_000  # a job page shows this much of a payload or result


def age(seconds: float | None) -> str:
    """`4s`, `3m 12s`, `2h 5m`, `3d 4h`; `-` for None."""
    if seconds is None:
        return "-"
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


def when(value: dt.datetime | None) -> str:
    """A time in UTC to the second; `-` for None."""
    if value is None:
        return "-"
    return value.astimezone(dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def count(value: Count) -> str:
    """An exact count as is; an estimate as `about N`."""
    return f"{value.value:,}" if value.exact else f"about {value.value:,}"


def pretty_json(value: Any) -> str:
    """Indented JSON, cut to `JSON_SHOWN_CHARS` characters."""
    text = json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)
    if len(text) > JSON_SHOWN_CHARS:
        return text[:JSON_SHOWN_CHARS] + f"\n… ({len(text):,} characters in all)"
    return text


def query(params: Mapping[str, Any]) -> str:
    """A query string from the non-empty values."""
    return urllib.parse.urlencode({k: v for k, v in params.items() if v not in (None, "")})


def trace_id(meta: Mapping[str, Any] | None) -> str | None:
    """The W3C trace id in a job's meta (its `traceparent`), if there is one."""
    carrier = (meta or {}).get("trace")
    parent = carrier.get("traceparent") if isinstance(carrier, Mapping) else None
    if not isinstance(parent, str):
        return None
    parts = parent.split("-")
    return parts[1] if len(parts) == 4 and len(parts[1]) == 32 else None


def throughput_svg(minutes: Sequence[Minute]) -> Markup:
    """Completed (stacked under dead) jobs per minute as an SVG bar chart,
    oldest minute on the left; each bar has a title with its figures."""
    top = max((m.completed + m.dead for m in minutes), default=0) or 1
    slot = CHART_WIDTH / max(len(minutes), 1)
    plot = CHART_HEIGHT - 20
    bars: list[str] = []
    for i, m in enumerate(minutes):
        x = i * slot
        done_h = plot * m.completed / top
        dead_h = plot * m.dead / top
        about = "" if m.exact else "about "
        title = escape(f"{m.start:%H:%M} UTC: {about}{m.completed} completed, {m.dead} dead")
        bars.append(
            f"<g><title>{title}</title>"
            f'<rect class="completed" x="{x:.1f}" y="{plot - done_h:.1f}" '
            f'width="{slot * 0.8:.1f}" height="{done_h:.1f}"/>'
            f'<rect class="dead" x="{x:.1f}" y="{plot - done_h - dead_h:.1f}" '
            f'width="{slot * 0.8:.1f}" height="{dead_h:.1f}"/></g>'
        )
    first = escape(f"{minutes[0].start:%H:%M}") if minutes else ""
    last = escape(f"{minutes[-1].start:%H:%M} UTC") if minutes else ""
    return Markup(
        f'<svg class="chart" viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" role="img" '
        f'aria-label="jobs finished per minute, last hour">'
        f'<text x="0" y="12" class="axis">max {top:,}/min</text>'
        + "".join(bars)
        + f'<text x="0" y="{CHART_HEIGHT - 4}" class="axis">{first}</text>'
        f'<text x="{CHART_WIDTH}" y="{CHART_HEIGHT - 4}" class="axis end">{last}</text></svg>'
    )


GRAPH_MAX_NODES: Final = 400  # a larger workflow is listed, not drawn
NODE_WIDTH: Final = 168
NODE_HEIGHT: Final = 40
COLUMN_GAP: Final = 56
ROW_GAP: Final = 14
LABEL_CHARS: Final = 22
FAILED: Final = frozenset({JobStatus.DEAD, JobStatus.CANCELLED})


def depths(jobs: Sequence[WorkflowJob]) -> dict[str, int]:
    """Each node's depth: the longest path to it from a node with no parent
    (0). Parents come before their children in a workflow's order, so one
    pass in that order is enough; a parent not (yet) seen counts as a root."""
    found: dict[str, int] = {}
    for job in jobs:
        found[job.node] = 1 + max((found.get(p, 0) for p in job.parents), default=-1)
    return found


def _cut(text: str) -> str:
    return text if len(text) <= LABEL_CHARS else text[: LABEL_CHARS - 1] + "…"


def workflow_svg(jobs: Sequence[WorkflowJob], root: str = "") -> Markup | None:
    """A workflow's graph as an SVG: one column per depth (roots on the
    left), each node a box coloured by its job's status and linked to the
    job's page, with an edge from each parent to each child. A dead or
    cancelled node has a heavier border. None past `GRAPH_MAX_NODES` nodes."""
    if not jobs or len(jobs) > GRAPH_MAX_NODES:
        return None
    depth = depths(jobs)
    columns: dict[int, list[WorkflowJob]] = {}
    for job in jobs:
        columns.setdefault(depth[job.node], []).append(job)
    where: dict[str, tuple[float, float]] = {}
    for d, column in columns.items():
        for row, job in enumerate(column):
            where[job.node] = (
                8 + d * (NODE_WIDTH + COLUMN_GAP),
                8 + row * (NODE_HEIGHT + ROW_GAP),
            )
    width = 16 + (max(columns) + 1) * (NODE_WIDTH + COLUMN_GAP) - COLUMN_GAP
    height = 16 + max(len(c) for c in columns.values()) * (NODE_HEIGHT + ROW_GAP) - ROW_GAP
    edges: list[str] = []
    for job in jobs:
        x2, y2 = where[job.node]
        for parent in job.parents:
            if parent not in where:
                continue
            x1, y1 = where[parent]
            edges.append(
                f'<line class="edge" x1="{x1 + NODE_WIDTH:.0f}" y1="{y1 + NODE_HEIGHT / 2:.0f}"'
                f' x2="{x2:.0f}" y2="{y2 + NODE_HEIGHT / 2:.0f}"'
                f' data-parent="{escape(parent)}" data-child="{escape(job.node)}"/>'
            )
    nodes: list[str] = []
    for job in jobs:
        x, y = where[job.node]
        failed = " failed" if job.status in FAILED else ""
        title = escape(f"{job.node}: {job.job_type}, {job.status.value}")
        nodes.append(
            f'<a href="{escape(root)}/jobs/{job.id}">'
            f'<g class="node {job.status.value}{failed}" data-node="{escape(job.node)}"'
            f' data-status="{job.status.value}"><title>{title}</title>'
            f'<rect x="{x:.0f}" y="{y:.0f}" width="{NODE_WIDTH}" height="{NODE_HEIGHT}" rx="4"/>'
            f'<text x="{x + 8:.0f}" y="{y + 16:.0f}">{escape(_cut(job.node))}</text>'
            f'<text class="sub" x="{x + 8:.0f}" y="{y + 31:.0f}">'
            f"{escape(_cut(job.job_type))} · {job.status.value}</text></g></a>"
        )
    return Markup(
        f'<svg class="graph" id="graph" viewBox="0 0 {width:.0f} {height:.0f}"'
        f' width="{width:.0f}" height="{height:.0f}" role="img"'
        f' aria-label="the workflow\'s jobs, parents left of their children">'
        + "".join(edges)
        + "".join(nodes)
        + "</svg>"
    )


def took(step: Any) -> str:
    """A step's duration (`0.012s`), `-` for one not ended (a wait)."""
    if step.finished_at is None:
        return "-"
    return f"{(step.finished_at - step.started_at).total_seconds():.3f}s"


def one_line(value: Any) -> str:
    """JSON on one line, cut at 200 characters (a step's result in its row)."""
    text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=str)
    return text if len(text) <= 200 else text[:200] + "…"


FILTERS: Final[dict[str, Callable[..., Any]]] = {
    "took": took,
    "one_line": one_line,
    "age": age,
    "when": when,
    "count": count,
    "pretty_json": pretty_json,
}
