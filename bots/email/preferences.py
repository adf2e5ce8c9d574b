"""The reader's preferences page, ``/email/preferences?t=TOKEN``: every mail links it.

The reader sets when the issue comes (with the daily post, or at HH:MM), in which zone (an
IANA name), in which format (full, compact, headline) and which keywords they follow: the
same preferences and follows the chats' readers keep by ``/subscribe``, ``/zone`` and
``/follow``, in the ledger under platform ``email`` and the reader's id (never the address),
set through the Port (:meth:`~digest_core.port.Port.set_preferences`), which checks them by
the commands' own rules. The core's readers' deliveries then honour them as on any platform.

- ``GET`` shows the form filled in and never changes anything (link scanners fetch GETs).
- ``POST`` stores the whole form or, when a field does not fit, nothing: the form comes back
  with the field named. The signed token travels in the form (a hidden field): it is the
  reader's own, expiring, and no one without the key can make one, so it is what stops a
  forged cross-site POST. A POST without it is refused, and so is one the browser marks as
  sent from another site (``Sec-Fetch-Site: cross-site``).
- A forged or expired token, or one of a reader no longer subscribed, gets a 404 page that
  says so and changes nothing.
"""

from __future__ import annotations

import functools
import html
import logging
import zoneinfo
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING

from aiohttp import web

from bots.email.pages import INVALID, page
from bots.email.signup import FORMATS
from digest_core.port import MAX_FOLLOWS, MAX_WORD, PreferenceRefused, ReaderPreferences

if TYPE_CHECKING:
    from bots.email.adapter import EmailAdapter

log = logging.getLogger(__name__)

PATH = "/email/preferences"
TITLE = "设置 / Preferences"
SAVED = "已保存 / Saved."
#: the form's fields, as the page names them in an error
LABELS = {
    "at": "时间 / time",
    "zone": "时区 / zone",
    "format": "格式 / format",
    "follows": "关注 / follows",
}
FORMAT_LABELS = {
    "full": "完整 / full",
    "compact": "精简 / compact（重点和标题 / headline and titles）",
    "headline": "只看重点 / headline",
}
#: the longest form read (the follows' lines at their longest, with room to spare)
MAX_FORM = 16 * 1024
_GONE = (
    "<p>链接已过期或无效，或你已退订。请使用最近一封日报邮件中的“设置”链接。</p>"
    "<p>This link is expired or invalid, or you have unsubscribed: use the preferences link "
    "of your latest mail.</p>"
)


def routes(app: web.Application, running: Callable[[], EmailAdapter]) -> None:
    """Add the page's GET and POST; ``running`` is the started email adapter (or raises
    503)."""

    async def show(request: web.Request) -> web.Response:
        adapter = running()
        token = request.query.get("t", "")
        rid = await _reader(adapter, token)
        if rid is None:
            return page(INVALID, _GONE, status=404)
        assert adapter.port is not None  # running()
        chosen = await adapter.port.preferences(adapter.name, rid)
        return page(TITLE, form(token, values(chosen)))

    async def change(request: web.Request) -> web.Response:
        if request.headers.get("Sec-Fetch-Site", "").lower() == "cross-site":
            raise web.HTTPForbidden(text="refused: sent from another site")
        if (request.content_length or 0) > MAX_FORM:
            raise web.HTTPRequestEntityTooLarge(MAX_FORM, request.content_length or 0)
        data = await request.post()
        token = data.get("t")
        if not isinstance(token, str) or not token:
            raise web.HTTPForbidden(text="refused: the form's token is missing")
        adapter = running()
        rid = await _reader(adapter, token)
        if rid is None:
            return page(INVALID, _GONE, status=404)
        given = {k: str(data.get(k, "")) for k in ("when", "at", "zone", "format", "follows")}
        return await _store(adapter, rid, token, given)

    app.router.add_get(PATH, show)
    app.router.add_post(PATH, change)


async def _reader(adapter: EmailAdapter, token: str) -> str | None:
    """The reader ``token`` is for, while it is valid and they are subscribed; else None."""
    rid = adapter.tokens.preferring(token)
    if rid is None or await adapter.book.address(rid) is None:
        return None
    return rid


