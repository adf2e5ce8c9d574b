"""The work-chat webhooks' `digest-bot doctor` checks, made without sending anything.

A group robot's webhook has no read-only call: whether the token is live and the signature
accepted shows only when a message is posted. What can be checked is checked: every target has
a webhook of the platform's form and, when the robot signs, a secret; the service answers at
all (any HTTP answer from its address); and the clock, against its ``Date`` header, because
Feishu and DingTalk refuse a signature whose timestamp is more than an hour off.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import replace

import httpx

from bots.doctor import TIMEOUT_SECONDS, Check, clock_check, fail, ok
from bots.network import network_reason, tls_context
from bots.workchat.adapter import WebhookAdapter
from bots.workchat.settings import WebhookSettings
from digest_core.port import ConfigError

log = logging.getLogger(__name__)


async def checks(
    settings: WebhookSettings,
    *,
    adapter: type[WebhookAdapter],
    now: Callable[[], dt.datetime],
) -> list[Check]:
    """The platform's lines of the doctor's table; none when it names no target. ``adapter``
    is the platform's adapter class, which reads every target's webhook (it refuses one not
    of its form); none is built."""
    area = settings.platform
    if not settings.all_targets():
        return []
    try:
        adapter.webhooks(settings)
        secrets = settings.resolved_secrets()
    except ConfigError as exc:
        return [fail(area, "webhooks", str(exc), "set the webhook of every target")]
    out = [
        ok(
            area,
            f"webhook {name}",
            ("signed" if name in secrets else "unsigned")
            + "; the token and signature are checked by the first post (no read-only call)",
        )
        for name in settings.all_targets()
    ]
    async with httpx.AsyncClient(timeout=TIMEOUT_SECONDS, verify=tls_context()) as client:
        sent = now()
        try:
            response = await client.get(settings.base)
        except httpx.HTTPError as exc:
            reason = network_reason(exc) or str(exc)
            out.append(
                fail(
                    area,
                    "reachable",
                    f"{settings.base}: {reason}",
                    "allow outbound HTTPS to it (firewall, proxy: HTTPS_PROXY)",
                )
            )
            return out
        received = now()
    out.append(ok(area, "reachable", f"{settings.base} answers (HTTP {response.status_code})"))
    clock = clock_check(area, response.headers.get("Date"), sent=sent, received=received)
    if secrets and clock.fix:
        clock = replace(clock, detail=clock.detail + "; signed posts are refused 1 h off")
    out.append(clock)
    return out
