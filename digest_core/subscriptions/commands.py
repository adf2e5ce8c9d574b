"""Readers' own commands: /subscribe with a time and format, /unsubscribe, /zone, /settings,
/follow, /unfollow, /following (declared here, answered by
:class:`~digest_core.commands.dispatch.Commands`: :class:`ReaderCommands` is one of the
catalogue's owners)."""

from __future__ import annotations

import datetime as dt
import logging
import re
import zoneinfo
from typing import TYPE_CHECKING, Protocol

from digest_core.commands.declaration import (
    Argument,
    CommandSpec,
    command,
    declared,
    one_of,
    spec_of,
    text,
)
from digest_core.commands.requests import CHOICE_PREFIX as CHOICE_PREFIX  # (re-exported)
from digest_core.commands.requests import (
    LEFT_REASONS,
    READING_CHOICES,
    Choice,
    Reply,
    Request,
    Status,
)
from digest_core.delivery.ledger.preferences import MAX_FOLLOWS, Followed, Format, Preference
from digest_core.errors import BadArgument
from digest_core.models import shorten

if TYPE_CHECKING:
    from digest_core.commands.dispatch import Commands

log = logging.getLogger(__name__)

#: the longest keyword one may follow (as ``/search``)
MAX_WORD = 64
#: the delivery times ``/settings`` offers as buttons (any HH:MM can be typed)
TIMES = ("07:00", "12:00", "18:00", "21:00")
#: how each format is called in replies
FORMAT_LABELS = {
    Format.FULL: "完整 / full",
    Format.COMPACT: "精简 / compact",
    Format.HEADLINE: "只看重点 / headline",
}
_TIME = re.compile(r"([01]?[0-9]|2[0-3]):([0-5][0-9])")


def read_clock_time(word: str) -> dt.time:
    """A typed ``HH:MM`` as a time of day (``/subscribe``'s; the preferences form's too).

    Raises:
        ValueError: ``word`` is no such time.
    """
    if (m := _TIME.fullmatch(word)) is None:
        raise ValueError(word)
    return dt.time(int(m[1]), int(m[2]))


def read_zone_name(word: str) -> str:
    """A typed IANA zone name, checked (``/zone``'s; the preferences form's too).

    Raises:
        BadArgument: there is no such zone.
    """
    if zone_named(word) is None:
        raise BadArgument(f"“{word[:64]}” 不是时区，例如 Europe/Berlin / is not a zone name")
    return word


def read_followed_word(words: str) -> str:
    """A typed keyword to follow, as it is kept: case-folded, checked (``/follow``'s and
    ``/unfollow``'s; the preferences form's too).

    Raises:
        BadArgument: too long, or holding an invisible character.
    """
    word = words.casefold()
    if len(word) > MAX_WORD:
        raise BadArgument(f"关键词太长（最多 {MAX_WORD} 个字符）/ keyword too long")
    if not word.replace(" ", "").isprintable():  # no issue can hold it (models.py)
        raise BadArgument(
            f"“{shorten(word, MAX_WORD)}” 含有不可见字符 / holds an invisible character"
        )
    return word


_WORD = Argument(
    "word", "A word to follow (10 at most)", "要关注的词（最多 10 个）", "要關注的詞（最多 10 個）",
    "关键词", "關鍵詞", kind=text(1, MAX_WORD, read=read_followed_word, rest=True), required=True,
    missing="请给出关键词 / give a keyword",
)  # fmt: skip


#: a reader's format: the whole issue, the headline and the briefs' titles, or the headline
FORMAT = Argument(
    "format",
    "full, compact (headline and titles) or headline",
    "full 完整、compact 精简（重点和标题）或 headline 只看重点",
    "full 完整、compact 精簡（重點和標題）或 headline 只看重點",
    "格式",
    "格式",
    kind=one_of(*(f.value for f in Format)),
)


