"""The app bot's send API against the Feishu app double: each documented answer becomes the
Platform contract's error (tests/fakes/feishu_app.py cites the pages)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest

from bots.feishu.api import FeishuApi
from bots.workchat.transport import WebhookTransport
from digest_core.clock import SystemClock
from digest_core.port import (
    ConfigError,
    Message,
    RateLimited,
    Rejected,
    TargetGone,
    TransientError,
)
from tests.fakes.feishu_app import CARD_LIMIT, FakeFeishuApp

GROUP = "oc_group0000000000000000000000000"
ANN = "ou_ann00000000000000000000000000"
TEXT = Message({"msg_type": "text", "content": {"text": "你好"}})


@pytest.fixture
async def fs() -> AsyncIterator[FakeFeishuApp]:
    async with FakeFeishuApp() as fake:
        fake.add_chat(GROUP, "group")
        fake.add_chat(ANN, "p2p")
        fake.add_chat("oc_left00000000000000000000000000", "group", reachable=False)
        fake.add_chat("ou_out00000000000000000000000000", "p2p", reachable=False)
        yield fake


@pytest.fixture
async def api(fs: FakeFeishuApp) -> AsyncIterator[FeishuApi]:
    transport = WebhookTransport(platform="feishu", timeout=5.0, secrets=[fs.app_secret])
    await transport.start()
    try:
        yield FeishuApi(
            base=fs.url,
            app_id=fs.app_id,
            app_secret=fs.app_secret,
            transport=transport,
            clock=SystemClock(),
        )
    finally:
        await transport.stop()


async def test_a_part_sent_twice_with_its_uuid_is_created_once(
    fs: FakeFeishuApp, api: FeishuApi
) -> None:
    first = await api.send(GROUP, TEXT, uuid="part-1")
    again = await api.send(GROUP, TEXT, uuid="part-1")
    assert first == again and len(fs.sent(GROUP)) == 1


async def test_feishus_own_trouble_is_transient_and_a_refused_token_is_renewed(
    fs: FakeFeishuApp, api: FeishuApi
) -> None:
    fs.fail_next("internal")  # 230001 "Internal Error": not a bad parameter of ours
    with pytest.raises(TransientError, match="internal error"):
        await api.send(GROUP, TEXT, uuid=None)
    fs.fail_next("server_error")
    with pytest.raises(TransientError):
        await api.send(GROUP, TEXT, uuid=None)
    fs.fail_next("token")
    with pytest.raises(TransientError, match="a new one is fetched"):
        await api.send(GROUP, TEXT, uuid=None)
    await api.send(GROUP, TEXT, uuid=None)  # with a new token
    assert len(fs.sent(GROUP)) == 1
    fs.fail_next("rate_limited")
    with pytest.raises(RateLimited):
        await api.send(GROUP, TEXT, uuid=None)


async def test_the_documented_refusals_become_the_contracts_errors(
    fs: FakeFeishuApp, api: FeishuApi
) -> None:
    with pytest.raises(TargetGone, match="not in this group"):  # 230002
        await api.send("oc_left00000000000000000000000000", TEXT, uuid=None)
    with pytest.raises(TargetGone, match="availability"):  # 230013
        await api.send("ou_out00000000000000000000000000", TEXT, uuid=None)
    with pytest.raises(Rejected, match="invalid"):  # 230001 ext=invalid receive_id
        await api.send("oc_nobody000000000000000000000000", TEXT, uuid=None)
    # 230025: a card over the 30 KB of the send API's body
    big = {"elements": [{"tag": "div", "text": {"tag": "plain_text", "content": "x" * CARD_LIMIT}}]}
    with pytest.raises(Rejected, match="too long"):
        await api.send(GROUP, Message({"card": big}), uuid=None)
    assert len(json.dumps(big)) > CARD_LIMIT and fs.sent(GROUP) == []


async def test_wrong_credentials_are_a_config_error(fs: FakeFeishuApp, api: FeishuApi) -> None:
    api._secret = "wrong"
    with pytest.raises(ConfigError, match="DIGEST_BOT_FEISHU__APP_SECRET"):
        await api.token()
