"""The frames of Feishu's long connection, encoded and decoded without the SDK.

Feishu's long connection carries protocol-buffer frames (proto2, package ``pbbp2``) over a
WebSocket: ``Frame {1 SeqID uint64, 2 LogID uint64, 3 service int32, 4 method int32,
5 headers repeated Header{1 key string, 2 value string}, 6 payload_encoding string,
7 payload_type string, 8 payload bytes, 9 LogIDNew string}``. ``method`` 0 is a control
frame (headers ``type`` = ``ping`` / ``pong``), 1 a data frame (``type`` = ``event`` or
``card``, with ``message_id``, ``trace_id``, ``sum`` and ``seq`` for payloads split in
parts). The client answers a data frame with the same frame whose payload is the JSON
``{"code": 200, "headers": …, "data": <base64 of the handler's JSON answer>}``. (The layout is
the one the official SDKs (lark-oapi for Python, oapi-sdk-go) declare in ``pbbp2.proto``;
this module is written from that declaration, so the SDK's own codec checks it.)
"""

from __future__ import annotations

from dataclasses import dataclass, field

CONTROL = 0
DATA = 1


@dataclass
class Frame:
    """One frame of the long connection."""

    seq_id: int = 0
    log_id: int = 0
    service: int = 0
    method: int = CONTROL
    headers: list[tuple[str, str]] = field(default_factory=list)
    payload_encoding: str | None = None
    payload_type: str | None = None
    payload: bytes | None = None
    log_id_new: str | None = None

    def header(self, key: str) -> str | None:
        """The first header named ``key`` (None when there is none)."""
        return next((v for k, v in self.headers if k == key), None)


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64  # int32/int64 negatives are ten-byte varints
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(number: int, wire: int) -> bytes:
    return _varint(number << 3 | wire)


def _bytes_field(number: int, data: bytes) -> bytes:
    return _key(number, 2) + _varint(len(data)) + data


def encode(frame: Frame) -> bytes:
    """The wire bytes of ``frame`` (required fields always written, as proto2 requires)."""
    out = bytearray()
    out += _key(1, 0) + _varint(frame.seq_id)
    out += _key(2, 0) + _varint(frame.log_id)
    out += _key(3, 0) + _varint(frame.service)
    out += _key(4, 0) + _varint(frame.method)
    for k, v in frame.headers:
        header = _bytes_field(1, k.encode()) + _bytes_field(2, v.encode())
        out += _bytes_field(5, header)
    if frame.payload_encoding is not None:
        out += _bytes_field(6, frame.payload_encoding.encode())
    if frame.payload_type is not None:
        out += _bytes_field(7, frame.payload_type.encode())
    if frame.payload is not None:
        out += _bytes_field(8, frame.payload)
    if frame.log_id_new is not None:
        out += _bytes_field(9, frame.log_id_new.encode())
    return bytes(out)


def _read_varint(data: bytes, pos: int) -> tuple[int, int]:
    shift = value = 0
    while True:
        if pos >= len(data):
            raise ValueError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(data: bytes) -> list[tuple[int, int | bytes]]:
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _read_varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _read_varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            size, pos = _read_varint(data, pos)
            if pos + size > len(data):
                raise ValueError("truncated field")
            out.append((number, data[pos : pos + size]))
            pos += size
        else:
            raise ValueError(f"unexpected wire type {wire}")
    return out


def decode(data: bytes) -> Frame:
    """The frame in ``data``.

    Raises:
        ValueError: not a well-formed frame (a required field missing included).
    """
    frame = Frame()
    seen: set[int] = set()
    for number, value in _fields(data):
        seen.add(number)
        if number in (1, 2, 3, 4) and isinstance(value, int):
            attr = {1: "seq_id", 2: "log_id", 3: "service", 4: "method"}[number]
            setattr(frame, attr, value if value < 1 << 63 else value - (1 << 64))
        elif number == 5 and isinstance(value, bytes):
            parts = dict(_fields(value))
            k, v = parts.get(1), parts.get(2)
            if not isinstance(k, bytes) or not isinstance(v, bytes):
                raise ValueError("a header without key or value")
            frame.headers.append((k.decode(), v.decode()))
        elif number == 8 and isinstance(value, bytes):
            frame.payload = value
        elif number in (6, 7, 9) and isinstance(value, bytes):
            attr = {6: "payload_encoding", 7: "payload_type", 9: "log_id_new"}[number]
            setattr(frame, attr, value.decode())
    if not {1, 2, 3, 4} <= seen:
        raise ValueError(f"required fields missing: {sorted({1, 2, 3, 4} - seen)}")
    return frame
