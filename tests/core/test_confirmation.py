"""The confirmation flow of admin actions, once in the core: prompts, who may press, one run."""

from __future__ import annotations

import asyncio

import pytest

from digest_core.commands import ADMIN, Request
from digest_core.commands.confirmation import (
    CANCEL_DATA,
    CANCEL_LABEL,
    CONFIRM_LABEL,
    Action,
    Confirmations,
    confirm_data,
)
from digest_core.rendering import plain as plain_render
from digest_core.service.root import DigestService
from tests.core.test_service_commands import req, service, text_of

__all__ = ["service"]  # the fixture, shared with the command tests


def presser(user: str = "u1", *, admin: bool) -> Request:
    return Request(
        "", platform="console", flavor=plain_render, user=user, chat="c1",
        capabilities=ADMIN if admin else frozenset(),
    )  # fmt: skip


async def prompt_data(service: DigestService, *args: str) -> str:
    reply = await service.commands.handle(req("repost", *args, admin=True))
    prompt = service.confirmations.prompt(reply)
    assert [b.label for b in prompt.buttons] == [CONFIRM_LABEL, CANCEL_LABEL]
    assert prompt.buttons[1].data == CANCEL_DATA
    assert "确认重新推送" in text_of(prompt.messages)
    return prompt.buttons[0].data


async def test_a_prompt_carries_the_resolved_request(service: DigestService) -> None:
    assert await prompt_data(service, "force") == "cf:repost:2026-11-30 force"


async def test_a_prompt_too_long_to_carry_has_no_buttons(service: DigestService) -> None:
    reply = await service.commands.handle(req("repost", "2026-11-30", admin=True))
    prompt = service.confirmations.prompt(reply, limit=10)
    assert prompt.buttons == () and "参数太长" in text_of(prompt.messages)
    assert confirm_data(Request("repost", ("2026-11-30",)), limit=10) is None


async def test_an_admin_confirms_and_the_core_runs_it_once(service: DigestService) -> None:
    data = await prompt_data(service, "2026-11-30")
    flow: Confirmations = service.confirmations
    async with flow.press(data, by=presser(admin=True), prompt="p1") as decision:
        assert decision.action is Action.RUN and "已确认" in decision.note
        # a second press of the same prompt meanwhile runs nothing
        async with flow.press(data, by=presser(admin=True), prompt="p1") as again:
            assert again.action is Action.BUSY
        reply = await flow.run(decision)
    assert "sent 1" in text_of(reply.messages)
    async with flow.press(data, by=presser(admin=True), prompt="p1") as later:
        assert later.action is Action.RUN  # released once the run ended
    assert [(e.action, e.allowed) for e in await service.ledger.audit_log()] == [("repost", True)]


async def test_a_readers_press_is_refused_by_the_core_and_audited(service: DigestService) -> None:
    data = await prompt_data(service)
    flow = service.confirmations
    async with flow.press(data, by=presser("u2", admin=False), prompt="p") as decision:
        assert decision.action is Action.REFUSE and "只有管理员" in decision.text
    async with flow.press(CANCEL_DATA, by=presser("u2", admin=False), prompt="p") as cancel:
        assert cancel.action is Action.REFUSE and "只有管理员" in cancel.text
    assert await service.ledger.records(limit=1) == []
    entries = [(e.action, e.allowed, e.user_id) for e in await service.ledger.audit_log()]
    assert entries == [("repost", False, "u2")]


async def test_where_the_asker_is_known_only_they_may_press(service: DigestService) -> None:
    data = await prompt_data(service)
    flow = service.confirmations
    for pressed in (data, CANCEL_DATA):
        async with flow.press(
            pressed, by=presser("u9", admin=True), prompt="p", asked_by="u1"
        ) as d:
            assert d.action is Action.REFUSE and "只有发起的管理员" in d.text
    async with flow.press(CANCEL_DATA, by=presser(admin=True), prompt="p", asked_by="u1") as d:
        assert d.action is Action.CANCEL and "已取消" in d.note
    assert await service.ledger.audit_log() == []  # nothing was attempted


@pytest.mark.parametrize("data", ["dg:2026-11-30:headline", "cf::", "cf", ""])
async def test_other_buttons_are_ignored(service: DigestService, data: str) -> None:
    async with service.confirmations.press(data, by=presser(admin=True), prompt="p") as d:
        assert d.action is Action.IGNORE


async def test_a_failed_run_releases_the_prompt(service: DigestService) -> None:
    data = await prompt_data(service)
    flow = service.confirmations
    with pytest.raises(asyncio.CancelledError):
        async with flow.press(data, by=presser(admin=True), prompt="p"):
            raise asyncio.CancelledError
    async with flow.press(data, by=presser(admin=True), prompt="p") as d:
        assert d.action is Action.RUN