class ReaderStore(Protocol):
    """Where preferences and follows are kept (the ledger)."""

    async def preference(self, platform: str, chat_id: str) -> Preference: ...

    async def set_preference(
        self,
        platform: str,
        chat_id: str,
        *,
        at: dt.time | object | None = ...,
        zone: str | object | None = ...,
        format: Format | object = ...,
    ) -> Preference: ...

    async def follow(self, platform: str, chat_id: str, word: str) -> Followed: ...

    async def unfollow(self, platform: str, chat_id: str, word: str) -> bool: ...

    async def following(self, platform: str, chat_id: str) -> list[str]: ...


def parse_choice(data: str) -> tuple[str, tuple[str, ...]] | None:
    """The command and arguments a :class:`~digest_core.commands.Choice` button runs; None
    for button data that is not a reader choice."""
    if not data.startswith(CHOICE_PREFIX):
        return None
    command, *args = data[len(CHOICE_PREFIX) :].split()
    allowed = command in PRIVATE_COMMANDS or command in READING_CHOICES
    return (command, tuple(args)) if allowed else None


def zone_named(name: str) -> zoneinfo.ZoneInfo | None:
    """The IANA zone ``name`` (``Europe/Berlin``), or None when there is no such zone."""
    if not name or len(name) > 64 or name.startswith(("/", ".")) or ".." in name:
        return None
    try:
        return zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return None


