"""The registry entry of email: the digest as a newsletter through any SMTP relay."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from bots.email.settings import EmailSettings
from bots.registry import BuildContext, PlatformSpec
from digest_core.port import PlatformLimits, Rate, TargetKind

if TYPE_CHECKING:
    from digest_core.port import Adapter, Renderer


def limits_of(settings: EmailSettings) -> PlatformLimits:
    """The pacing of mail through the relay ``settings`` names.

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


#: The pacing of the settings' defaults (the adapter paces under its configured relay's:
#: :func:`limits_of`)
EMAIL_LIMITS = limits_of(EmailSettings())


def _renderer() -> Renderer:
    from digest_core.rendering import email

    return cast("Renderer", email)


def _build(section: EmailSettings, ctx: BuildContext) -> Adapter | None:
    if not section.configured:
        return None
    from bots.email import web  # registers the subscription routes on the HTTP endpoint
    from bots.email.adapter import EmailAdapter

    web.install()
    return cast("Adapter", EmailAdapter(section, clock=ctx.clock))


PLATFORM = PlatformSpec(
    name="email",
    summary="email newsletter through an SMTP relay (double opt-in, one-click unsubscribe)",
    settings=EmailSettings,
    renderer=_renderer,
    build=_build,
    limits=EMAIL_LIMITS,
    needs="needs a relay and a sender: set email.host and email.from",
    needs_key="email.host",
    sdk="aiosmtplib",
    sdk_module="aiosmtplib",
    doctor="bots.email.doctor:checks",
)
