"""The adapters the service runs on, by name, and what the service derives from them once."""

from __future__ import annotations

from collections.abc import Iterable

from digest_core.port import Adapter
from digest_core.rendering import RenderOptions
from digest_core.subscriptions.signup import AddressSignup


class Platforms(dict[str, Adapter]):
    """The running adapters by name, in the order given (the registry's): a dict, as posting,
    alerts and ``status`` read it; plus which of them readers subscribe on, their post options
    and the one that mails the digest."""

    def __init__(self, adapters: Iterable[Adapter]) -> None:
        super().__init__((a.name, a) for a in adapters)
        #: the platforms readers can subscribe on (an adapter's ``subscriptions``)
        self.subscribable = frozenset(
            name for name, a in self.items() if getattr(a, "subscriptions", False)
        )

    def adapters(self) -> list[Adapter]:
        """Every running adapter, in order."""
        return list(self.values())

    def subscribed(self) -> dict[str, Adapter]:
        """The subscribable ones by name (their subscribers' own times and formats)."""
        return {name: a for name, a in self.items() if name in self.subscribable}

    def post_options(self) -> dict[str, RenderOptions]:
        """Each platform's options of its posts (the site's links, tracked links)."""
        return {name: a.post_options for name, a in self.items()}

    def signup(self) -> AddressSignup | None:
        """The first platform that mails the digest (``/email ADDRESS`` goes through it), or
        None (the command says it is not available)."""
        return next((a for a in self.values() if isinstance(a, AddressSignup)), None)

    async def alert_admins(self, name: str, text: str) -> None:
        """Tell the admins of platform ``name`` ``text``, raising what its adapter raises (the
        Resumer's resend of a queued alert: it keeps what no admin got)."""
        await self[name].alert_admins(text)
