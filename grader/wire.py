"""The wire format between the grader and its child processes.

Messages are JSON objects, each framed by a 4-byte big-endian length. JSON, never
pickle: the child runs untrusted code, and decoding what it sends must not be able
to run anything in the grader. Arrays travel as ``{"__nd__": [dtype, shape, base64]}``
and are rebuilt with :func:`numpy.frombuffer` from a fixed list of numeric dtypes, so
an object that claims to be an array or claims equality never reaches a check.
"""
from __future__ import annotations

import base64
import json
import math
import select
import socket
import struct
import time
from enum import StrEnum
from typing import Any

import numpy as np

from grader.protocol import OP, ProtocolError, word_of

__all__ = ["Channel", "ProtocolError", "decode", "dumps", "encode", "loads"]

MAX_MESSAGE_BYTES = 64 * 1024 * 1024
_HEADER = struct.Struct(">I")

#: dtypes that may cross the wire; anything else is described, not transported.
SAFE_DTYPES = frozenset(
    "bool int8 int16 int32 int64 uint8 uint16 uint32 uint64 "
    "float16 float32 float64 complex64 complex128".split()
)


# --------------------------------------------------------------------------- codec
def encode(value: Any, *, _depth: int = 0) -> Any:
    """Turn plain data (with NumPy arrays) into JSON-ready data."""
    if _depth > 50:
        raise ValueError("value nested too deeply")
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return {"__float__": repr(value)}
    if isinstance(value, np.ndarray):
        arr = value if value.dtype.isnative else value.astype(value.dtype.newbyteorder("="))
        arr = arr if arr.flags.c_contiguous else arr.copy(order="C")  # (ascontiguousarray makes 0-d 1-d)
        if arr.dtype.name not in SAFE_DTYPES:
            raise ValueError(f"dtype {arr.dtype} cannot cross the wire")
        data = base64.b64encode(arr.tobytes()).decode("ascii")
        return {"__nd__": [arr.dtype.name, list(arr.shape), data]}
    if isinstance(value, np.generic):
        return encode(np.asarray(value), _depth=_depth + 1)
    if isinstance(value, (list, tuple)):
        return [encode(v, _depth=_depth + 1) for v in value]
    if isinstance(value, dict):
        return {str(k): encode(v, _depth=_depth + 1) for k, v in value.items()}
    raise TypeError(f"cannot encode {type(value).__name__}")


def decode(data: Any, *, _depth: int = 0) -> Any:
    """Inverse of :func:`encode`; raises :class:`ProtocolError` on anything odd."""
    if _depth > 60:
        raise ProtocolError("message nested too deeply")
    if data is None or isinstance(data, (bool, int, float, str)):
        return data
    if isinstance(data, list):
        return [decode(v, _depth=_depth + 1) for v in data]
    if isinstance(data, dict):
        if "__nd__" in data:
            return _decode_array(data["__nd__"])
        if "__float__" in data:
            text = data["__float__"]
            if text not in ("nan", "inf", "-inf"):
                raise ProtocolError(f"bad float {text!r}")
            return float(text)
        return {k: decode(v, _depth=_depth + 1) for k, v in data.items()}
    raise ProtocolError(f"unexpected JSON value {type(data).__name__}")


def _decode_array(spec: Any) -> np.ndarray:
    try:
        dtype_name, shape, data = spec
        if dtype_name not in SAFE_DTYPES:
            raise ProtocolError(f"dtype {dtype_name!r} is not allowed")
        shape = tuple(int(n) for n in shape)
        if any(n < 0 for n in shape):
            raise ProtocolError("negative dimension")
        raw = base64.b64decode(data.encode("ascii"), validate=True)
        arr = np.frombuffer(raw, dtype=np.dtype(dtype_name))
        return arr.reshape(shape).copy()
    except ProtocolError:
        raise
    except Exception as exc:  # malformed spec of any kind
        raise ProtocolError(f"malformed array: {exc}") from None


# -------------------------------------------------------------------------- framing
def dumps(message: dict) -> bytes:
    body = json.dumps(encode(message), separators=(",", ":"), allow_nan=False).encode("utf-8")
    if len(body) > MAX_MESSAGE_BYTES:
        raise ValueError(f"message of {len(body)} bytes is over the limit")
    return _HEADER.pack(len(body)) + body


