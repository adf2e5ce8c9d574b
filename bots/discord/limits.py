"""The pacing model of Discord's REST API: what the core paces Discord sends under."""

from __future__ import annotations

from digest_core.platform import PlatformLimits, Rate, TargetKind

#: Discord limits, from https://discord.com/developers/docs/topics/rate-limits: 50 requests/s
#: per bot globally; message create is 5 per 5 s per channel (a per-route bucket, observed in
#: X-RateLimit headers). discord.py also paces by those headers; we stay under them first.
DISCORD_LIMITS = PlatformLimits(
    # no burst: discord.py sees no headers for the global limit, so a burst of 50 on top of
    # 50/s drew global 429s in benchmarks/discord_fanout.py; burst 1 drew none for ~5% time
    overall=Rate(50.0, burst=1),
    per_target={
        # a burst of 3 plus 0.4/s keeps every 5 s window at 5 or fewer
        TargetKind.CHANNEL: Rate(0.4, burst=3),
        TargetKind.GROUP: Rate(0.4, burst=3),
        TargetKind.PRIVATE: Rate(0.4, burst=3),
    },
)
