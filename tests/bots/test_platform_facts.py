"""One place per platform: its renderer (with its text and size limits) is one module of
``digest_core/rendering/``, and its pacing sits on its registry spec."""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

from bots import registry
from digest_core.rendering import TextLimits

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
    limits = registry.spec(name).limits
    assert limits is not None and limits.overall.per_second > 0


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
