"""JsonRequest over real sockets: its failures as the adapter translates them (a request that
never left is a plain transient error, one whose answer did not come may have arrived), and
bodies encoded by the caller (EncodedJson): sent as they are, answered and failing as PTB's
own requests are."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
from telegram.error import NetworkError, TelegramError, TimedOut
from telegram.request import RequestData
from telegram.request._requestparameter import RequestParameter

from bots.network import tls_context
from bots.telegram.request import (
    EncodedJson,
    JsonRequest,
    encode_json,
    message_id_answer,
)
from bots.telegram.wire import translate
from digest_core.errors import DeliveryError, OutcomeUnknown, TransientError
from digest_core.platform import Target, TargetKind
from tests import ports

TARGET = Target("telegram", "-1001", TargetKind.CHANNEL)


def _request(*, pool: int = 4, read: float = 0.2) -> JsonRequest:
    return JsonRequest(
        connection_pool_size=pool,
        connect_timeout=1.0,
        read_timeout=read,
        write_timeout=1.0,
        pool_timeout=0.2,
    )


def _data() -> RequestData:
    fields = {"chat_id": -1001, "text": "早报"}
    return RequestData([RequestParameter.from_input(k, v) for k, v in fields.items()])


#: what _server answers by default
SENT = (200, json.dumps({"ok": True, "result": {"message_id": 7}}).encode())


@asynccontextmanager
async def _server(
    *, answer: bool, reply: tuple[int, bytes] = SENT
) -> AsyncIterator[tuple[str, list[bytes], asyncio.Event]]:
    """A Bot API stand-in on loopback: its URL, the requests it read and an event set at the
    first; it answers each request ``reply`` (status, JSON body) or, without ``answer``,
    never."""
    seen: list[bytes] = []
    arrived, release = asyncio.Event(), asyncio.Event()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            int(line.split(b":")[1])
            for line in head.split(b"\r\n")
            if line.lower().startswith(b"content-length")
        )
        seen.append(head + await reader.readexactly(length))
        arrived.set()
        if answer:
            status, body = reply
            writer.write(
                b"HTTP/1.1 %d -\r\nContent-Type: application/json\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (status, len(body), body)
            )
            await writer.drain()
        await release.wait()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", ports.free_port())
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/bot1:token/sendMessage", seen, arrived
    finally:
        release.set()
        server.close()
        await server.wait_closed()


async def _failure(request: JsonRequest, url: str) -> tuple[TelegramError, DeliveryError]:
    with pytest.raises(TelegramError) as info:
        await request.post(url, _data())
    return info.value, translate(info.value, TARGET)


async def test_a_json_send_arrives_as_one_json_body_and_returns_the_result() -> None:
    request = _request()
    async with _server(answer=True) as (url, seen, _):
        await request.initialize()
        try:
            result = await request.post(url, _data())
        finally:
            await request.shutdown()
    assert result == {"message_id": 7}
    [raw] = seen
    head, _, body = raw.partition(b"\r\n\r\n")
    assert b"content-type: application/json" in head.lower()
    # (the form's fields as PTB makes them: each value a string)
    assert json.loads(body) == {"chat_id": "-1001", "text": "早报"}
    assert "早报".encode() in body  # UTF-8, not \\u escapes: half the bytes for Chinese


async def _post(
    request: JsonRequest, data: RequestData, *, reply: tuple[int, bytes] = SENT
) -> tuple[object, bytes]:
    """What ``request.post`` of ``data`` returned (or raised) and the body that arrived."""
    async with _server(answer=True, reply=reply) as (url, seen, _):
        try:
            result: object = await request.post(url, data)
        except TelegramError as exc:
            result = exc
    [raw] = seen
    return result, raw.partition(b"\r\n\r\n")[2]


async def test_an_encoded_body_is_sent_as_it_is_and_its_answer_cut_to_the_message_id() -> None:
    message = {
        "message_id": 42, "date": 1, "chat": {"id": -1001, "type": "channel"},
        "text": "早报" * 2000, "entities": [{"type": "bold", "offset": 0, "length": 2}],
    }  # fmt: skip
    body = b'{"chat_id":"-1001","text":"\xe6\x97\xa9"}'
    request = _request()
    await request.initialize()
    try:
        # a whole Message in the answer, spaced as json.dumps spaces it, or compact
        for answer in (lambda v: json.dumps(v).encode(), encode_json):
            reply = (200, answer({"ok": True, "result": message}))
            result, sent = await _post(
                request, EncodedJson(body, message_id_only=True), reply=reply
            )
            assert sent == body
            assert result == {"message_id": 42}
            # without message_id_only: the whole result, as PTB parses it
            result, _ = await _post(request, EncodedJson(body), reply=reply)
            assert result == message
    finally:
        await request.shutdown()


@pytest.mark.parametrize(
    "answer",
    [
        {"ok": True, "result": {"message_id": 7, "text": "x"}},
        {"ok": True, "result": {"date": 1, "message_id": 7}},  # not first: parsed whole
        {"ok": True, "result": {"message_id": 7.5}},
        {"ok": True, "result": True},
        {"result": {"message_id": 7}, "ok": True},
        {"ok": False, "result": {"message_id": 7}},
    ],
)
def test_a_cut_answer_reads_as_the_whole_one(answer: dict[str, object]) -> None:
    for payload in (
        json.dumps(answer).encode(),
        encode_json(answer),
        json.dumps(answer, indent=2).encode(),
    ):
        cut = JsonRequest.parse_json_payload(message_id_answer(payload))
        whole = JsonRequest.parse_json_payload(payload)
        assert cut["ok"] == whole["ok"]
        if isinstance(whole["result"], dict) and "message_id" in whole["result"]:
            assert cut["result"]["message_id"] == whole["result"]["message_id"]
        else:
            assert cut == whole


def _answer(status: int, description: str, **parameters: object) -> tuple[int, bytes]:
    body: dict[str, object] = {"ok": False, "error_code": status, "description": description}
    if parameters:
        body["parameters"] = parameters
    return status, json.dumps(body).encode()


@pytest.mark.filterwarnings("ignore::telegram.warnings.PTBDeprecationWarning")
@pytest.mark.parametrize(
    "reply",
    [
        _answer(400, "Bad Request: chat not found"),
        _answer(400, "Bad Request: can't parse entities: unclosed tag"),
        _answer(403, "Forbidden: bot was blocked by the user"),
        _answer(429, "Too Many Requests: retry after 7", retry_after=7),
        _answer(400, "Bad Request: group chat was upgraded", migrate_to_chat_id=-1005),
        _answer(401, "Unauthorized"),
        _answer(500, "Internal Server Error"),
        (502, b"<html>Bad Gateway</html>"),
    ],
)
async def test_an_encoded_send_fails_as_ptbs_own_request_fails(reply: tuple[int, bytes]) -> None:
    request = _request()
    await request.initialize()
    try:
        encoded, _ = await _post(request, EncodedJson(b"{}", message_id_only=True), reply=reply)
        own, _ = await _post(request, _data(), reply=reply)
    finally:
        await request.shutdown()
    assert isinstance(encoded, TelegramError) and type(encoded) is type(own)
    assert str(encoded) == str(own)
    assert vars(encoded) == vars(own)  # retry_after, new_chat_id, message
    assert type(translate(encoded, TARGET)) is type(translate(own, TARGET))


def test_json_is_utf8_and_a_lone_surrogate_is_escaped() -> None:
    assert encode_json({"text": "早报 ✓", "n": [1]}) == '{"text":"早报 ✓","n":[1]}'.encode()
    assert json.loads(encode_json({"text": "a\ud800b"})) == {"text": "a\ud800b"}


async def test_an_answer_that_never_comes_may_have_arrived() -> None:
    request = _request()
    async with _server(answer=False) as (url, seen, _):
        await request.initialize()
        try:
            error, translated = await _failure(request, url)
        finally:
            await request.shutdown()
    assert len(seen) == 1  # it did reach the server
    assert isinstance(error, TimedOut)
    assert type(translated) is OutcomeUnknown


@pytest.mark.slow  # over 0.25 s: left out of make check
async def test_no_free_connection_in_the_pool_timeout_never_left() -> None:
    request = _request(pool=1, read=30.0)
    async with _server(answer=False) as (url, seen, arrived):
        await request.initialize()
        hanging = asyncio.ensure_future(request.post(url, _data()))
        try:
            await arrived.wait()  # the only connection is taken
            error, translated = await _failure(request, url)
        finally:
            hanging.cancel()
            await asyncio.gather(hanging, return_exceptions=True)
            await request.shutdown()
    assert len(seen) == 1  # the second request never reached the server
    assert isinstance(error, TimedOut) and "pool timeout" in error.message.lower()
    assert type(translated) is TransientError


async def test_a_refused_connection_never_left() -> None:
    request = _request()
    await request.initialize()
    try:
        url = f"http://127.0.0.1:{ports.free_port()}/bot1:token/sendMessage"
        error, translated = await _failure(request, url)
    finally:
        await request.shutdown()
    assert isinstance(error, NetworkError) and not isinstance(error, TimedOut)
    assert type(translated) is TransientError


async def test_a_shut_down_request_refuses_to_send() -> None:
    request = _request()
    await request.initialize()
    await request.shutdown()
    with pytest.raises(RuntimeError, match="not initialized"):
        await request.do_request("http://127.0.0.1:1/bot1:token/sendMessage", "POST", _data())


async def test_every_httpx_client_shares_one_tls_context_made_as_httpx_makes_it() -> None:
    import ssl

    first, second = _request(), _request()
    contexts = {id(r._client._transport._pool._ssl_context) for r in (first, second)}
    assert contexts == {id(tls_context())}  # the CAs loaded once, not once a client
    context = tls_context()
    assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
    # the same trust as httpx's own (SSL_CERT_FILE, else certifi): the CAs it loaded
    import httpx

    own = httpx.create_ssl_context()
    assert context.cert_store_stats() == own.cert_store_stats()
    await first.shutdown()
    await second.shutdown()
