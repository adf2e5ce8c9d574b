"""Threads and forum channels in the Discord double: forum posts, threads on a message, archived
and locked threads, forum tags; request bodies checked against Discord's own OpenAPI schemas.

The thread routes' bodies are validated with the schemas in ``discord_threads_spec.json``, copied
from discord/discord-api-spec (the commit is in the file): a forum post needs a name of 1-100
characters and a message, takes at most 5 ``applied_tags``, an ``auto_archive_duration`` of 60,
1440, 4320 or 10080. What the schemas cannot say is checked as Discord documents it
(https://discord.com/developers/docs/resources/channel, /topics/threads): a tag the forum does
not list, a forum that requires a tag, a second thread on one message (160004), a message to a
forum channel itself (40058), edits in an archived thread (50083: a send unarchives it), a locked
thread (160005) without Manage Threads, and the permissions Create Public Threads and Send
Messages in Threads. Where Discord documents no error code (an unknown tag), the code is ours.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.fakes import discord_payloads as p
from tests.fakes.discord_payloads import Json

SPEC = json.loads(Path(__file__).with_name("discord_threads_spec.json").read_text("utf-8"))
SCHEMAS: dict[str, Json] = SPEC["schemas"]

# channel types and flags (https://discord.com/developers/docs/resources/channel)
TEXT, ANNOUNCEMENT, PUBLIC_THREAD, PRIVATE_THREAD, FORUM = 0, 5, 11, 12, 15
THREAD_TYPES = (10, PUBLIC_THREAD, PRIVATE_THREAD)
#: a forum whose posts must carry a tag; a post pinned in its forum
REQUIRE_TAG = 1 << 4
PINNED = 1 << 1
#: a message's flag: a thread was started from it
HAS_THREAD = 1 << 5
# permission bits (https://discord.com/developers/docs/topics/permissions)
MANAGE_THREADS = 1 << 34
CREATE_PUBLIC_THREADS = 1 << 35
SEND_MESSAGES_IN_THREADS = 1 << 38


class ThreadRefused(Exception):
    """An error answer (status, code, message, errors tree), as :class:`ApiError` carries it
    (the double raises ApiError from this: the two modules do not import each other)."""

    def __init__(self, status: int, code: int, message: str, errors: Json | None = None) -> None:
        super().__init__(f"{status} {code} {message}")
        self.status, self.code, self.message, self.errors = status, code, message, errors


def _error(errors: Json, path: list[str | int], code: str, message: str) -> None:
    node = errors
    for key in path:
        node = node.setdefault(str(key), {})
    node.setdefault("_errors", []).append({"code": code, "message": message})


def validate(body: Json, schema_name: str) -> Json:
    """The errors tree of ``body`` against the spec's ``schema_name`` (empty: valid). Covers
    what the thread schemas use: required keys, types (null allowed where the schema says),
    string lengths, integer ranges, array lengths, the auto-archive durations' constants."""
    schema = SCHEMAS[schema_name]
    errors: Json = {}
    for key in schema.get("required", []):
        if body.get(key) is None:
            _error(errors, [key], "BASE_TYPE_REQUIRED", "This field is required")
    for key, rule in schema.get("properties", {}).items():
        if body.get(key) is not None:
            _check(errors, [key], body[key], rule)
    return errors


def _check(errors: Json, path: list[str | int], value: Any, rule: Json) -> None:
    if "$ref" in rule:
        _check(errors, path, value, SCHEMAS.get(rule["$ref"].rsplit("/", 1)[1], {}))
        return
    if "oneOf" in rule:
        options = [r for r in rule["oneOf"] if r.get("type") != "null"]
        consts = [r["const"] for r in options if "const" in r]
        if consts and value not in consts:
            _error(errors, path, "BASE_TYPE_CHOICES", f"Value must be one of {set(consts)}.")
        elif len(options) == 1 and not consts:
            _check(errors, path, value, options[0])
        return
    types = rule.get("type")
    kinds = [types] if isinstance(types, str) else [k for k in types or [] if k != "null"]
    if kinds and not any(_is(value, kind) for kind in kinds):
        _error(errors, path, "BASE_TYPE_INVALID", f"Must be of type {'/'.join(kinds)}.")
    elif isinstance(value, str):
        low, high = rule.get("minLength", 0), rule.get("maxLength")
        if len(value) < low or (high is not None and len(value) > high):
            span = f"between {low} and {high}" if high is not None else f"at least {low}"
            _error(errors, path, "BASE_TYPE_BAD_LENGTH", f"Must be {span} in length.")
    elif isinstance(value, int) and not isinstance(value, bool):
        if not rule.get("minimum", value) <= value <= rule.get("maximum", value):
            _error(errors, path, "NUMBER_TYPE_MAX", "Int value is out of range.")
    elif isinstance(value, list):
        most = rule.get("maxItems")
        if most is not None and len(value) > most:
            _error(errors, path, "BASE_TYPE_MAX_LENGTH", f"Must be {most} or fewer in length.")
    # (an object: a forum post's message, checked as a message by the double)


_TYPES: dict[str, type | tuple[type, ...]] = {
    "string": str,
    "integer": int,
    "number": (int, float),
    "boolean": bool,
    "array": list,
    "object": dict,
}


def _is(value: Any, kind: str) -> bool:
    if isinstance(value, bool) and kind in ("integer", "number"):
        return False
    return isinstance(value, _TYPES.get(kind, object))


def thread_payload(
    thread_id: int,
    parent: Json,
    name: str,
    owner_id: str,
    *,
    auto_archive: int,
    applied_tags: list[str],
    kind: int = PUBLIC_THREAD,
) -> Json:
    """A thread channel object (ThreadResponse in the spec)."""
    return {
        "id": str(thread_id),
        "type": kind,
        "guild_id": parent["guild_id"],
        "parent_id": parent["id"],
        "owner_id": owner_id,
        "name": name,
        "flags": 0,
        "last_message_id": None,
        "rate_limit_per_user": 0,
        "message_count": 0,
        "member_count": 1,
        "total_message_sent": 0,
        "applied_tags": list(applied_tags),
        "thread_metadata": {
            "archived": False,
            "archive_timestamp": p.iso_now(),
            "auto_archive_duration": auto_archive,
            "locked": False,
            "create_timestamp": p.iso_now(),
        },
    }


def forum_payload(
    channel_id: int, name: str, *, guild_id: int, tags: list[Json], require_tag: bool
) -> Json:
    """A forum channel (type 15) with its ``available_tags``."""
    data = p.text_channel(channel_id, name, guild_id=guild_id, type=FORUM)
    data["available_tags"] = tags
    data["flags"] = REQUIRE_TAG if require_tag else 0
    data["default_auto_archive_duration"] = 1440
    return data


def check_tags(forum: Json, tags: list[Any]) -> None:
    """The ``applied_tags`` of a post: each one the forum lists, one at least where the forum
    requires it (40067)."""
    known = {str(t["id"]) for t in forum.get("available_tags") or []}
    errors: Json = {}
    for i, tag in enumerate(tags):
        if str(tag) not in known:
            _error(errors, ["applied_tags", i], "TAG_INVALID", "Unknown tag for this forum.")
    if errors:
        raise ThreadRefused(400, 50035, "Invalid Form Body", errors)
    if not tags and int(forum.get("flags") or 0) & REQUIRE_TAG:
        raise ThreadRefused(400, 40067, "A tag is required to create a forum post in this channel")


def is_thread(channel: Json) -> bool:
    return int(channel.get("type", 0)) in THREAD_TYPES


def created(data: Json) -> web.Response:
    """201 with ``data`` (Discord answers thread creations so)."""
    return web.Response(
        body=json.dumps(data).encode(), status=201, headers={"Content-Type": "application/json"}
    )
