"""How values read on the pages: ages, times, counts that may be estimates,
JSON, and the throughput chart (an SVG drawn here, so the page needs no
script to show it). Every string built here is escaped before it reaches
markup; the templates escape everything else."""

from __future__ import annotations

import datetime as dt
import json
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final

from markupsafe import Markup, escape

from ..queue.browse import Count, Minute

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


FILTERS: Final[dict[str, Callable[..., Any]]] = {
    "age": age,
    "when": when,
    "count": count,
    "pretty_json": pretty_json,
}
