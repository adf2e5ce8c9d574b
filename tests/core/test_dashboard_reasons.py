"""The Audience page's reasons: a deactivated target's error text, as each platform words it,
sorted into a few kinds an editor reads at a glance."""

from __future__ import annotations

import pytest

from digest_core.service.dashboard import gone_reason


@pytest.mark.parametrize(
    ("text", "label"),
    [
        ("TargetGone: Forbidden: bot was blocked by the user",
         "被读者屏蔽 / blocked by the reader"),
        ("TargetGone: 403 (code 50007): Cannot send messages to this user",
         "被读者屏蔽 / blocked by the reader"),
        ("TargetGone: Forbidden: user is deactivated", "账号已注销 / account deleted"),
        ("TargetGone: Forbidden: bot was kicked from the supergroup chat",
         "被移出 / removed from the chat"),
        ("TargetGone: Bad Request: chat not found", "会话已删除 / chat deleted"),
        ("TargetGone: 404 (code 10003): Unknown Channel", "会话已删除 / chat deleted"),
        ("TargetGone: 550 5.1.1: the address is refused", "邮箱拒收 / address refused (bounce)"),
        ("moved to -100123", "已迁移 / moved"),
        ("TargetGone: something new", "其他 / other"),
    ],
)  # fmt: skip
def test_a_deactivation_reads_as_its_kind(text: str, label: str) -> None:
    assert gone_reason(text, moved=False) == label


def test_a_moved_target_is_moved_whatever_its_text() -> None:
    assert gone_reason("", moved=True) == "已迁移 / moved"
