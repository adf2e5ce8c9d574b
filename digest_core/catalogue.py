"""The one table of commands every platform's menus, slash commands and ``/help`` derive from.

Each :class:`CommandSpec` gives a command's name, its description in simplified Chinese (``zh``),
traditional Chinese (``zh_tw``) and English (``en``), its usage line, its arguments and whether
it is admin-only. Adapters build their menus from :data:`CATALOGUE` (Telegram's
``setMyCommands`` reader and admin scopes, Discord's app commands and their localizations);
``/help`` and the console's help are :func:`help_text`. Descriptions fit every platform's limit
(:data:`MAX_DESCRIPTION`).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType

log = logging.getLogger(__name__)

#: the shortest limit on a command's or an argument's description among the platforms (100)
MAX_DESCRIPTION = 100


@dataclass(frozen=True)
class Argument:
    """One argument of a command, for platforms with typed options.

    ``name`` is the option's name (lowercase ASCII); ``label_zh``/``label_zh_tw`` its localized
    name; ``en``/``zh``/``zh_tw`` its description.
    """

    name: str
    en: str
    zh: str
    zh_tw: str
    label_zh: str
    label_zh_tw: str


@dataclass(frozen=True)
class CommandSpec:
    """One command: what every platform shows for it.

    ``label_zh``/``label_zh_tw`` are localized command names where a platform allows them;
    ``menu`` is False for a command that is answered but not listed (``/start``).
    """

    name: str
    zh: str
    zh_tw: str
    en: str
    usage: str
    args: tuple[Argument, ...] = ()
    admin: bool = False
    label_zh: str = ""
    label_zh_tw: str = ""
    menu: bool = True


def _date(en: str, zh: str, zh_tw: str) -> Argument:
    return Argument("date", en, zh, zh_tw, "日期", "日期")


_WORD = Argument(
    "word", "A word to follow (10 at most)", "要关注的词（最多 10 个）", "要關注的詞（最多 10 個）",
    "关键词", "關鍵詞",
)  # fmt: skip
_N = Argument("n", "Only brief number n", "只看第 n 条简讯", "只看第 n 條簡訊", "编号", "編號")

#: the date argument of the editor's commands (preview, approve, hold)
_NEXT_ISSUE = _date(
    "YYYY-MM-DD (default: the next issue)",
    "日期 YYYY-MM-DD（默认下一期）",
    "日期 YYYY-MM-DD（預設下一期）",
)

#: every command, in the order ``/help`` and the menus list them
CATALOGUE: tuple[CommandSpec, ...] = (
    CommandSpec(
        "today",
        "今天的日报（还没发布时给出最新一期）",
        "今天的日報（還沒發布時給出最新一期）",
        "Today's issue (the latest one if today's is not out yet)",
        "/today",
        label_zh="今日",
        label_zh_tw="今日",
    ),
    CommandSpec(
        "headline",
        "今天的重点",
        "今天的重點",
        "The headline story of today's issue",
        "/headline [YYYY-MM-DD]",
        label_zh="重点",
        label_zh_tw="重點",
    ),
    CommandSpec(
        "briefs",
        "今天的简讯，或其中一条",
        "今天的簡訊，或其中一條",
        "The briefs of today's issue, or one of them",
        "/briefs [N] [YYYY-MM-DD]",
        args=(
            _N,
            _date(
                "YYYY-MM-DD (default: today)",
                "日期 YYYY-MM-DD（默认今天）",
                "日期 YYYY-MM-DD（預設今天）",
            ),
        ),
        label_zh="简讯",
        label_zh_tw="簡訊",
    ),
    CommandSpec(
        "brief",
        "按编号看一条简讯，例如 /brief 2",
        "按編號看一條簡訊，例如 /brief 2",
        "One brief by its number, e.g. /brief 2",
        "/brief N [YYYY-MM-DD]",
        label_zh="单条简讯",
        label_zh_tw="單條簡訊",
    ),
    CommandSpec(
        "classic",
        "今天的经典回顾",
        "今天的經典回顧",
        "The classic review of today's issue",
        "/classic [YYYY-MM-DD]",
        label_zh="经典回顾",
        label_zh_tw="經典回顧",
    ),
    CommandSpec(
        "toc",
        "今天这一期的目录",
        "今天這一期的目錄",
        "The table of contents of today's issue",
        "/toc [YYYY-MM-DD]",
        label_zh="目录",
        label_zh_tw="目錄",
    ),
    CommandSpec(
        "issue",
        "某一天的日报",
        "某一天的日報",
        "The issue of a given date",
        "/issue YYYY-MM-DD",
        args=(
            _date(
                "YYYY-MM-DD (pick one from the list)",
                "日期 YYYY-MM-DD（可从列表中选）",
                "日期 YYYY-MM-DD（可從列表中選）",
            ),
        ),
        label_zh="往期",
        label_zh_tw="往期",
    ),
    CommandSpec(
        "search",
        "搜索往期",
        "搜尋往期",
        "Search past issues",
        "/search 关键词",
        args=(
            Argument("keyword", "A word to look for", "要找的词", "要找的詞", "关键词", "關鍵詞"),
        ),
        label_zh="搜索",
        label_zh_tw="搜尋",
    ),
    CommandSpec(
        "subscribe",
        "每天私信接收日报，可选时间和格式",
        "每天私訊接收日報，可選時間和格式",
        "Get the daily issue by direct message, at your time and format",
        "/subscribe [HH:MM] [full|compact|headline]",
        args=(
            Argument(
                "time",
                "HH:MM in your zone (/zone); default: the digest's time",
                "你所在时区的 HH:MM（/zone）；默认为日报的时间",
                "你所在時區的 HH:MM（/zone）；預設為日報的時間",
                "时间",
                "時間",
            ),
            Argument(
                "format",
                "full, compact (headline and titles) or headline",
                "full 完整、compact 精简（重点和标题）或 headline 只看重点",
                "full 完整、compact 精簡（重點和標題）或 headline 只看重點",
                "格式",
                "格式",
            ),
        ),
        label_zh="订阅",
        label_zh_tw="訂閱",
    ),
    CommandSpec(
        "unsubscribe",
        "不再私信接收日报",
        "不再私訊接收日報",
        "Stop the daily direct message",
        "/unsubscribe",
        label_zh="取消订阅",
        label_zh_tw="取消訂閱",
    ),
    CommandSpec(
        "zone",
        "设置你的时区，例如 /zone Europe/Berlin",
        "設定你的時區，例如 /zone Europe/Berlin",
        "Set your time zone, e.g. /zone Europe/Berlin",
        "/zone Area/City",
        args=(
            Argument(
                "name",
                "An IANA zone such as Asia/Shanghai",
                "IANA 时区名，例如 Asia/Shanghai",
                "IANA 時區名，例如 Asia/Shanghai",
                "时区",
                "時區",
            ),
        ),
        label_zh="时区",
        label_zh_tw="時區",
    ),
    CommandSpec(
        "settings",
        "查看和修改你的订阅设置",
        "查看和修改你的訂閱設定",
        "See and change your delivery settings",
        "/settings",
        label_zh="设置",
        label_zh_tw="設定",
    ),
    CommandSpec(
        "follow",
        "关注一个词：新一期提到它时私信你",
        "關注一個詞：新一期提到它時私訊你",
        "Follow a word: a direct message when a new issue mentions it",
        "/follow 关键词",
        args=(_WORD,),
        label_zh="关注",
        label_zh_tw="關注",
    ),
    CommandSpec(
        "unfollow",
        "取消关注一个词",
        "取消關注一個詞",
        "Stop following a word",
        "/unfollow 关键词",
        args=(_WORD,),
        label_zh="取消关注",
        label_zh_tw="取消關注",
    ),
    CommandSpec(
        "following",
        "你关注的词",
        "你關注的詞",
        "The words you follow",
        "/following",
        label_zh="我的关注",
        label_zh_tw="我的關注",
    ),
    CommandSpec(
        "help",
        "全部命令",
        "全部命令",
        "All commands",
        "/help",
        label_zh="帮助",
        label_zh_tw="幫助",
    ),
    CommandSpec(
        "start",
        "欢迎和全部命令",
        "歡迎和全部命令",
        "Welcome and all commands",
        "/start [YYYY-MM-DD]",
        menu=False,
    ),
    CommandSpec(
        "repost",
        "管理员：把某一期重新推送到所有频道",
        "管理員：把某一期重新推送到所有頻道",
        "Admins: post an issue to every channel again",
        "/repost [YYYY-MM-DD] [force]",
        args=(
            _date(
                "YYYY-MM-DD (default: today)",
                "日期 YYYY-MM-DD（默认今天）",
                "日期 YYYY-MM-DD（預設今天）",
            ),
            Argument(
                "force",
                "Send every part again, not only what is missing",
                "全部重发，而不只是补发缺失的部分",
                "全部重發，而不只是補發缺失的部分",
                "全部重发",
                "全部重發",
            ),
        ),
        admin=True,
        label_zh="重新推送",
        label_zh_tw="重新推送",
    ),
    CommandSpec(
        "correct",
        "管理员：把已发出的某一期改成更正后的内容",
        "管理員：把已發出的某一期改成更正後的內容",
        "Admins: edit a posted issue to its corrected text",
        "/correct [YYYY-MM-DD]",
        args=(
            _date(
                "YYYY-MM-DD (default: today)",
                "日期 YYYY-MM-DD（默认今天）",
                "日期 YYYY-MM-DD（預設今天）",
            ),
        ),
        admin=True,
        label_zh="更正",
        label_zh_tw="更正",
    ),
    CommandSpec(
        "status",
        "管理员：下次推送、最近的推送、失败",
        "管理員：下次推送、最近的推送、失敗",
        "Admins: next post, last deliveries, failures",
        "/status",
        admin=True,
        label_zh="状态",
        label_zh_tw="狀態",
    ),
    CommandSpec(
        "reactivate",
        "管理员：恢复向已停用的频道推送",
        "管理員：恢復向已停用的頻道推送",
        "Admins: post to a deactivated channel again",
        "/reactivate [PLATFORM:]ID",
        args=(
            Argument(
                "target",
                "Channel id (pick one from the list)",
                "频道 ID（可从列表中选）",
                "頻道 ID（可從列表中選）",
                "频道",
                "頻道",
            ),
        ),
        admin=True,
        label_zh="恢复推送",
        label_zh_tw="恢復推送",
    ),
    CommandSpec(
        "preview",
        "管理员：私下预览读者将收到的日报（含按钮）",
        "管理員：私下預覽讀者將收到的日報（含按鈕）",
        "Admins: privately see what readers will get, buttons included",
        "/preview [YYYY-MM-DD]",
        args=(_NEXT_ISSUE,),
        admin=True,
        label_zh="预览",
        label_zh_tw="預覽",
    ),
    CommandSpec(
        "approve",
        "管理员：批准某一期按时推送（需要批准时）",
        "管理員：批准某一期按時推送（需要批准時）",
        "Admins: approve an issue for its post (when approval is required)",
        "/approve [YYYY-MM-DD]",
        args=(_NEXT_ISSUE,),
        admin=True,
        label_zh="批准",
        label_zh_tw="批准",
    ),
    CommandSpec(
        "hold",
        "管理员：暂缓某一期，批准前不推送",
        "管理員：暫緩某一期，批准前不推送",
        "Admins: hold an issue back until it is approved",
        "/hold [YYYY-MM-DD]",
        args=(_NEXT_ISSUE,),
        admin=True,
        label_zh="暂缓",
        label_zh_tw="暫緩",
    ),
)

#: the catalogue by command name
BY_NAME: Mapping[str, CommandSpec] = MappingProxyType({spec.name: spec for spec in CATALOGUE})


def spec(name: str) -> CommandSpec:
    """The entry of command ``name``; KeyError names the command when it is not catalogued."""
    try:
        return BY_NAME[name]
    except KeyError:
        raise KeyError(f"/{name} is not in digest_core.catalogue.CATALOGUE") from None


def menu(*, admin: bool) -> tuple[CommandSpec, ...]:
    """The listed commands a reader sees (``admin=False``) or an admin sees (all of them)."""
    return tuple(s for s in CATALOGUE if s.menu and (admin or not s.admin))


def help_line(entry: CommandSpec) -> str:
    """The line of ``entry`` in ``/help``: usage, Chinese and English description."""
    return f"{entry.usage} — {entry.zh} / {entry.en}"


HELP_HEADER = "AI 技术日报 机器人 · commands"
ADMIN_HEADER = "管理员 / admins:"


def help_text(*, admin: bool) -> str:
    """``/help``: every listed reader command, and for admins the admin commands after them."""
    lines = [HELP_HEADER, *(help_line(s) for s in menu(admin=False))]
    if admin:
        lines += ["", ADMIN_HEADER, *(help_line(s) for s in CATALOGUE if s.admin)]
    return "\n".join(lines)
