"""The dashboard's pages and buttons (routes of :class:`bots.dashboard.Pages`): each asks the
core's :class:`~digest_core.service.dashboard.Dashboard` and renders a template or a chart."""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from typing import TYPE_CHECKING, Any

from aiohttp import web

from bots.dashboard import charts
from bots.dashboard.auth import PATH, day_of, headers, session_of

if TYPE_CHECKING:
    from bots.dashboard import Pages
    from digest_core.delivery.ledger.analytics import LatestDelivery
    from digest_core.service.dashboard import Deliveries, Job


def install(pages: Pages) -> None:
    """Add the pages' routes."""
    views = Views(pages)
    r = pages.app.router
    r.add_get(PATH + "today", views.today)
    r.add_post(PATH + "action", views.action)
    r.add_post(PATH + "confirm", views.confirm)
    r.add_get(PATH + "deliveries", views.deliveries)
    r.add_get(PATH + "deliveries.json", views.deliveries_json)
    r.add_get(PATH + "chart/timeline.svg", views.timeline)
    r.add_get(PATH + "audience", views.audience)
    r.add_get(PATH + "chart/{name}.svg", views.audience_chart)
    r.add_get(PATH + "stories", views.stories)
    r.add_get(PATH + "audit", views.audit)


class Views:
    """The handlers."""

    def __init__(self, pages: Pages) -> None:
        self.pages = pages

    @property
    def dashboard(self) -> Any:
        return self.pages.dashboard

    async def today(self, request: web.Request) -> web.Response:
        today = await self.dashboard.today(day_of(request.query.get("day")))
        return await self.pages.page(
            "today.html.j2", session_of(request), today=today, jobs=list(self.dashboard.jobs)
        )

    async def action(self, request: web.Request) -> web.Response:
        form = await request.post()
        command = str(form.get("command", ""))
        args = [a for a in str(form.get("args", "")).split(" ") if a][:4]
        target = str(form.get("target", "")).strip()
        if target:
            args.append(target[:160])
        answer = await self.dashboard.press(command, args, user=session_of(request).name)
        return await self.pages.page("answer.html.j2", session_of(request), answer=answer)

    async def confirm(self, request: web.Request) -> web.Response:
        form = await request.post()
        data = str(form.get("data", ""))[:200]
        answer = await self.dashboard.confirm(data, user=session_of(request).name)
        return await self.pages.page("answer.html.j2", session_of(request), answer=answer)

    async def deliveries(self, request: web.Request) -> web.Response:
        view = await self.dashboard.deliveries(day_of(request.query.get("day")))
        return await self.pages.page(
            "deliveries.html.j2", session_of(request), view=view, jobs=list(self.dashboard.jobs)
        )

    async def deliveries_json(self, request: web.Request) -> web.Response:
        view = await self.dashboard.deliveries(day_of(request.query.get("day")))
        body = _deliveries(view, list(self.dashboard.jobs))
        text = await asyncio.to_thread(json.dumps, body, ensure_ascii=False)
        return web.Response(
            text=text,
            content_type="application/json",
            headers=self._headers(),
        )

    async def timeline(self, request: web.Request) -> web.Response:
        try:
            delivery = int(request.query.get("delivery", ""))
        except ValueError:
            raise web.HTTPNotFound(headers=self._headers()) from None
        platform = request.query.get("platform", "")[:40]
        limit = self.dashboard.platforms.get(platform.split("~")[0])
        seconds = await self.dashboard.timeline(delivery)
        per_second = None if limit is None else limit.limits.overall.per_second
        title = f"{platform} 每秒消息 / messages per second"
        return await self.pages.svg(_timeline, title, seconds, per_second)

    async def audience(self, request: web.Request) -> web.Response:
        view = await self.dashboard.audience(days=_days(request, 90))
        return await self.pages.page("audience.html.j2", session_of(request), view=view)

    async def audience_chart(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        days = _days(request, 90 if name != "stories" else 30)
        if name == "stories":
            rows = await self.dashboard.stories(days=days)
            top = [(f"{r.date:%m-%d} {r.title[:18]}", r.score) for r in rows[:10]]
            return await self.pages.svg(charts.bars, "近期热门 / top stories", top)
        if name not in ("subscribers", "commands", "buttons"):
            raise web.HTTPNotFound(headers=self._headers())
        view = await self.dashboard.audience(days=days)
        if name == "subscribers":
            return await self.pages.svg(
                charts.lines, "订阅者 / subscribers", view.days, view.subscribers
            )
        if name == "commands":
            return await self.pages.svg(
                charts.stacked, "命令 / commands per day", view.days, view.commands
            )
        buttons = {"buttons": view.buttons}
        return await self.pages.svg(charts.lines, "按钮 / button presses", view.days, buttons)

    async def stories(self, request: web.Request) -> web.Response:
        issue = day_of(request.query.get("issue"))
        rows = await self.dashboard.stories(days=_days(request, 30), issue=issue)
        return await self.pages.page("stories.html.j2", session_of(request), rows=rows, issue=issue)

    async def audit(self, request: web.Request) -> web.Response:
        q = request.query
        who = q.get("who", "").strip()[:160] or None
        action = q.get("action", "").strip()[:64] or None
        day = day_of(q.get("day"))
        before = q.get("before", "")
        entries = await self.dashboard.audit(
            who=who,
            action=action,
            day=day,
            before_id=int(before) if before.isdigit() else None,
            limit=50,
        )
        actions = await self.dashboard.ledger.audit_actions()
        return await self.pages.page(
            "audit.html.j2",
            session_of(request),
            entries=entries,
            who=who or "",
            action=action or "",
            day=day,
            actions=actions,
            more=entries[-1].id if len(entries) == 50 else None,
        )

    @staticmethod
    def _headers() -> dict[str, str]:
        return headers()


def _timeline(title: str, seconds: list[tuple[dt.datetime, int]], limit: float | None) -> bytes:
    return charts.timeline(title, seconds, limit=limit)


def _days(request: web.Request, default: int) -> int:
    value = request.query.get("days", "")
    return max(7, min(int(value), 366)) if value.isdigit() else default


def _deliveries(view: Deliveries, jobs: list[Job]) -> dict[str, Any]:
    """The Deliveries page's data (what its script redraws every second)."""
    return {
        "day": view.day.isoformat(),
        "platforms": [_delivery(d, view) for d in view.latest],
        "live": {
            n: {
                "sent": v.sent,
                "retried": v.retried,
                "rate_limited": v.rate_limited,
                "failed": v.failed,
                "rate": round(view.rates.get(n, 0.0), 1),
                "limit": view.limits.get(n),
            }
            for n, v in view.live.items()
        },
        "jobs": [
            {
                "number": j.number,
                "command": j.command,
                "args": list(j.args),
                "user": j.user,
                "answer": j.answer,
                "running": j.answer is None,
            }
            for j in reversed(jobs[-10:])
        ],
    }


def _delivery(d: LatestDelivery, view: Deliveries) -> dict[str, Any]:
    keys = ("sent", "pending", "in_flight", "failed", "gone", "unknown", "retries")
    return {
        "platform": d.platform,
        "delivery": d.delivery_id,
        "revision": d.revision,
        "generation": d.generation,
        "targets_total": d.totals["targets"],
        "totals": {k: d.totals[k] for k in keys},
        "done": d.done,
        "completed": _time(d.updated_at, view) if d.done else None,
        "targets": [
            {
                "target": t.target,
                "kind": t.kind,
                **{k: getattr(t, k) for k in keys},
                "done": t.done,
                "completed": _time(t.updated_at, view) if t.done else None,
                "error": (t.last_error or "")[:200],
            }
            for t in d.targets
        ],
    }


def _time(at: dt.datetime | None, view: Deliveries) -> str | None:
    """``HH:MM:SS`` in the digest's zone."""
    return None if at is None else f"{at.astimezone(view.zone):%H:%M:%S}"
