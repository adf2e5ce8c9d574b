"""The dashboard's charts: server-side SVG from pygal (a kept library, pinned in
requirements/), served by the bot itself, so the pages work on a closed network.

Each chart is a whole SVG document the pages show as an image: no script (pygal's tooltip
script and its CDN address are left out), a CJK font first (WenQuanYi Micro Hei, Noto Sans
CJK), sized by its viewBox (it shrinks to a phone's width), and its colours in CSS variables
that a ``prefers-color-scheme: dark`` block of its own switches.
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Mapping, Sequence

import pygal
from pygal.style import Style

#: CJK fonts first: Debian's fonts-wqy-microhei, Noto's, then the system's
FONTS = '"WenQuanYi Micro Hei", "Noto Sans CJK SC", "PingFang SC", "Microsoft YaHei", sans-serif'
#: series colours readable on light and dark backgrounds
COLORS = ("#3b82f6", "#f59e0b", "#10b981", "#ef4444", "#8b5cf6", "#14b8a6", "#ec4899")
_THEME = (
    "svg{--fg:#1f2933;--muted:#52606d;--grid:#d9e2ec}"
    "@media (prefers-color-scheme: dark){svg{--fg:#e4e7eb;--muted:#9aa5b1;--grid:#3e4c59}}"
)
_STYLE = Style(
    background="transparent",
    plot_background="transparent",
    foreground="var(--fg)",
    foreground_strong="var(--fg)",
    foreground_subtle="var(--grid)",
    font_family=FONTS,
    title_font_family=FONTS,
    label_font_family=FONTS,
    major_label_font_family=FONTS,
    legend_font_family=FONTS,
    value_font_family=FONTS,
    tooltip_font_family=FONTS,
    label_font_size=15,
    major_label_font_size=15,
    legend_font_size=16,
    title_font_size=18,
    tooltip_font_size=15,
    value_font_size=15,
    # (pygal's default, 64, ran an empty chart's notice off its edges)
    no_data_font_size=20,
    colors=COLORS,
    opacity="0.85",
    opacity_hover="1",
)
_SCRIPT = re.compile(r"<script[^>]*>.*?</script>", re.S)


def _svg(chart: pygal.graph.graph.Graph) -> bytes:
    """The chart as an SVG document without scripts, with the dark-mode theme."""
    text = str(chart.render(is_unicode=True))
    text = _SCRIPT.sub("", text)
    text = text.replace('<style type="text/css">', f'<style type="text/css">{_THEME}', 1)
    return text.encode("utf-8")


def _config(title: str, **options: object) -> dict[str, object]:
    return {
        "title": title,
        "style": _STYLE,
        "js": [],
        # small enough that its text stays readable on a phone's width (the page caps how
        # large it grows on a desktop)
        "width": 520,
        "height": 320,
        "legend_at_bottom": True,
        "legend_at_bottom_columns": 3,
        "legend_box_size": 14,
        "spacing": 14,
        "show_minor_x_labels": False,
        "x_label_rotation": 0,
        # only the major labels are shown, with room to spare: pygal's own truncation (to the
        # width of a day's column) turned every date into "…"
        "truncate_label": -1,
        "truncate_legend": 20,
        "no_data_text": "暂无数据 / no data yet",
        "margin": 12,
        "margin_bottom": 40,  # (pygal places a bottom legend inside the margin)
        **options,
    }


def _x_labels(days: Sequence[dt.date]) -> tuple[list[str], list[str]]:
    labels = [f"{d:%m-%d}" for d in days]
    step = max(1, len(days) // 5)
    return labels, labels[::step]


def lines(
    title: str, days: Sequence[dt.date], series: Mapping[str, Sequence[int]], *, fill: bool = False
) -> bytes:
    """One line per series over ``days`` (subscribers per platform, say)."""
    chart = pygal.Line(**_config(title, fill=fill, show_dots=len(days) <= 31, dots_size=2))
    chart.x_labels, chart.x_labels_major = _x_labels(days)
    for name, values in series.items():
        chart.add(name, list(values))
    return _svg(chart)


def stacked(title: str, days: Sequence[dt.date], series: Mapping[str, Sequence[int]]) -> bytes:
    """Stacked bars per day (commands per platform)."""
    chart = pygal.StackedBar(**_config(title))
    chart.x_labels, chart.x_labels_major = _x_labels(days)
    for name, values in series.items():
        chart.add(name, list(values))
    return _svg(chart)


def bars(title: str, rows: Sequence[tuple[str, int]]) -> bytes:
    """Horizontal bars, largest first (the top stories)."""
    chart = pygal.HorizontalBar(
        **_config(title, show_legend=False, height=max(200, 32 * len(rows)))
    )
    chart.x_labels = [label for label, _ in rows]
    chart.add("", [n for _, n in rows])
    return _svg(chart)


def timeline(
    title: str, seconds: Sequence[tuple[dt.datetime, int]], *, limit: float | None
) -> bytes:
    """Messages per second of one delivery against the platform's limit (a dashed line)."""
    chart = pygal.Line(**_config(title, show_dots=len(seconds) <= 60, dots_size=2, fill=True))
    if seconds:
        start = seconds[0][0]
        counts: dict[int, int] = {int((at - start).total_seconds()): n for at, n in seconds}
        span = range(max(counts) + 1)
        chart.x_labels = [f"{s}s" for s in span]
        chart.x_labels_major = chart.x_labels[:: max(1, len(span) // 6)]
        chart.add("消息/秒 messages/s", [counts.get(s, 0) for s in span])
        if limit is not None:
            chart.add(
                "上限 limit",
                [limit] * len(span),
                show_dots=False,
                stroke_style={"dasharray": "6,4"},
                fill=False,
            )
    return _svg(chart)
