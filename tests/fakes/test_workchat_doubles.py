"""The Feishu, DingTalk and WeCom doubles themselves: signatures, freshness, size, rates."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.parse

import httpx
import pytest

from bots.workchat.signing import dingtalk_query, feishu_sign
from tests import forkserver
from tests.fakes.dingtalk_api import FakeDingTalk
from tests.fakes.feishu_api import FakeFeishu
from tests.fakes.wecom_api import FakeWeCom

T0 = 1_764_460_800.0  # 2025-11-30 00:00 UTC, the doubles' clock in these tests
POST = {"msg_type": "post", "content": {"post": {"zh_cn": {"title": "t", "content": [
    [{"tag": "text", "text": "hello"}]]}}}}  # fmt: skip
MARKDOWN = {"msgtype": "markdown", "markdown": {"title": "t", "text": "hello"}}
WECOM_MD = {"msgtype": "markdown", "markdown": {"content": "hello"}}


async def feishu_post(
    fake: FakeFeishu, token: str, body: dict[str, object], client: httpx.AsyncClient | None = None
) -> int:
    if client is None:
        async with httpx.AsyncClient() as own:
            return await feishu_post(fake, token, body, own)
    r = await client.post(f"{fake.url}/open-apis/bot/v2/hook/{token}", json=body)
    return int(r.json()["code"])


def signed(secret: str, timestamp: int, body: dict[str, object]) -> dict[str, object]:
    return {"timestamp": str(timestamp), "sign": feishu_sign(secret, timestamp), **body}


# --- Feishu ---------------------------------------------------------------------------------


async def test_feishu_checks_the_signature_and_its_age() -> None:
    async with FakeFeishu(clock=lambda: T0) as fake:
        fake.add_robot("g", "tok-feishu-1", "s3cret")
        assert await feishu_post(fake, "tok-feishu-1", signed("s3cret", int(T0), POST)) == 0
        assert await feishu_post(fake, "tok-feishu-1", signed("wrong", int(T0), POST)) == 19021
        stale = int(T0) - 3601
        assert await feishu_post(fake, "tok-feishu-1", signed("s3cret", stale, POST)) == 19021
        assert await feishu_post(fake, "tok-feishu-1", POST) == 19021  # unsigned
        assert await feishu_post(fake, "unknown-token", POST) == 19001
        assert len(fake.sent("g")) == 1


async def test_feishu_refuses_bad_shapes_and_oversize_bodies() -> None:
    async with FakeFeishu(clock=lambda: T0) as fake:
        fake.add_robot("g", "tok-feishu-2")
        bad = {"msg_type": "post", "content": {"post": {"zh_cn": {"content": [[{"tag": "x"}]]}}}}
        assert await feishu_post(fake, "tok-feishu-2", bad) == 9499
        line = [{"tag": "text", "text": "字" * 7000}]
        big = {"msg_type": "post", "content": {"post": {"zh_cn": {"content": [line]}}}}
        assert len(json.dumps(big, ensure_ascii=False).encode()) > FakeFeishu.BODY_LIMIT
        assert await feishu_post(fake, "tok-feishu-2", big) == 9499
        assert fake.sent("g") == []


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_feishu_enforces_5_a_second_and_100_a_minute() -> None:
    now = [T0]
    async with FakeFeishu(clock=lambda: now[0]) as fake, httpx.AsyncClient() as client:
        fake.add_robot("g", "tok-feishu-3")
        codes = []
        for n in range(110):
            codes.append(await feishu_post(fake, "tok-feishu-3", POST, client))
            if n % 5 == 4:  # 5 at once, then 1.25 s later 5 more: 100 in 25 s
                now[0] += 1.25
        assert codes[:100] == [0] * 100
        assert set(codes[100:]) == {11232}  # the 101st within a minute
        now[0] += 61
        assert await feishu_post(fake, "tok-feishu-3", POST) == 0
        burst = [await feishu_post(fake, "tok-feishu-3", POST) for _ in range(5)]
        assert burst == [0, 0, 0, 0, 11232]  # the 6th in one second


async def test_feishu_records_at_all_pings() -> None:
    async with FakeFeishu() as fake:
        fake.add_robot("g", "tok-feishu-4")
        at = {"msg_type": "post", "content": {"post": {"zh_cn": {"content": [
            [{"tag": "at", "user_id": "all"}]]}}}}  # fmt: skip
        text = {"msg_type": "text", "content": {"text": '<at user_id="all">所有人</at>'}}
        assert await feishu_post(fake, "tok-feishu-4", at) == 0
        assert await feishu_post(fake, "tok-feishu-4", text) == 0
        assert len(fake.robot("g").pings) == 2


# --- DingTalk -------------------------------------------------------------------------------


async def dingtalk_post(fake: FakeDingTalk, query: str, body: dict[str, object]) -> int:
    async with httpx.AsyncClient() as client:
        r = await client.post(f"{fake.url}/robot/send?{query}", json=body)
    return int(r.json()["errcode"])


async def test_dingtalk_checks_the_signature_and_its_age() -> None:
    async with FakeDingTalk(clock=lambda: T0) as fake:
        fake.add_robot("g", "tok-ding-1", "SECs3cret")
        ms = int(T0 * 1000)
        assert (
            await dingtalk_post(fake, dingtalk_query("tok-ding-1", "SECs3cret", ms), MARKDOWN) == 0
        )
        assert (
            await dingtalk_post(fake, dingtalk_query("tok-ding-1", "SECno", ms), MARKDOWN) == 310000
        )
        stale = ms - 3_601_000
        query = dingtalk_query("tok-ding-1", "SECs3cret", stale)
        assert await dingtalk_post(fake, query, MARKDOWN) == 310000
        assert await dingtalk_post(fake, "access_token=tok-ding-1", MARKDOWN) == 310000
        assert await dingtalk_post(fake, "access_token=nope", MARKDOWN) == 300001
        # the sign is URL-encoded exactly once: a raw "+" in it would read as a space
        raw = urllib.parse.parse_qs(dingtalk_query("tok-ding-1", "SECs3cret", ms))["sign"][0]
        unencoded = f"access_token=tok-ding-1&timestamp={ms}&sign={raw}"
        if "+" in raw:
            assert await dingtalk_post(fake, unencoded, MARKDOWN) == 310000
        assert len(fake.sent("g")) == 1


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_dingtalk_holds_a_robot_10_minutes_after_20_a_minute() -> None:
    now = [T0]
    async with FakeDingTalk(clock=lambda: now[0]) as fake:
        fake.add_robot("g", "tok-ding-2")
        codes = [await dingtalk_post(fake, "access_token=tok-ding-2", MARKDOWN) for _ in range(21)]
        assert codes == [0] * 20 + [130101]
        now[0] += 61  # the minute has passed, the penalty has not
        assert await dingtalk_post(fake, "access_token=tok-ding-2", MARKDOWN) == 130101
        now[0] += 600
        assert await dingtalk_post(fake, "access_token=tok-ding-2", MARKDOWN) == 0


async def test_dingtalk_refuses_bad_shapes_and_oversize_bodies() -> None:
    async with FakeDingTalk() as fake:
        fake.add_robot("g", "tok-ding-3")
        assert await dingtalk_post(fake, "access_token=tok-ding-3", {"msgtype": "markdown"}) != 0
        big = {"msgtype": "markdown", "markdown": {"title": "t", "text": "字" * 7000}}
        assert await dingtalk_post(fake, "access_token=tok-ding-3", big) == 460101
        at_all = {**MARKDOWN, "at": {"isAtAll": True}}
        assert await dingtalk_post(fake, "access_token=tok-ding-3", at_all) == 0
        assert fake.robot("g").pings == ["isAtAll"]


# --- WeCom ----------------------------------------------------------------------------------


async def wecom_post(fake: FakeWeCom, key: str, body: dict[str, object]) -> int:
    async with httpx.AsyncClient() as client:
        r = await client.post(f"{fake.url}/cgi-bin/webhook/send", params={"key": key}, json=body)
    return int(r.json()["errcode"])


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_wecom_checks_the_key_the_size_and_the_rate() -> None:
    now = [T0]
    async with FakeWeCom(clock=lambda: now[0]) as fake:
        fake.add_robot("g", "key-wecom-1")
        assert await wecom_post(fake, "wrong-key", WECOM_MD) == 93000
        exact = {"msgtype": "markdown", "markdown": {"content": "a" * 4096}}
        over = {"msgtype": "markdown", "markdown": {"content": "字" * 1366}}  # 4098 bytes
        assert await wecom_post(fake, "key-wecom-1", exact) == 0
        assert await wecom_post(fake, "key-wecom-1", over) == 40058
        codes = [await wecom_post(fake, "key-wecom-1", WECOM_MD) for _ in range(20)]
        assert codes == [0] * 19 + [45009]  # 20 in the minute with `exact`
        now[0] += 60.5
        assert await wecom_post(fake, "key-wecom-1", WECOM_MD) == 0


async def test_wecom_records_mentions_but_not_defused_ones() -> None:
    async with FakeWeCom() as fake:
        fake.add_robot("g", "key-wecom-2")
        live = {"msgtype": "markdown", "markdown": {"content": "hi <@zhangsan>"}}
        dead = {"msgtype": "markdown", "markdown": {"content": "hi \\<@\u200bzhangsan\\>"}}
        assert await wecom_post(fake, "key-wecom-2", live) == 0
        assert await wecom_post(fake, "key-wecom-2", dead) == 0
        assert fake.robot("g").pings == ["<@zhangsan>"]


@pytest.mark.slow
@pytest.mark.parametrize("module", ["feishu_api", "dingtalk_api", "wecom_api"])
def test_standalone_double_prints_its_url(module: str) -> None:
    proc = forkserver.Popen(
        [sys.executable, "-m", f"tests.fakes.{module}", "--robot", "g:tok-standalone-1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().startswith("http://127.0.0.1:")
    finally:
        proc.terminate()
        proc.wait(timeout=10)
