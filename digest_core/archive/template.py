"""The commented issue template `digest-bot new` writes: YAML, every field explained."""

from __future__ import annotations

import datetime as dt
import logging

log = logging.getLogger(__name__)

#: The template, with ``{date}`` to fill in. Its texts are empty on purpose: until an editor
#: writes them the file does not validate, so a template is never published by mistake.
_TEMPLATE = """\
# AI 技术日报 · {date}
# 填好后检查并放入存档 / fill it in, then check and store it:
#   digest-bot validate {name}
#   digest-bot archive add {name}
# 以 # 开头的行是注释，可以留着 / lines starting with # are comments and may stay.
# 空的 "" 必须填写，否则不能通过检查 / every empty "" must be filled in before it validates.
# 规则 / the rules: docs/format.md

date: {date}

# 报头：通常不用改 / the masthead, usually left as it is
masthead: AI 技术日报

# 本期导语，一句话（可删去）/ the lede: one sentence (optional: delete the line)
lede: ""

# 重点：恰好一条 / the headline: exactly one item
headline:
  title: ""
  # 每个段落一项，至少一段 / one entry per paragraph, at least one
  paragraphs:
    - ""
  # 可选：带着一个问题读 / optional: a reading question
  # question: ""
  # 可选：原文链接，https:// 开头，最多 20 个 / optional: source links (https://…), at most 20
  links: []

# 简讯：零到两百条，每条与重点的写法相同 / briefs: none to 200, each written as the headline
briefs:
  - title: ""
    paragraphs:
      - ""
    links: []

# 经典回顾：可选，最多一条；不要时删去整段 / the classic review: optional, at most one;
# delete the whole block when there is none
classic:
  title: ""
  paragraphs:
    - ""
  question: ""
  links: []
"""


def issue_template(date: dt.date, *, name: str | None = None) -> str:
    """The commented YAML template of the issue of ``date`` (it does not validate unfilled);
    its comments name the file ``name`` (default ``DATE.yaml``) in the commands to run."""
    return _TEMPLATE.format(date=date.isoformat(), name=name or f"{date.isoformat()}.yaml")
