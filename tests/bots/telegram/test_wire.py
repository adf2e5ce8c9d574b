"""sendMessage bodies (SendBodies): a message's fields encoded once, the same request as PTB's.

The adapter used to send through PTB's ``Bot._post`` (its defaults, a RequestParameter per
field, each object as JSON text); these bodies must carry the very fields, in the same order
and form, that PTB's request building gives for ``{"chat_id": ..., **payload, **extra,
"message_thread_id": ...}``: compared here with what PTB makes of them.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from telegram import Bot
from telegram._utils.types import ODVInput
from telegram.request import BaseRequest, RequestData

from bots.telegram import wire
from bots.telegram.wire import SendBodies
from digest_core.rendering import Message
from tests.quick import examples


class _Recording(BaseRequest):
    """A request that keeps what PTB would send (its fields) and answers every call."""

    def __init__(self) -> None:
        self.fields: list[dict[str, str]] = []

    @property
    def read_timeout(self) -> float | None:
        return None

    async def initialize(self) -> None:
        pass

    async def shutdown(self) -> None:
        pass

    async def do_request(
        self,
        url: str,
        method: str,
        request_data: RequestData | None = None,
        read_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        write_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        connect_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
        pool_timeout: ODVInput[float] = BaseRequest.DEFAULT_NONE,
    ) -> tuple[int, bytes]:
        assert request_data is not None
        self.fields.append(request_data.json_parameters)
        return 200, b'{"ok":true,"result":{"message_id":1}}'


def ptb_fields(*sends: dict[str, Any]) -> list[list[tuple[str, str]]]:
    """The fields, in order, that PTB's request building (``Bot._post``, as the adapter called
    it before) makes of each of ``sends``, through its public ``do_api_request``."""
    recording = _Recording()
    bot = Bot("1:token", request=recording, get_updates_request=_Recording())

    async def post() -> None:
        for fields in sends:
            await bot.do_api_request("sendMessage", api_kwargs=dict(fields))

    with pytest.warns(UserWarning, match="Please use 'Bot.sendMessage'"):
        asyncio.run(post())
    return [list(fields.items()) for fields in recording.fields]


def fields_of(
    chat: int | str, topic: int | None, payload: dict[str, Any], extra: dict[str, Any]
) -> dict[str, Any]:
    """What the adapter passed PTB for one send: chat, payload, extra fields, topic."""
    fields = {"chat_id": chat, **payload, **extra}
    if topic is not None:
        fields["message_thread_id"] = topic
    return fields


def expected(
    chat: int | str, topic: int | None, payload: dict[str, Any], extra: dict[str, Any]
) -> list[tuple[str, str]]:
    [fields] = ptb_fields(fields_of(chat, topic, payload, extra))
    return fields


def sent(body: bytes) -> list[tuple[str, str]]:
    """A body's fields, in order (each a string, as PTB sends them)."""
    return list(json.loads(body).items())


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
_payloads = st.fixed_dictionaries(
    {"text": st.text()},
    optional={
        "parse_mode": st.none() | st.sampled_from(["HTML", "MarkdownV2"]),
        "link_preview_options": st.fixed_dictionaries(
            {"is_disabled": st.booleans()}, optional={"url": st.text(max_size=20)}
        ),
        "reply_markup": st.builds(
            lambda rows: {"inline_keyboard": rows},
            st.lists(
                st.lists(
                    st.fixed_dictionaries({"text": st.text(), "callback_data": st.text()}),
                    min_size=1, max_size=3,
                ),
                max_size=2,
            ),
        ),
        "disable_notification": st.booleans(),
        "entities": st.lists(st.none() | st.fixed_dictionaries({"offset": st.integers()})),
        "message_effect_id": _json,
    },
)  # fmt: skip
_chats = st.integers(-(10**13), 10**13) | st.from_regex(
    r"@[A-Za-z][A-Za-z0-9_]{3,30}", fullmatch=True
)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    payload=_payloads,
    chats=st.lists(st.tuples(_chats, st.none() | st.integers(1, 2**31)), min_size=1, max_size=3),
    paid=st.booleans(),
)
def test_a_body_carries_the_fields_ptb_makes_of_the_same_send(
    payload: dict[str, Any], chats: list[tuple[int | str, int | None]], paid: bool
) -> None:
    extra = {"allow_paid_broadcast": True} if paid else {}
    bodies = SendBodies(extra)
    message = Message(payload)
    # the message's fields encoded once, each chat's put around them
    bodies_sent = [sent(bodies.body(chat, topic, message)) for chat, topic in chats]
    assert bodies_sent == ptb_fields(*(fields_of(c, t, payload, extra) for c, t in chats))


def test_a_payload_naming_its_chat_or_topic_is_sent_as_ptb_merged_it() -> None:
    bodies = SendBodies()
    payload = {"text": "x", "message_thread_id": 5, "chat_id": 9}
    for topic in (None, 7):
        body = bodies.body(-1001, topic, Message(payload))
        assert sent(body) == expected(-1001, topic, payload, {})


def test_each_message_is_encoded_once_for_all_its_chats(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    calls: list[object] = []
    encode = wire.encode_json

    def counted(value: Any) -> bytes:
        calls.append(value)
        return encode(value)

    monkeypatch.setattr(wire, "encode_json", counted)
    bodies = SendBodies(size=2)
    parts = [Message({"text": f"第{n}部分"}) for n in range(3)]
    for chat in range(100, 110):
        for part in parts[:2]:
            assert sent(bodies.body(chat, None, part)) == expected(chat, None, part.payload, {})
    assert len(calls) == 2
    # a third message pushes the first out; each body is still its own message's
    for part in (parts[2], parts[0], parts[1], parts[2]):
        assert sent(bodies.body(5, 9, part)) == expected(5, 9, part.payload, {})
    assert len(calls) == 2 + 4
    # an equal message that is another object is encoded for itself
    same = Message(dict(parts[2].payload))
    assert sent(bodies.body(5, None, same)) == expected(5, None, same.payload, {})
