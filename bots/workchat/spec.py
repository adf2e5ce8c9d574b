"""The registry entry of a webhook platform, from its settings, renderer and adapter modules."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from bots.platformspec import BuildContext, PlatformSpec, load_adapter
from bots.workchat.settings import WebhookSettings

if TYPE_CHECKING:
    from digest_core.port import Adapter, PlatformLimits


def webhook_platform(
    settings: type[WebhookSettings],
    *,
    summary: str,
    renderer: str,
    adapter: str,
    limits: PlatformLimits,
    app_adapter: str | None = None,
    sdk: str | None = None,
    doctor: str,
) -> PlatformSpec:
    """The PlatformSpec of a work-chat webhook platform named ``settings.platform``.

    ``renderer`` is its renderer module (``digest_core.rendering.<name>``: the spec's
    ``renderer_module``) and ``adapter`` ``"module:Class"`` (a WebhookAdapter taking the
    settings, ``clock`` and ``limits``), both imported on first use (the adapter by
    :func:`bots.platformspec.load_adapter`). It is built when its settings name targets
    (``targets`` or ``alert_target``). ``limits`` is its documented pacing, which the
    adapter is built to send under. ``app_adapter`` (``"module:Class"``, taking the
    settings, ``clock``, ``limits`` and ``in_flight``) is built instead when the settings
    configure an app bot (their ``app`` property); ``sdk`` names the SDK it needs.
    ``doctor`` is ``"module:function"`` of its checks, the platform's own (they read its
    webhooks with its adapter class: :mod:`bots.workchat.doctor`).
    """
    name = settings.platform

    def build(section: WebhookSettings, ctx: BuildContext) -> Adapter | None:
        if app_adapter is not None and section.app:
            factory = load_adapter(app_adapter)
            built = factory(section, clock=ctx.clock, limits=ctx.limits, in_flight=ctx.in_flight)
            return cast("Adapter", built)
        if not section.all_targets():
            return None
        return cast("Adapter", load_adapter(adapter)(section, clock=ctx.clock, limits=ctx.limits))

    return PlatformSpec(
        name=name,
        summary=summary,
        settings=settings,
        renderer_module=renderer,
        build=build,
        limits=limits,
        needs=f"needs targets: set {name}.targets and {settings.env_name('webhooks')}"
        + (f" (or {name}.app_id for the app bot)" if app_adapter else ""),
        needs_key=f"{name}.targets",
        doctor=doctor,
        sdk=sdk,
    )
