"""Email's pacing: the configured relay's rate, one mail a second per reader at the most; the
spec states it (:data:`bots.email.spec.EMAIL_LIMITS`) and the adapter paces under it."""

from __future__ import annotations

from bots.email.settings import EmailSettings
from digest_core.port import PlatformLimits, Rate, TargetKind


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
