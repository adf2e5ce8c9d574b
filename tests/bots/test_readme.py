"""Issue 20, items 5 and 11: the README is a newcomer's page (under 150 lines, the rest in
docs/ with nothing lost), and its editor example works as printed."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.bots.test_newcomer_run import BIN, ROOT, fresh_clone, prebuilt_venv

README = ROOT / "README.md"
DOCS = ROOT / "docs"

#: facts the README held before it was cut down (issue 20, item 11): each must still be
#: written somewhere, in the README or in docs/
FACTS = [
    "make run     # install, then run the bot on embedded defaults",
    "make test    # install, then lint, type-check and run the whole test suite",
    "digest-bot.db.marker",
    "digest-bot run --new-ledger",
    "`[delivery] ledger_check_seconds`, default 20",
    "…/digest-bot.db?timeout=10",
    "机器人正在重启，请稍后重试 / The bot is restarting, please try again",
    "| `scale` | 1k / 10k / 100k subscribers on SQLite and PostgreSQL",
    "| `corrections` | planning a correction at 10k / 100k subscribers",
    "| `ledger_lock` | a post under another client's 8 s write lock",
    "the bidi controls U+202A–U+202E and U+2066–U+2069",
    "(`https://bank.example@evil.example/` opens evil.example)",
    "| characters in a paragraph, the lede or a reading question | 8,000 |",
    "`2026-12-01.TXT`, a name in other",
    "(`/brief 7 2026-11-27`)",
    "send `/setinline`, choose the",
    "`[schedule] require_approval = true`",
    '`[schedule] corrections = "auto"`',
    "`[telegram] pin = true` / `[discord] pin = true`",
    "`DIGEST_BOT_SCHEDULE__POST_TIME=07:30`",
    "`DIGEST_BOT_TELEGRAM__CHANNELS='[\"@my_channel\"]'`",
    "`digest-bot reactivate telegram:-100123…`",
    "`--log-format json` (one object per line)",
    '`[http] listen =\n"127.0.0.1:8080"` and `[http] site = true`',
    "# SERVER_ID: Discord → User Settings → Advanced → Developer Mode on, then right-click the",
    'export DIGEST_BOT_WECOM__WEBHOOKS=\'{"ai-team": "https://qyapi.weixin.qq.com/cgi-bin/webhook/send?key=…"}\'',
    "benchmarks/    scripts that print performance figures (make bench)",
    "`Headline`, `Briefs` and `Classic` work as section labels too.",
]


def _all_docs() -> str:
    return "\n".join(p.read_text(encoding="utf-8") for p in [README, *sorted(DOCS.glob("*.md"))])


def test_the_readme_is_a_newcomers_page() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) < 150
    assert "make run" in text and "make test" in text
    assert "(docs/design.md)" in text
    for target in re.findall(r"\]\(([^)#:]+)\)", text):  # every relative link resolves
        assert (ROOT / target).exists(), target


@pytest.mark.parametrize("fact", FACTS)
def test_nothing_the_readme_held_is_lost(fact: str) -> None:
    assert fact in _all_docs()


def test_the_moved_pages_link_only_to_what_exists() -> None:
    for page in ("editing", "platforms", "operating", "benchmarks"):
        text = (DOCS / f"{page}.md").read_text(encoding="utf-8")
        for target in re.findall(r"\]\(([^)#:]+)\)", text):
            assert (DOCS / target).exists(), (page, target)


FILL = """\
import sys
from pathlib import Path

path = Path(sys.argv[1])
text = path.read_text(encoding="utf-8")
text = (
    text.replace('lede: ""', "lede: 一句话导语。")
    .replace('title: ""', "title: 一个标题", 3)
    .replace('- ""', "- 一段正文。", 3)
    .replace('question: ""', "question: 一个问题？")
)
path.write_text(text, encoding="utf-8")
"""


@pytest.mark.slow
@pytest.mark.skipif(not (BIN / "digest-bot").exists(), reason="needs an installed digest-bot")
def test_the_readmes_editor_example_works_as_printed(tmp_path: Path) -> None:
    text = README.read_text(encoding="utf-8")
    block = text.split("<!-- editor-example", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line.split("  #", 1)[0].strip() for line in block.splitlines() if line.strip()]
    clone = fresh_clone(tmp_path / "clone")
    prebuilt_venv(clone)
    (tmp_path / "fill.py").write_text(FILL, encoding="utf-8")
    editor = tmp_path / "editor"  # an editor who fills in every empty field
    editor.write_text(f'#!/bin/sh\nexec {sys.executable} {tmp_path / "fill.py"} "$1"\n')
    editor.chmod(0o755)
    before = set((clone / "archive").iterdir())
    env = {"PATH": "/usr/bin:/bin", "EDITOR": str(editor), "HOME": str(tmp_path)}
    for line in lines:
        done = subprocess.run(
            ["sh", "-c", line], cwd=clone, env=env, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, (line, done.stdout, done.stderr)
    [added] = set((clone / "archive").iterdir()) - before
    assert re.fullmatch(r"\d{4}-\d\d-\d\d\.yaml", added.name)