async def _store(
    adapter: EmailAdapter, rid: str, token: str, given: Mapping[str, str]
) -> web.Response:
    """Store what the form ``given`` holds, or show it again with the field that is wrong."""
    at = "" if given["when"] == "post" else given["at"]
    if given["when"] == "at" and not at.strip():
        return _again(token, given, "at", "请填写时间，例如 07:30 / give a time such as 07:30")
    assert adapter.port is not None  # running()
    try:
        kept = await adapter.port.set_preferences(
            adapter.name,
            rid,
            at=at,
            zone=given["zone"],
            format=given["format"],
            follows=given["follows"].splitlines(),
        )
    except PreferenceRefused as exc:
        return _again(token, given, exc.field, exc.problem)
    return page(TITLE, f'<p role="status">{SAVED}</p>' + form(token, values(kept)))


def _again(token: str, given: Mapping[str, str], field: str, problem: str) -> web.Response:
    return page(TITLE, form(token, given, error=(field, problem)), status=400)


def values(chosen: ReaderPreferences) -> dict[str, str]:
    """The form's fields as ``chosen`` fills them."""
    return {
        "when": "at" if chosen.at is not None else "post",
        "at": f"{chosen.at:%H:%M}" if chosen.at is not None else "",
        "zone": chosen.zone or "",
        "format": str(chosen.format),
        "follows": "\n".join(chosen.follows),
    }


def form(token: str, shown: Mapping[str, str], *, error: tuple[str, str] | None = None) -> str:
    """The form filled with ``shown``; ``error`` (field, problem) named above it and at its
    field."""
    field, problem = error or ("", "")
    e = html.escape
    when = shown.get("when") or ("at" if shown.get("at") else "post")

    def checked(on: bool) -> str:
        return " checked" if on else ""

    def invalid(name: str) -> str:
        return ' aria-invalid="true" aria-describedby="error"' if name == field else ""

    options = "".join(
        f'<option value="{f}"{" selected" if shown.get("format") == f else ""}>'
        f"{e(FORMAT_LABELS[f])}</option>"
        for f in FORMATS
    )
    alert = (
        f'<p id="error" role="alert" style="color:#b42318"><strong>{e(LABELS.get(field, field))}'
        f"</strong>: {e(problem)}</p>"
        if error
        else ""
    )
    return (
        f'{alert}<form method="post" action="preferences">'
        f'<input type="hidden" name="t" value="{e(token)}">'
        f"<fieldset><legend>{e(LABELS['at'])}</legend>"
        f'<label><input type="radio" name="when" value="post"{checked(when == "post")}> '
        "随日报 / with the daily post</label><br>"
        f'<label><input type="radio" name="when" value="at"{checked(when == "at")}> '
        f'每天 / every day at <input type="time" name="at" value="{e(shown.get("at", ""))}"'
        f"{invalid('at')}></label></fieldset>"
        f'<p><label>{e(LABELS["zone"])} <input name="zone" list="zones" maxlength="64" '
        f'placeholder="Asia/Shanghai" value="{e(shown.get("zone", ""))}"{invalid("zone")}>'
        f"</label><br><small>IANA 名称；留空为日报的时区 / an IANA name; empty: the "
        f"digest's zone</small>{_zones()}</p>"
        f'<p><label>{e(LABELS["format"])} <select name="format"{invalid("format")}>{options}'
        "</select></label></p>"
        f'<p><label>{e(LABELS["follows"])}<br><textarea name="follows" rows="6" cols="32"'
        f"{invalid('follows')}>{e(shown.get('follows', ''))}</textarea></label><br>"
        f"<small>每行一个词，最多 {MAX_FOLLOWS} 个、每个 {MAX_WORD} 个字符；新一期提到它时"
        f"会来信 / one keyword a line, {MAX_FOLLOWS} at most, {MAX_WORD} characters each: "
        "a mail when a new issue mentions it</small></p>"
        '<button type="submit">保存 / Save</button></form>'
    )


@functools.cache
def _zones() -> str:
    """A datalist of the IANA zone names the host knows (built once)."""
    names = sorted(z for z in zoneinfo.available_timezones() if "/" in z)
    return (
        '<datalist id="zones">'
        + "".join(f'<option value="{html.escape(z)}">' for z in names)
        + "</datalist>"
    )
