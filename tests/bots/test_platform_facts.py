"""One place per platform: its renderer (with its text and size limits, each under one name) is
one module of ``digest_core/rendering/``, and its pacing sits on its registry spec, which its
adapter is built to send under (no adapter chooses its own)."""

from __future__ import annotations

import ast
import importlib
import json
import os
import re
from pathlib import Path

import pytest

from bots import registry
from bots.discord.spec import DISCORD_LIMITS
from bots.email.settings import EmailSettings
from bots.runtime import build_adapters
from bots.telegram.spec import PAID_BROADCAST_LIMITS, TELEGRAM_LIMITS
from bots.wecom.spec import WECOM_LIMITS
from digest_core.platform import PlatformLimits, Rate
from digest_core.port import Adapter
from digest_core.rendering import TextLimits
from digest_core.settings import Settings
from digest_core.testing import ManualClock
from tests.bots.workchat_helpers import NOW
from tests.fakes.discord_api import FAKE_TOKEN

#: the renderer module of each platform not named after it: the console renders plain text
RENDERED_AS = {"console": "plain"}


@pytest.mark.parametrize("name", registry.names())
def test_each_platform_renders_with_its_own_module_and_its_limits(name: str) -> None:
    spec = registry.spec(name)
    assert spec.renderer_module == f"digest_core.rendering.{RENDERED_AS.get(name, name)}"
    module = importlib.import_module(spec.renderer_module)
    assert spec.renderer() is module
    limits = module.Limits
    assert issubclass(limits, TextLimits) and limits is not TextLimits
    assert limits.body_maxlen > 0 and limits.unit in ("utf-16", "chars", "bytes")


@pytest.mark.parametrize("name", registry.names())
def test_each_spec_declares_its_pacing(name: str) -> None:
    spec = registry.spec(name)
    defaults = spec.settings() if spec.settings is not None else None  # a value, or settings'
    limits = spec.pacing(defaults)
    assert isinstance(limits, PlatformLimits) and limits.overall.per_second > 0


# ----------------------------------------------------------------- each fact has one name

RENDERING = Path(__file__).resolve().parents[2] / "digest_core" / "rendering"
BOTS = Path(__file__).resolve().parents[2] / "bots"
#: the name of a size limit declared outside a renderer's ``Limits`` (``MAX_TAGS``,
#: ``CUSTOM_ID_LIMIT``, ``TITLE_MAXLEN``)
LIMIT_NAME = re.compile(r"MAX_\w+|\w+_(LIMIT|MAXLEN)")
#: constants named so that are no platform's facts: what the bot's own pages and terminal take
OURS = {
    "bots/console/platform.py": {"MAX_ECHO_LINE"},  # of a typed line, echoed on the terminal
    "bots/email/preferences.py": {"MAX_FORM"},  # the preferences page's HTTP form, in bytes
}


def aliases(source: str) -> list[str]:
    """``line: name`` for each module-level name of ``source`` (a renderer module) that is
    another name of a limit: bound to an attribute of a ``TextLimits`` class of the module
    (``CONTENT_LIMIT = Limits.body_maxlen``). A value computed from one is not an alias."""
    tree = ast.parse(source)
    classes = {
        node.name
        for node in tree.body
        if isinstance(node, ast.ClassDef)
        and any(ast.unparse(b) == "TextLimits" for b in node.bases)
    }
    return [
        f"{node.lineno}: {ast.unparse(target)} = {ast.unparse(node.value)}"
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign)
        and isinstance(node.value, ast.Attribute)
        and isinstance(node.value.value, ast.Name)
        and node.value.value.id in classes
        for target in (node.targets if isinstance(node, ast.Assign) else [node.target])
    ]


def declared_limits(source: str) -> list[str]:
    """``line: name`` for each module-level constant of ``source`` (an adapter module) named
    as a size limit (:data:`LIMIT_NAME`) and bound to a number or to another module's
    constant (``MAX_CALLBACK_DATA = InlineKeyboardButtonLimit.MAX_CALLBACK_DATA``): the
    platform's facts live in its renderer's ``Limits``, which the adapter reads."""
    found = []
    for node in ast.parse(source).body:
        if not isinstance(node, ast.Assign | ast.AnnAssign) or node.value is None:
            continue
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        value = node.value
        number = isinstance(value, ast.Constant) and isinstance(value.value, int)
        if not (number or isinstance(value, ast.Attribute | ast.BinOp)):
            continue
        found += [
            f"{node.lineno}: {target.id}"
            for target in targets
            if isinstance(target, ast.Name) and LIMIT_NAME.fullmatch(target.id)
        ]
    return found