def loads(body: bytes) -> dict:
    try:
        message = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise ProtocolError(f"not JSON: {exc}") from None
    if not isinstance(message, dict) or not isinstance(message.get(OP), str):
        raise ProtocolError(f"a message must be an object with an {OP!r}")
    return decode(message)


class Channel:
    """A framed message channel over a connected stream socket.

    ``expects``: the words this end may receive (one of :mod:`grader.protocol`'s): a message
    saying any other is a :class:`ProtocolError` as it arrives; ``None``: any word.
    """

    def __init__(self, sock: socket.socket, expects: type[StrEnum] | None = None):
        self.sock = sock
        self.expects = expects
        self._buffer = bytearray()

    def fileno(self) -> int:
        return self.sock.fileno()

    def send(self, message: dict, timeout: float | None = None) -> None:
        """Send ``message`` whole, waiting while the peer's side of the socket is full: up to ``timeout``
        seconds (``None``: as long as it takes), then ``TimeoutError`` (part of it may have gone).

        Never by the socket's own timeout: the last :meth:`recv` set it (a fraction of a second, often from
        another thread), and a large message (a timed exercise's inputs) to a process busy on a loaded
        machine took longer than that to go: the send failed half-way, and the job, never given its inputs,
        looked as if it had not started (the reference's: "the reference run recorded no ...")."""
        self._send_all(memoryview(dumps(message)), timeout)

    def send_with_fds(self, message: dict, fds: list[int], timeout: float | None = None) -> None:
        data = memoryview(dumps(message))
        sent = socket.send_fds(self.sock, [data], fds)
        if sent < len(data):
            self._send_all(data[sent:], timeout)

    def _send_all(self, data: memoryview, timeout: float | None) -> None:
        deadline = None if timeout is None else time.monotonic() + timeout
        while data:
            try:
                data = data[self.sock.send(data, socket.MSG_DONTWAIT):]
                continue
            except (BlockingIOError, InterruptedError, TimeoutError):  # full (a socket in timeout mode polls first)
                pass
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                raise TimeoutError(f"the peer took in no more of a message for {timeout:.3g} s")
            select.select([], [self.sock], [], min(left, 1.0) if left is not None else 1.0)

    def buffered(self) -> bool:
        """Whether bytes of a next message were read already (a ``select`` on the socket would not see them)."""
        return bool(self._buffer)

    def recv(self, timeout: float | None = None) -> dict | None:
        """The next message; ``None`` when the peer closed. Raises ``TimeoutError``."""
        message, _ = self._recv(timeout, want_fds=0)
        return message

    def recv_with_fds(self, max_fds: int, timeout: float | None = None) -> tuple[dict | None, list[int]]:
        """The next message and the file descriptors sent with it. Its bytes are read and no more: one
        read may not run into the next message, whose descriptors it would take (a message without any,
        then one with, read at once, gave the first the second's and left the second none)."""
        return self._recv(timeout, want_fds=max_fds)

    def _recv(self, timeout: float | None, want_fds: int) -> tuple[dict | None, list[int]]:
        self.sock.settimeout(timeout)
        fds: list[int] = []
        try:
            while True:
                if len(self._buffer) >= _HEADER.size:
                    (size,) = _HEADER.unpack_from(self._buffer)
                    if size > MAX_MESSAGE_BYTES:
                        raise ProtocolError(f"message of {size} bytes is over the limit")
                    if len(self._buffer) >= _HEADER.size + size:
                        body = bytes(self._buffer[_HEADER.size:_HEADER.size + size])
                        del self._buffer[:_HEADER.size + size]
                        message = loads(body)
                        if self.expects is not None:
                            word_of(message, self.expects)
                        return message, fds
                if want_fds:  # up to the end of this message: the kernel gives descriptors with their bytes
                    need = _HEADER.size - len(self._buffer) if len(self._buffer) < _HEADER.size else \
                        _HEADER.size + _HEADER.unpack_from(self._buffer)[0] - len(self._buffer)
                    chunk, new_fds, _flags, _addr = socket.recv_fds(self.sock, min(need, 1 << 16), want_fds)
                    fds.extend(new_fds)
                else:
                    chunk = self.sock.recv(1 << 16)
                if not chunk:
                    if self._buffer:
                        raise ProtocolError("connection closed in the middle of a message")
                    return None, fds
                self._buffer.extend(chunk)
        except socket.timeout:
            raise TimeoutError from None

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass
