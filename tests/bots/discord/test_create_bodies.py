"""The create- and edit-message bodies: each message's JSON encoded once, the nonce added
per send (issue #24, item 5), the same JSON as encoding the whole payload each time, in
UTF-8."""

from __future__ import annotations

import json

from bots.discord.adapter import CreateBodies, EditBodies
from digest_core.rendering import Message
from digest_core.rendering.discord import ALLOWED_MENTIONS


def _sent(payload: dict[str, object], nonce: str) -> dict[str, object]:
    """What ``send`` posted before: the payload with its three keys set."""
    return {
        **payload,
        "allowed_mentions": dict(ALLOWED_MENTIONS),
        "nonce": nonce,
        "enforce_nonce": True,
    }


def test_a_body_is_the_payload_with_mentions_off_and_the_nonce() -> None:
    bodies = CreateBodies()
    message = Message({"content": "héllo ✓", "embeds": [{"title": "t", "fields": []}]})
    for nonce in ("first", "second"):
        body = bodies.body(message, nonce)
        assert json.loads(body) == _sent(message.payload, nonce)
        assert "héllo ✓".encode() in body  # UTF-8, not escaped to ASCII
    assert json.loads(bodies.body(Message({}), "n")) == _sent({}, "n")


def test_a_payload_that_cannot_be_utf8_is_escaped_as_discord_py_escapes_it() -> None:
    payload = {"content": "half a pair: \ud83d ✓"}
    body = CreateBodies().body(Message(payload), "n")
    assert json.loads(body) == _sent(payload, "n")
    assert b"\\ud83d \\u2713" in body  # ASCII, as json.dumps escapes it


def test_a_payloads_own_mentions_and_nonce_are_replaced() -> None:
    payload = {"content": "x", "allowed_mentions": {"parse": ["everyone"]}, "nonce": "old"}
    body = CreateBodies().body(Message(payload), "new")
    assert json.loads(body) == _sent(payload, "new")
    assert body.count(b'"nonce"') == 1 and body.count(b'"allowed_mentions"') == 1


def test_a_payload_given_another_value_is_encoded_again() -> None:
    bodies = CreateBodies()
    message = Message({"content": "before"})
    bodies.body(message, "n")
    message.payload["content"] = "after"
    message.payload["components"] = []
    assert json.loads(bodies.body(message, "n")) == _sent(message.payload, "n")


def test_only_the_last_messages_are_kept() -> None:
    bodies = CreateBodies()
    messages = [Message({"content": str(i)}) for i in range(3 * CreateBodies.SIZE)]
    for m in messages:
        assert json.loads(bodies.body(m, "n"))["content"] == m.payload["content"]
    assert len(bodies._known) == CreateBodies.SIZE


def test_an_edit_body_is_the_payload_with_absent_parts_cleared_and_mentions_off() -> None:
    bodies = EditBodies()
    embeds = [{"title": "标题", "fields": [{"name": "n", "value": "v"}]}]
    rows = [{"type": 1, "components": []}]
    cases = [
        ({"content": "改正 ✓"}, {"content": "改正 ✓", "embeds": [], "components": []}),
        (
            {"embeds": embeds, "components": rows, "allowed_mentions": {"parse": ["everyone"]}},
            {"content": "", "embeds": embeds, "components": rows},
        ),
    ]
    for payload, edited in cases:
        message = Message(payload)
        body = bodies.body(message)
        assert json.loads(body) == {**edited, "allowed_mentions": dict(ALLOWED_MENTIONS)}
        assert bodies.body(message) is body  # encoded once
    assert "改正 ✓".encode() in bodies.body(Message({"content": "改正 ✓"}))  # UTF-8