def test_the_rules_on_the_names_of_limits_catch_what_they_should() -> None:
    renderer = (
        "class Limits(TextLimits):\n    body_maxlen = 2000\n    custom_id_maxlen = 100\n"
        "CONTENT_LIMIT = Limits.body_maxlen\n"
        "custom: int = Limits.custom_id_maxlen\n"
        "SUBJECT = Limits.body_maxlen - 9\n"  # computed: fine
        "LABEL = Other.body_maxlen\n"  # not a limits class of the module: fine
    )
    assert len(aliases(renderer)) == 2
    adapter = (
        "MAX_CALLBACK_DATA = InlineKeyboardButtonLimit.MAX_CALLBACK_DATA\n"
        "CUSTOM_ID_LIMIT = 100\n"
        "MAX_INLINE_RESULTS: int = 20\n"
        "TITLE_MAXLEN = 64 - 1\n"
        "DEFER_AFTER_SECONDS = 1.5\n"  # no limit's name: fine
        "AUTH_FAILED, FORBIDDEN, EXCEED_CONN_LIMIT = 514, 403, 1000040350\n"  # error codes
        'MAX_SHOWN = "…"\n'  # not a number
    )
    assert len(declared_limits(adapter)) == 4


def test_each_limit_has_one_name_in_its_renderers_limits() -> None:
    found = []
    for module in sorted(RENDERING.rglob("*.py")):
        found += [f"{module.name}:{hit}" for hit in aliases(module.read_text("utf-8"))]
    assert found == []


def test_adapters_declare_no_limit_of_their_own() -> None:
    found = []
    for module in sorted(BOTS.rglob("*.py")):
        where = module.relative_to(BOTS.parent)
        hits = declared_limits(module.read_text("utf-8"))
        ours = OURS.get(where.as_posix(), set())
        found += [f"{where}:{hit}" for hit in hits if hit.partition(": ")[2] not in ours]
    assert found == []


def test_telegrams_limits_are_those_python_telegram_bot_states() -> None:
    """The renderer names no SDK; the facts it keeps are the SDK's (the adapter read some of
    them from PTB's constants before they moved to ``Limits``)."""
    from telegram.constants import (
        CallbackQueryLimit,
        InlineKeyboardButtonLimit,
        InlineQueryLimit,
        MessageLimit,
    )

    from digest_core.rendering.telegram import Limits

    assert Limits.body_maxlen == MessageLimit.MAX_TEXT_LENGTH
    assert Limits.callback_data_maxlen == InlineKeyboardButtonLimit.MAX_CALLBACK_DATA
    assert Limits.answer_text_maxlen == CallbackQueryLimit.ANSWER_CALLBACK_QUERY_TEXT_LENGTH
    assert Limits.inline_results <= InlineQueryLimit.RESULTS


# ------------------------------------------------------------- the pacing is the spec's


def settings_of_every_platform(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, *, telegram: str = "", email: str = ""
) -> Settings:
    """Settings that configure every platform (the console only as the fallback), with
    ``telegram``'s and ``email``'s extra lines in their tables."""
    for name in list(os.environ):
        if name.upper().startswith("DIGEST_BOT_"):
            monkeypatch.delenv(name)
    webhook = {"ai-team": "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"}
    for name in ("feishu", "dingtalk", "wecom"):
        monkeypatch.setenv(f"DIGEST_BOT_{name.upper()}__WEBHOOKS", json.dumps(webhook))
    monkeypatch.setenv("DIGEST_BOT_TELEGRAM__TOKEN", "123456:" + "A" * 35)
    monkeypatch.setenv("DIGEST_BOT_DISCORD__TOKEN", FAKE_TOKEN)
    monkeypatch.setenv("DIGEST_BOT_EMAIL__SECRET_KEY", "a-test-secret-of-enough-length-0123")
    cfg = tmp_path / "bot.toml"
    cfg.write_text(
        f"[telegram]\n{telegram}\n[discord]\n"
        + "".join(f'[{n}]\ntargets = ["ai-team"]\n' for n in ("feishu", "dingtalk", "wecom"))
        + '[email]\nhost = "127.0.0.1"\nfrom = "digest@example.org"\n'
        + f'address_book = "{tmp_path / "readers.sqlite3"}"\n{email}\n',
        encoding="utf-8",
    )
    return registry.load_settings(cfg)


