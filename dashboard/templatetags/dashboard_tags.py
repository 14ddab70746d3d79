"""Small presentation helpers of the dashboard: times, durations, limit bars, the depth chart
and the pause buttons."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.middleware.csrf import get_token
from django.urls import reverse
from django.utils.html import format_html

from core.times import time_shown
from teams.models import Team

register = template.Library()

_CHART_WIDTH, _CHART_HEIGHT = 120, 28


@register.filter
def when(moment: datetime | None) -> str:
    """One format for every time shown (the admin's too), "—" for none."""
    return time_shown(moment)


@register.filter
def duration(seconds: float | None) -> str:
    """12s, 4m 05s, 2h 03m."""
    if seconds is None:
        return "—"
    seconds = max(0, int(seconds))
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m {seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m"


@register.filter
def fill_percent(used: int, limit: int) -> int:
    """How full a limit is, for a bar; an unlimited (0) limit shows as empty."""
    if limit <= 0:
        return 0
    return min(100, round(100 * used / limit))


@register.simple_tag
def depth_chart(series: list[int], label: str) -> str:
    """The queue depth over the last hour as an inline SVG area chart, newest on the right."""
    peak = max(series, default=0)
    step = _CHART_WIDTH / max(1, len(series) - 1)

    def y(value: int) -> float:
        return _CHART_HEIGHT - 1 - (value / peak * (_CHART_HEIGHT - 2) if peak else 0)

    line = " ".join(f"{i * step:.1f},{y(v):.1f}" for i, v in enumerate(series))
    area = f"0,{_CHART_HEIGHT} {line} {_CHART_WIDTH},{_CHART_HEIGHT}"
    return format_html(
        '<svg class="chart" viewBox="0 0 {w} {h}" width="{w}" height="{h}" role="img" '
        'aria-label="{label}: queue depth over the last hour, peak {peak}">'
        '<polygon points="{area}"/><polyline points="{line}"/></svg>',
        w=_CHART_WIDTH,
        h=_CHART_HEIGHT,
        label=label,
        peak=peak,
        area=area,
        line=line,
    )


@register.simple_tag(takes_context=True)
def pause_button(context: dict[str, Any], team: Team, kind: str, name: str, paused: Any) -> str:
    """A Pause (or, when `paused`, Resume) button of the team (`kind` ""), or of its workflow or
    named limit `name` (`kind` "workflow" or "limit"), posting to dashboard:pause."""
    action = "Resume" if paused else "Pause"
    url = reverse("dashboard:pause", args=[team.id])
    label = f"{kind} {name}" if kind else f"team {team.slug}"
    target = format_html('<input type="hidden" name="{}" value="{}">', kind, name) if kind else ""
    return format_html(
        '<form class="pause" method="post" action="{}" hx-post="{}" hx-target="#live" '
        'hx-confirm="{} {}?"><input type="hidden" name="csrfmiddlewaretoken" value="{}">'
        '<input type="hidden" name="action" value="{}">{}'
        '<button type="submit" class="pause" aria-label="{} {}">{}</button></form>',
        url,
        url,
        action,
        label,
        get_token(context["request"]),
        action.lower(),
        target,
        action,
        label,
        action,
    )
