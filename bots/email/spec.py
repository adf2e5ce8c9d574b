"""The registry entry of email: the digest as a newsletter through any SMTP relay."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from bots.email.settings import EmailSettings
from bots.platformspec import BuildContext, PlatformSpec
from digest_core.port import PlatformLimits, Rate, TargetKind

if TYPE_CHECKING:
    from digest_core.port import Adapter


def limits_of(settings: EmailSettings) -> PlatformLimits:
    """The pacing of mail through the relay ``settings`` names (the spec's ``limits``: the
    adapter is built to send under them).

    SMTP sets no sending rate; each relay sets its own (Amazon SES: 1 mail/s in its sandbox,
    per account and use case after it, https://docs.aws.amazon.com/ses/latest/dg/quotas.html),
    so the overall rate is the configured ``email.rate_per_second`` and ``email.burst``. A
    reader gets one mail per issue (a correction notice at most one more): at most one a
    second with a burst of 2 is ours, no provider's.
    """
    return PlatformLimits(
        overall=Rate(settings.rate_per_second, burst=settings.burst),
        per_target={kind: Rate(1.0, burst=2) for kind in TargetKind},
    )


def _build(section: EmailSettings, ctx: BuildContext) -> Adapter | None:
    if not section.configured:
        return None
    from bots.email import web  # registers the subscription routes on the HTTP endpoint
    from bots.email.adapter import EmailAdapter

    web.install()
    return cast("Adapter", EmailAdapter(section, clock=ctx.clock, limits=ctx.limits))


PLATFORM = PlatformSpec(
    name="email",
    summary="email newsletter through an SMTP relay (double opt-in, one-click unsubscribe)",
    settings=EmailSettings,
    renderer_module="digest_core.rendering.email",
    build=_build,
    limits=limits_of,
    needs="needs a relay and a sender: set email.host and email.from",
    needs_key="email.host",
    sdk="aiosmtplib",
    sdk_module="aiosmtplib",
    doctor="bots.email.doctor:checks",
)