class ReaderCommands:
    """The readers' commands over ``commands``: its texts, usage and plain subscription, its
    :class:`ReaderStore` (``commands.store``), and the digest's zone and post time."""

    def __init__(self, commands: Commands) -> None:
        self.commands = commands
        self.zone_name = str(commands.zone)
        self.post_time = commands.embargo.post_time

    @property
    def store(self) -> ReaderStore:
        """The readers' preferences and follows (:meth:`available` answers without one)."""
        store = self.commands.store
        assert store is not None
        return store

    # ------------------------------------------------------------ helpers

    async def _subscription(self, request: Request, *, on: bool) -> Reply:
        """The plain daily subscription of the requester's chat, on or off."""
        if self.commands.backend is None or request.platform not in self.commands.subscribable:
            return self.commands.reply(
                request,
                "这里不支持订阅 / subscriptions are not available here",
                status=Status.USAGE,
            )
        changed = await self.commands.backend.subscribe(request.platform, request.chat, on=on)
        if on:
            text = (
                "已订阅：每天的日报会私信发给你。/unsubscribe 取消。\n"
                "Subscribed: the daily issue will come by private message."
                if changed
                else "你已经订阅了。/ You are already subscribed."
            )
        else:
            if changed:
                reason = request.via if request.via in LEFT_REASONS else "command"
                self.commands.readers.left(request.platform, reason)
            text = (
                "已取消订阅。/ Unsubscribed."
                if changed
                else "你没有订阅。/ You were not subscribed."
            )
        return self.commands.reply(request, text)

    def _text(
        self,
        request: Request,
        text: str,
        *,
        status: Status = Status.OK,
        choices: tuple[tuple[Choice, ...], ...] = (),
    ) -> Reply:
        """Every answer here is private."""
        return self.commands.reply(request, text, status=status, private=True, choices=choices)

    def available(self, spec: CommandSpec, request: Request) -> Reply | None:
        """None where private deliveries are; else the answer, before any argument is read:
        the plain subscription's (``/subscribe`` without arguments, ``/unsubscribe``) or this
        module's."""
        commands = self.commands
        if (
            commands.backend is not None
            and commands.store is not None
            and request.platform in commands.subscribable
        ):
            return None
        plain = spec.name == SUBSCRIBE.name and not spec.given(request)
        if plain or spec.name == UNSUBSCRIBE.name:
            return None  # _subscription answers
        return self._text(
            request,
            "这里不支持私信功能 / private deliveries are not available here",
            status=Status.USAGE,
        )

    def describe(self, pref: Preference) -> str:
        """The reader's settings in two languages."""
        when = f"{pref.at:%H:%M}" if pref.at else f"{self.post_time:%H:%M}（默认 / default）"
        zone = pref.zone or f"{self.zone_name}（默认 / default）"
        state = "已订阅 / subscribed" if pref.subscribed else "未订阅 / not subscribed"
        return (
            f"订阅 / subscription: {state}\n"
            f"时间 / time: {when}\n"
            f"时区 / zone: {zone}\n"
            f"格式 / format: {FORMAT_LABELS[pref.format]}"
        )

    # ------------------------------------------------------------ commands

    @command(
        "subscribe",
        zh="每天私信接收日报，可选时间和格式",
        zh_tw="每天私訊接收日報，可選時間和格式",
        en="Get the daily issue by direct message, at your time and format",
        usage="/subscribe [HH:MM] [full|compact|headline]",
        args=(
            Argument(
                "time",
                "HH:MM in your zone (/zone); default: the digest's time",
                "你所在时区的 HH:MM（/zone）；默认为日报的时间",
                "你所在時區的 HH:MM（/zone）；預設為日報的時間",
                "时间",
                "時間",
                kind=text(4, 5, read=read_clock_time),
            ),
            FORMAT,
        ),
        label_zh="订阅",
        label_zh_tw="訂閱",
        dm=True,
        any_order=True,
    )
    async def subscribe(self, request: Request, time: dt.time | None, format: str | None) -> Reply:
        """``/subscribe [HH:MM] [full|compact|headline]``; without arguments the plain one."""
        if time is None and format is None:
            return await self._subscription(request, on=True)
        backend = self.commands.backend
        assert backend is not None  # available()
        await backend.subscribe(request.platform, request.chat, on=True)
        changes: dict[str, object] = {}
        if time is not None:
            changes["at"] = time
        if format is not None:
            changes["format"] = Format(format)
        pref = await self.store.set_preference(request.platform, request.chat, **changes)
        return self._text(
            request, "已订阅 / Subscribed.\n" + self.describe(pref), choices=self._choices(pref)
        )

    @command(
        "unsubscribe",
        zh="不再私信接收日报",
        zh_tw="不再私訊接收日報",
        en="Stop the daily direct message",
        usage="/unsubscribe",
        label_zh="取消订阅",
        label_zh_tw="取消訂閱",
        dm=True,
        lenient=True,
    )
    async def unsubscribe(self, request: Request) -> Reply:
        """``/unsubscribe``: the plain subscription of :class:`Commands`, off."""
        return await self._subscription(request, on=False)

    @command(
        "zone",
        zh="设置你的时区，例如 /zone Europe/Berlin",
        zh_tw="設定你的時區，例如 /zone Europe/Berlin",
        en="Set your time zone, e.g. /zone Europe/Berlin",
        usage="/zone Area/City",
        args=(
            Argument(
                "name",
                "An IANA zone such as Asia/Shanghai",
                "IANA 时区名，例如 Asia/Shanghai",
                "IANA 時區名，例如 Asia/Shanghai",
                "时区",
                "時區",
                kind=text(1, 64, read=read_zone_name),
                required=True,
                optional_words=True,
            ),
        ),
        label_zh="时区",
        label_zh_tw="時區",
        dm=True,
    )
    async def zone(self, request: Request, name: str | None) -> Reply:
        """``/zone Area/City``: the zone of the reader's delivery time (``/zone`` shows it)."""
        if name is None:
            pref = await self.store.preference(request.platform, request.chat)
            return self._text(request, f"时区 / zone: {pref.zone or self.zone_name}")
        pref = await self.store.set_preference(request.platform, request.chat, zone=name)
        return self._text(request, "时区已设置 / Zone set.\n" + self.describe(pref))

    @command(
        "settings",
        zh="查看和修改你的订阅设置",
        zh_tw="查看和修改你的訂閱設定",
        en="See and change your delivery settings",
        usage="/settings",
        label_zh="设置",
        label_zh_tw="設定",
        dm=True,
    )
    async def settings(self, request: Request) -> Reply:
        """``/settings``: the reader's preferences, with buttons that change them."""
        pref = await self.store.preference(request.platform, request.chat)
        words = await self.store.following(request.platform, request.chat)
        text = self.describe(pref)
        text += f"\n关注 / following: {'、'.join(words) if words else '—'}"
        text += (
            "\n其他时间 / another time: /subscribe HH:MM · 时区 / zone: /zone Area/City"
            " · 关注 / follow: /follow 关键词"
        )
        return self._text(request, text, choices=self._choices(pref))

    def _choices(self, pref: Preference) -> tuple[tuple[Choice, ...], ...]:
        times = tuple(
            Choice(
                ("✓ " if pref.at and f"{pref.at:%H:%M}" == t else "") + t,
                f"{CHOICE_PREFIX}subscribe {t}",
            )
            for t in TIMES
        )
        formats = tuple(
            Choice(
                ("✓ " if pref.format is f else "") + FORMAT_LABELS[f].split(" / ")[0],
                f"{CHOICE_PREFIX}subscribe {f.value}",
            )
            for f in Format
        )
        last = (
            Choice("取消订阅 / unsubscribe", f"{CHOICE_PREFIX}unsubscribe")
            if pref.subscribed
            else Choice("订阅 / subscribe", f"{CHOICE_PREFIX}subscribe")
        )
        return (times, formats, (last,))

    @command(
        "follow",
        zh="关注一个词：新一期提到它时私信你",
        zh_tw="關注一個詞：新一期提到它時私訊你",
        en="Follow a word: a direct message when a new issue mentions it",
        usage="/follow 关键词",
        args=(_WORD,),
        label_zh="关注",
        label_zh_tw="關注",
        dm=True,
    )
    async def follow(self, request: Request, word: str) -> Reply:
        """``/follow 关键词``: a private message when a new issue mentions it."""
        outcome = await self.store.follow(request.platform, request.chat, word)
        if outcome is Followed.FULL:
            return self._text(
                request,
                f"最多关注 {MAX_FOLLOWS} 个词；先用 /unfollow 取消一个。\n"
                f"You can follow {MAX_FOLLOWS} words at most; /unfollow one first.",
                status=Status.USAGE,
            )
        if outcome is Followed.ALREADY:
            return self._text(request, f"你已经关注了“{word}”。/ Already following “{word}”.")
        return self._text(
            request,
            f"已关注“{word}”：新一期提到它时会私信告诉你。\n"
            f"Following “{word}”: a new issue that mentions it comes by private message.",
        )

    @command(
        "unfollow",
        zh="取消关注一个词",
        zh_tw="取消關注一個詞",
        en="Stop following a word",
        usage="/unfollow 关键词",
        args=(_WORD,),
        label_zh="取消关注",
        label_zh_tw="取消關注",
        dm=True,
    )
    async def unfollow(self, request: Request, word: str) -> Reply:
        if not await self.store.unfollow(request.platform, request.chat, word):
            return self._text(
                request,
                f"你没有关注“{word}”。/ You do not follow “{word}”.",
                status=Status.NOT_FOUND,
            )
        return self._text(request, f"已取消关注“{word}”。/ No longer following “{word}”.")

    @command(
        "following",
        zh="你关注的词",
        zh_tw="你關注的詞",
        en="The words you follow",
        usage="/following",
        label_zh="我的关注",
        label_zh_tw="我的關注",
        dm=True,
        lenient=True,
    )
    async def following(self, request: Request) -> Reply:
        words = await self.store.following(request.platform, request.chat)
        if not words:
            return self._text(
                request,
                "你还没有关注任何词；/follow 关键词 来关注。\n"
                "You follow no words yet; /follow WORD to start.",
            )
        lines = [f"关注 / following ({len(words)}/{MAX_FOLLOWS}):", *(f"· {w}" for w in words)]
        return self._text(request, "\n".join(lines))


#: the commands that only make sense in a private chat (adapters answer them there)
PRIVATE_COMMANDS = frozenset(spec.name for spec, _ in declared(ReaderCommands) if spec.dm)
#: the plain subscription's commands, which a platform also runs for a reader (the email's
#: confirmation and unsubscribe links)
SUBSCRIBE, UNSUBSCRIBE = spec_of(ReaderCommands.subscribe), spec_of(ReaderCommands.unsubscribe)
