"""Prometheus metrics: the core's :class:`~digest_core.metrics.MetricsSink`, and the states read at
each scrape (next post, subscribers, ledger errors, leadership, connected platforms).

Every metric lives in the registry of one :class:`PrometheusMetrics` (not the library's global
one), so two services in one process (tests) never share counts. Names start ``digest_``;
the labels are bounded (platform names, outcome kinds, command names from the catalogue).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import re
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from digest_core import metrics as core_metrics
from digest_core.delivery import Ledger, PartState

if TYPE_CHECKING:
    from digest_core.delivery.resuming import Resumer
    from digest_core.port import Tallied

log = logging.getLogger(__name__)

#: a delivery takes seconds (a few channels) to hours (100k subscribers at 30 msg/s)
DELIVERY_BUCKETS = (1, 5, 15, 30, 60, 300, 900, 1800, 3600, 7200, 14400, 28800)
#: a command is answered in milliseconds (help) to seconds (a search of a cold archive)
COMMAND_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)
#: counting subscribers reads their rows: at most once per this many seconds
SUBSCRIBERS_EVERY = 60.0
#: a scrape waits at most this long for the ledger
LEDGER_TIMEOUT = 2.0
#: a platform's group of counts is exported as ``digest_<group>``
_GROUP = re.compile(r"[a-z][a-z0-9_]{0,40}")


class PrometheusMetrics:
    """Implements :class:`digest_core.metrics.MetricsSink` with prometheus-client."""

    def __init__(self, *, version: str) -> None:
        self.registry = r = CollectorRegistry(auto_describe=True)
        Info("digest_build", "The running digest-bot.", registry=r).info({"version": version})
        self.messages = Counter(
            "digest_messages",
            "Send attempts of parts, by platform and outcome: sent, retried (a transient "
            "error or 429, tried again), failed, unknown (may have arrived), gone, moved.",
            ["platform", "outcome"],
            registry=r,
        )
        self.rate_limits = Counter(
            "digest_rate_limited",
            "Sends answered 429 (too many requests) by the platform.",
            ["platform"],
            registry=r,
        )
        self.delivery_seconds = Histogram(
            "digest_delivery_duration_seconds",
            "How long a delivery (one issue on one platform) took.",
            ["platform"],
            buckets=DELIVERY_BUCKETS,
            registry=r,
        )
        self.deliveries = Counter(
            "digest_deliveries",
            "Deliveries ended, by platform and result (ok: every target has the issue).",
            ["platform", "result"],
            registry=r,
        )
        self.last_sent = Gauge(
            "digest_last_post_timestamp_seconds",
            "Unix time of the last message of an issue sent on the platform (read from the "
            "ledger at start): alert when it is older than a day.",
            ["platform"],
            registry=r,
        )
        self.last_complete = Gauge(
            "digest_last_complete_delivery_timestamp_seconds",
            "Unix time the last delivery on the platform ended with every target served.",
            ["platform"],
            registry=r,
        )
        self.command_seconds = Histogram(
            "digest_command_duration_seconds",
            "Time to answer a command (the reply built, before it is sent).",
            ["platform", "command"],
            buckets=COMMAND_BUCKETS,
            registry=r,
        )
        self.commands = Counter(
            "digest_commands",
            "Commands answered, by platform, command and status (ok, usage, not_found...).",
            ["platform", "command", "status"],
            registry=r,
        )
        self.next_post = Gauge(
            "digest_next_post_timestamp_seconds",
            "Unix time of the next scheduled post.",
            registry=r,
        )
        self.subscribers = Gauge(
            "digest_subscribers",
            "Active private subscribers, by platform.",
            ["platform"],
            registry=r,
        )
        self.leader = Gauge(
            "digest_leader",
            "1 while this process leads (schedules, posts, receives commands), 0 as a standby.",
            registry=r,
        )
        self.leader_terms = Gauge(
            "digest_leader_terms",
            "How many times this process became the leader.",
            registry=r,
        )
        self.connected = Gauge(
            "digest_platform_connected",
            "1 when the platform's adapter is connected (logged in, receiving), else 0.",
            ["platform"],
            registry=r,
        )
        self.ledger_up = Gauge(
            "digest_ledger_up",
            "1 when the ledger answered the last scrape's query, else 0.",
            registry=r,
        )
        self._tallies: dict[str, Gauge] = {}  # platforms' own counts (Tallied), by group
        self._ledger_failures: Callable[[], Mapping[str, int]] = dict
        r.register(_LedgerErrors(lambda: self._ledger_failures()))
        self._subscribers_at: float | None = None
        self._children: dict[tuple[str, str], tuple[Counter, Gauge | None]] = {}
        #: platforms whose last post time is known (sent since start, or read from the ledger)
        self._last_sent_known: set[str] = set()

    # ------------------------------------------------------------ MetricsSink

    def part(self, platform: str, outcome: str) -> None:
        # called once per message: the labelled children are looked up once
        child = self._children.get((platform, outcome))
        if child is None:
            child = self._children[platform, outcome] = (
                self.messages.labels(platform, outcome),
                self.last_sent.labels(platform) if outcome == core_metrics.SENT else None,
            )
        child[0].inc()
        if child[1] is not None:
            child[1].set(time.time())
            self._last_sent_known.add(platform)

    def rate_limited(self, platform: str) -> None:
        self.rate_limits.labels(platform).inc()

    def delivery(self, platform: str, seconds: float, *, ok: bool, at: dt.datetime) -> None:
        self.delivery_seconds.labels(platform).observe(seconds)
        self.deliveries.labels(platform, "ok" if ok else "incomplete").inc()
        if ok:
            self.last_complete.labels(platform).set(at.timestamp())

    def command(self, platform: str, command: str, seconds: float, *, status: str) -> None:
        self.command_seconds.labels(platform, command).observe(seconds)
        self.commands.labels(platform, command, status).inc()

    # ------------------------------------------------------------ states, at each scrape

    def watch_waiting(self, resumer: Resumer) -> None:
        """Export what waits to be sent again (posts' parts, alerts) and when it is tried."""
        self.registry.register(_Waiting(resumer))

    def watch_ledger(self, failures: Callable[[], Mapping[str, int]]) -> None:
        """Export the ledger's failed attempts by kind (``LedgerHealth.failures``)."""
        self._ledger_failures = failures

    async def refresh(
        self,
        *,
        ledger: Ledger,
        platforms: Iterable[str],
        next_post: dt.datetime | None,
        leading: bool,
        terms: int,
        connected: Mapping[str, bool],
        tallied: Mapping[str, Tallied] | None = None,
    ) -> bool:
        """Update the states from their sources; False when the ledger did not answer.
        ``tallied``: the platforms that keep counts of their own, by name."""
        self.next_post.set(next_post.timestamp() if next_post is not None else float("nan"))
        self.leader.set(1 if leading else 0)
        self.leader_terms.set(terms)
        for name, up in connected.items():
            self.connected.labels(name).set(1 if up else 0)
        for name, platform in (tallied or {}).items():
            await self._tally(name, platform)
        try:
            async with asyncio.timeout(LEDGER_TIMEOUT):
                await self._from_ledger(ledger, list(platforms))
        except Exception as exc:
            log.warning("metrics: the ledger did not answer: %s", exc)
            self.ledger_up.set(0)
            return False
        self.ledger_up.set(1)
        return True

    async def _tally(self, platform: str, tallied: Tallied) -> None:
        """``digest_<group>{platform, kind}`` from the platform's own counts (a group whose
        name cannot be a metric's is left out, logged)."""
        try:
            async with asyncio.timeout(LEDGER_TIMEOUT):
                groups = await tallied.tallies()
        except Exception as exc:
            log.warning("metrics: %s did not give its counts: %s", platform, exc)
            return
        for group, kinds in groups.items():
            gauge = self._tallies.get(group)
            if gauge is None:
                if not _GROUP.fullmatch(group):
                    log.warning("metrics: %s counts %r: not a metric's name", platform, group)
                    continue
                gauge = self._tallies[group] = Gauge(
                    f"digest_{group}",
                    f"The platform's own count of {group} by kind (e.g. email readers: "
                    "confirmed, pending, deactivated; bounces: hard, soft, complaint).",
                    ["platform", "kind"],
                    registry=self.registry,
                )
            for kind, n in kinds.items():
                gauge.labels(platform, kind).set(n)

    async def _from_ledger(self, ledger: Ledger, platforms: list[str]) -> None:
        now = time.monotonic()
        count = self._subscribers_at is None or now - self._subscribers_at >= SUBSCRIBERS_EVERY
        for name in platforms:
            if name not in self._last_sent_known:  # not sent since start: the ledger knows
                rows = await ledger.records(platform=name, states=[PartState.SENT], limit=1)
                if rows:
                    self.last_sent.labels(name).set(rows[0].updated_at.timestamp())
                    self._last_sent_known.add(name)
            if count:
                self.subscribers.labels(name).set(len(await ledger.subscribers(name)))
        if count:
            self._subscribers_at = now


class _LedgerErrors(Collector):
    """``digest_ledger_errors_total{kind}``: failed ledger transactions (retried) since start."""

    def __init__(self, failures: Callable[[], Mapping[str, int]]) -> None:
        self._failures = failures

    def collect(self) -> Iterable[Metric]:
        family = CounterMetricFamily(
            "digest_ledger_errors",
            "Ledger transactions that failed (and were retried), by error kind.",
            labels=["kind"],
        )
        for kind, n in sorted(self._failures().items()):
            family.add_metric([kind], n)
        yield family

    def describe(self) -> Iterable[Metric]:
        return self.collect()


class _Waiting(Collector):
    """``digest_parts_waiting``, ``digest_waiting_next_try_timestamp_seconds`` and
    ``digest_alerts_queued{platform}``: what the running bot will send again, and when."""

    def __init__(self, resumer: Resumer) -> None:
        self._resumer = resumer

    def collect(self) -> Iterable[Metric]:
        days = list(self._resumer.days.values())
        alerts = list(self._resumer.alerts)
        parts = GaugeMetricFamily(
            "digest_parts_waiting",
            "Parts a delivery left to send later (the platform unreachable through every "
            "attempt, or asking for a long wait), as the running bot last saw them.",
        )
        parts.add_metric([], sum(w.parts for w in days))
        yield parts
        due = GaugeMetricFamily(
            "digest_waiting_next_try_timestamp_seconds",
            "Unix time waiting parts or queued alerts are next tried (NaN: nothing waits).",
        )
        dues = [w.due for w in days] + [a.due for a in alerts]
        due.add_metric([], min(dues).timestamp() if dues else float("nan"))
        yield due
        queued = GaugeMetricFamily(
            "digest_alerts_queued",
            "Alerts no admin of the platform could get yet (sent again until one does).",
            labels=["platform"],
        )
        counts: dict[str, int] = {}
        for a in alerts:
            counts[a.platform] = counts.get(a.platform, 0) + 1
        for platform, n in sorted(counts.items()):
            queued.add_metric([platform], n)
        yield queued

    def describe(self) -> Iterable[Metric]:
        return self.collect()
