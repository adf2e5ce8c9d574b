"""The Feishu app double checked against lark-oapi's own clients: its long connection (frames,
pings, acks, split payloads), its HTTP callback (encryption, signature, the challenge), its
token and send API; and its strictness (limits, codes)."""

from __future__ import annotations

import asyncio
import json
import threading
from typing import Any

import aiohttp
import httpx
import pytest

from bots.workchat.sdkthread import SdkThread
from tests.fakes import lark_frames
from tests.fakes.feishu_app import AUTH_FAILED, CARD_LIMIT, EXCEED_CONN_LIMIT, FakeFeishuApp

# the Feishu SDK's import takes 2-4 s of CPU (every API's models): one worker pays it for
# all of the tests that load it in-process (tests/xdist_groups.py), and make check leaves
# them out (slow)
pytestmark = [
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.xdist_group("lark"),
    pytest.mark.slow,
]


def test_frames_round_trip_through_the_sdk_codec() -> None:
    from lark_oapi.ws.pb.pbbp2_pb2 import Frame as SdkFrame

    ours = lark_frames.Frame(
        seq_id=7,
        log_id=9,
        service=3,
        method=lark_frames.DATA,
        headers=[("type", "event"), ("sum", "1")],
        payload="飞书".encode(),
    )
    theirs = SdkFrame()
    theirs.ParseFromString(lark_frames.encode(ours))
    assert (theirs.SeqID, theirs.service, theirs.method) == (7, 3, 1)
    assert [(h.key, h.value) for h in theirs.headers] == ours.headers
    assert lark_frames.decode(theirs.SerializeToString()) == ours
    with pytest.raises(ValueError, match="required"):
        lark_frames.decode(b"")


async def test_the_sdk_long_connection_pings_receives_split_events_and_acks() -> None:
    import lark_oapi as lark
    import lark_oapi.ws.client as ws_client

    got: list[Any] = []
    async with FakeFeishuApp() as fs:
        fs.add_chat("ou_ann", "p2p")
        client: Any = None

        async def setup(loop: asyncio.AbstractEventLoop) -> None:
            nonlocal client
            ws_client.loop = loop
            handler = (
                lark.EventDispatcherHandler.builder("", "")
                .register_p2_im_message_receive_v1(got.append)
                .build()
            )
            client = lark.ws.Client(
                fs.app_id,
                fs.app_secret,
                event_handler=handler,
                domain=fs.url,
                log_level=lark.LogLevel.ERROR,
            )
            await client._connect()
            loop.create_task(client._ping_loop())

        async def teardown() -> None:
            client._auto_reconnect = False
            await client._disconnect()

        thread = SdkThread("sdk-test", setup=setup, teardown=teardown)
        await thread.start(within=20)
        try:
            await fs.wait_connected()
            delivery = await fs.push(fs.message_event("ou_ann", "ou_ann", "/today"), parts=3)
            assert delivery.acks and delivery.acks[-1]["code"] == 200
            assert delivery.pushes == 1
            assert got[0].event.message.chat_type == "p2p"
            assert json.loads(got[0].event.message.content) == {"text": "/today"}
            await fs.wait_pinged()  # the SDK pings as its ping loop starts
        finally:
            await thread.stop()


async def test_a_wrong_secret_is_refused_at_the_endpoint() -> None:
    from lark_oapi.ws import const

    assert (AUTH_FAILED, EXCEED_CONN_LIMIT) == (const.AUTH_FAILED, const.EXCEED_CONN_LIMIT)
    async with FakeFeishuApp() as fs, httpx.AsyncClient() as http:
        answer = (
            await http.post(
                fs.url + "/callback/ws/endpoint", json={"AppID": fs.app_id, "AppSecret": "wrong"}
            )
        ).json()
        assert answer["code"] == AUTH_FAILED
        token = (
            await http.post(
                fs.url + "/open-apis/auth/v3/tenant_access_token/internal",
                json={"app_id": fs.app_id, "app_secret": "x"},
            )
        ).json()
        assert token["code"] == 10014


async def test_the_sdk_decrypts_and_verifies_the_double_callbacks() -> None:
    import lark_oapi as lark
    from lark_oapi.core.model import RawRequest

    received: list[Any] = []
    async with FakeFeishuApp() as fs:
        fs.add_chat("oc_group", "group")
        handler = (
            lark.EventDispatcherHandler.builder(fs.encrypt_key, fs.verification_token)
            .register_p2_im_message_receive_v1(received.append)
            .build()
        )

        async def serve(request: aiohttp.web.Request) -> aiohttp.web.Response:
            raw = RawRequest()
            raw.body = await request.read()
            raw.headers = dict(request.headers)
            answer = handler.do(raw)
            return aiohttp.web.Response(status=answer.status_code, body=answer.content)

        app = aiohttp.web.Application()
        app.router.add_post("/events", serve)
        runner = aiohttp.web.AppRunner(app)
        await runner.setup()
        site = aiohttp.web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        url = f"http://127.0.0.1:{runner.addresses[0][1]}/events"
        try:
            async with aiohttp.ClientSession() as session:
                status, body = await fs.post_callback(session, url, fs.verification_event("c-1"))
                assert (status, body) == (200, {"challenge": "c-1"})
                event = fs.message_event("oc_group", "ou_ann", "/today", mention_bot=True)
                status, _ = await fs.post_callback(session, url, event)
                assert status == 200
                assert json.loads(received[0].event.message.content)["text"].endswith("/today")
                status, _ = await fs.post_callback(session, url, event, sign="0" * 64)
                assert status == 500 and len(received) == 1  # the SDK refused the signature
        finally:
            await runner.cleanup()