def built(settings: Settings) -> dict[str, Adapter]:
    """Every platform's adapter as ``run`` builds it (the console asked for by name)."""
    adapters = {a.name: a for a in build_adapters(settings, clock=ManualClock(NOW))}
    [console] = build_adapters(settings, only="console", clock=ManualClock(NOW))
    return {**adapters, "console": console}


def test_each_adapter_paces_as_its_spec_states(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_of_every_platform(tmp_path, monkeypatch)
    adapters = built(settings)
    assert set(adapters) == set(registry.names())
    for name, adapter in adapters.items():
        spec = registry.spec(name)
        section = settings.platform(name) if spec.settings is not None else None
        assert adapter.limits == spec.pacing(section), name
        assert adapter.flavor is spec.renderer(), name
    assert adapters["telegram"].limits is TELEGRAM_LIMITS
    assert adapters["discord"].limits is DISCORD_LIMITS
    assert adapters["wecom"].limits is WECOM_LIMITS


def test_a_configured_relay_rate_and_paid_broadcast_are_paced_as_the_spec_states(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = settings_of_every_platform(
        tmp_path,
        monkeypatch,
        telegram="paid_broadcast = true",
        email="rate_per_second = 3.5\nburst = 4",
    )
    adapters = built(settings)
    email = registry.spec("email")
    assert adapters["email"].limits == email.pacing(settings.platform("email"))
    assert adapters["email"].limits.overall == Rate(3.5, burst=4)
    assert adapters["email"].limits != email.pacing(EmailSettings())  # not the defaults'
    assert adapters["telegram"].limits is PAID_BROADCAST_LIMITS
    assert registry.spec("telegram").pacing(settings.platform("telegram")) is PAID_BROADCAST_LIMITS


def assigned(node: ast.AST) -> tuple[set[str], ast.expr | None]:
    """What ``node`` assigns (its targets as written) and the value; nothing for another node."""
    if isinstance(node, ast.Assign):
        return {ast.unparse(t) for t in node.targets}, node.value
    if isinstance(node, ast.AnnAssign):
        return {ast.unparse(node.target)}, node.value
    return set(), None


def chosen_limits(source: str) -> list[str]:
    """``line: what`` for each place ``source`` (an adapter module) decides the pacing itself:
    a class's ``limits = …`` or ``self.limits = …`` of anything but the ``limits`` it was
    given."""
    found = []
    for node in ast.walk(ast.parse(source)):
        for stmt in node.body if isinstance(node, ast.ClassDef) else []:
            targets, value = assigned(stmt)
            if "limits" in targets and value is not None:
                found.append(f"{stmt.lineno}: {node.name}.limits = {ast.unparse(value)}")
        targets, value = assigned(node)
        if "self.limits" in targets and value is not None and ast.unparse(value) != "limits":
            found.append(f"{node.lineno}: self.limits = {ast.unparse(value)}")
    return found


def test_the_rule_on_adapters_choosing_their_pacing_catches_what_it_should() -> None:
    bad = (
        "class WeComAdapter(WebhookAdapter):\n    limits = WECOM_LIMITS\n"
        "class EmailAdapter:\n"
        "    def __init__(self, settings):\n        self.limits = limits_of(settings)\n"
        "class TelegramAdapter:\n"
        "    def __init__(self, settings, *, limits=None):\n"
        "        self.limits: PlatformLimits = limits or TELEGRAM_LIMITS\n"
    )
    assert len(chosen_limits(bad)) == 3
    fine = (
        "class A:\n    limits: PlatformLimits\n"
        "    def __init__(self, *, limits):\n        self.limits = limits\n"
    )
    assert chosen_limits(fine) == []


def test_no_adapter_chooses_its_own_pacing() -> None:
    found = []
    for module in sorted(BOTS.rglob("*.py")):
        where = module.relative_to(BOTS.parent)
        if where.parts[1] in ("cli", "dashboard") or module.name == "spec.py":
            continue  # the composition side; the specs, which state the pacing
        found += [f"{where}:{hit}" for hit in chosen_limits(module.read_text("utf-8"))]
    assert found == []
