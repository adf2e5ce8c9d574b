"""The registry entry of email: the digest as a newsletter through any SMTP relay."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from bots.email.pacing import limits_of
from bots.email.settings import EmailSettings
from bots.platformspec import BuildContext, PlatformSpec

if TYPE_CHECKING:
    from digest_core.port import Adapter


#: The pacing of the settings' defaults (the adapter paces under its configured relay's:
#: :func:`limits_of`)
EMAIL_LIMITS = limits_of(EmailSettings())


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
    renderer_module="digest_core.rendering.email",
    build=_build,
    limits=EMAIL_LIMITS,
    needs="needs a relay and a sender: set email.host and email.from",
    needs_key="email.host",
    sdk="aiosmtplib",
    sdk_module="aiosmtplib",
    doctor="bots.email.doctor:checks",
)