async def test_the_sdk_api_client_sends_through_the_double() -> None:
    import lark_oapi as lark
    from lark_oapi.api.im.v1 import CreateMessageRequest, CreateMessageRequestBody

    async with FakeFeishuApp() as fs:
        fs.add_chat("oc_group", "group")
        client = (
            lark.Client.builder()
            .app_id(fs.app_id)
            .app_secret(fs.app_secret)
            .domain(fs.url)
            .log_level(lark.LogLevel.ERROR)
            .build()
        )
        request = (
            CreateMessageRequest.builder()
            .receive_id_type("chat_id")
            .request_body(
                CreateMessageRequestBody.builder()
                .receive_id("oc_group")
                .msg_type("text")
                .content(json.dumps({"text": "你好"}))
                .uuid("u-1")
                .build()
            )
            .build()
        )
        result: list[Any] = []
        thread = threading.Thread(
            target=lambda: result.append(client.im.v1.message.create(request))
        )
        thread.start()
        await asyncio.to_thread(thread.join, 10)
        assert result[0].success(), (result[0].code, result[0].msg)
        assert result[0].data.message_id.startswith("om_")
        assert fs.sent("oc_group")[0]["content"] == {"text": "你好"}


async def _send(http: httpx.AsyncClient, fs: FakeFeishuApp, body: dict[str, Any]) -> Any:
    token = (
        await http.post(
            fs.url + "/open-apis/auth/v3/tenant_access_token/internal",
            json={"app_id": fs.app_id, "app_secret": fs.app_secret},
        )
    ).json()
    headers = {"Authorization": f"Bearer {token['tenant_access_token']}"}
    id_type = "open_id" if body["receive_id"].startswith("ou_") else "chat_id"
    return await http.post(
        fs.url + f"/open-apis/im/v1/messages?receive_id_type={id_type}", json=body, headers=headers
    )


async def test_the_double_refuses_what_feishu_refuses() -> None:
    async with FakeFeishuApp() as fs, httpx.AsyncClient() as http:
        fs.add_chat("oc_group", "group")
        fs.add_chat("oc_left", "group", reachable=False)
        fs.add_chat("ou_out", "p2p", reachable=False)
        text = {"msg_type": "text", "content": json.dumps({"text": "hi"})}
        codes = []
        for _ in range(6):  # 5 a second to one chat
            codes.append((await _send(http, fs, {"receive_id": "oc_group", **text})).json()["code"])
        assert codes == [0] * 5 + [230020]
        left = await _send(http, fs, {"receive_id": "oc_left", **text})
        assert left.json()["code"] == 230002
        out = await _send(http, fs, {"receive_id": "ou_out", **text})
        assert out.json()["code"] == 230013
        big = {
            "msg_type": "interactive",
            "content": json.dumps(
                {
                    "elements": [
                        {"tag": "div", "text": {"tag": "plain_text", "content": "字" * CARD_LIMIT}}
                    ]
                }
            ),
        }
        assert (await _send(http, fs, {"receive_id": "oc_group", **big})).json()["code"] == 230025
        bad_card = {
            "msg_type": "interactive",
            "content": json.dumps(
                {
                    "elements": [
                        {
                            "tag": "action",
                            "actions": [{"tag": "button", "value": "x", "text": {"content": "a"}}],
                        }
                    ]
                }
            ),
        }
        fs.rate_limits = False
        assert (await _send(http, fs, {"receive_id": "oc_group", **bad_card})).json()[
            "code"
        ] == 230099


async def test_a_uuid_sent_again_creates_nothing_more() -> None:
    async with FakeFeishuApp() as fs, httpx.AsyncClient() as http:
        fs.add_chat("oc_group", "group")
        body = {
            "receive_id": "oc_group",
            "msg_type": "text",
            "uuid": "part-1",
            "content": json.dumps({"text": "hi"}),
        }
        first = (await _send(http, fs, body)).json()["data"]["message_id"]
        second = (await _send(http, fs, body)).json()["data"]["message_id"]
        assert first == second and len(fs.sent("oc_group")) == 1
        assert fs.replays == [{"uuid": "part-1", "chat_id": "oc_group", "message_id": first}]
