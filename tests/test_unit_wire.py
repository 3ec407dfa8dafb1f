"""Unit tests of grader/wire.py: the JSON codec and the framed channel (no child processes)."""
from __future__ import annotations

import json
import math
import socket
import struct
import threading
import time

import numpy as np
import pytest

from grader import wire
from grader.wire import Channel, ProtocolError


def roundtrip(value):
    """Through JSON text, as on the real wire."""
    return wire.decode(json.loads(json.dumps(wire.encode(value), allow_nan=False)))


# ------------------------------------------------------------------ codec
@pytest.mark.parametrize("dtype", ["bool", "int8", "int32", "int64", "uint8", "uint64", "float16", "float32",
                                   "float64", "complex64", "complex128"])
def test_array_roundtrip_keeps_shape_dtype_and_values(dtype):
    rng = np.random.default_rng(0)
    original = (rng.normal(size=(3, 4)) * 50).astype(dtype)
    back = roundtrip(original)
    assert isinstance(back, np.ndarray)
    assert back.dtype == np.dtype(dtype)
    assert back.shape == (3, 4)
    np.testing.assert_array_equal(back, original)


def test_empty_arrays_roundtrip():
    empty = np.zeros((0, 3), dtype=np.int16)
    back = roundtrip(empty)
    assert back.shape == (0, 3) and back.dtype == np.int16 and back.size == 0


def test_zero_d_array_keeps_dtype_and_value():
    back = roundtrip(np.asarray(2.5, dtype=np.float32))
    assert back.dtype == np.float32
    assert back.size == 1 and float(back.reshape(-1)[0]) == 2.5


def test_zero_d_array_and_numpy_scalar_keep_shape():
    """np.ascontiguousarray would make them shape (1,), and a (1,) answer would pass for a 0-d one."""
    back_array, back_scalar = roundtrip([np.asarray(2.5, dtype=np.float32), np.int64(7)])
    assert back_array.shape == () and back_array.dtype == np.float32
    assert back_scalar.shape == () and back_scalar.dtype == np.int64 and int(back_scalar) == 7
    assert roundtrip(np.zeros(1, np.float32)).shape == (1,)


def test_non_contiguous_array_roundtrips():
    base = np.arange(24, dtype=np.int32).reshape(4, 6)
    view = base[::2, ::3].T
    np.testing.assert_array_equal(roundtrip(view), view)


def test_decoded_array_is_writable_copy():
    back = roundtrip(np.arange(3, dtype=np.float32))
    back[0] = 7.0  # np.frombuffer alone would give a read-only array
    assert back[0] == 7.0


def test_nested_data_roundtrip():
    message = {
        "op": "obs",
        "key": "softmax/values/1d",
        "value": {"t": "array", "type": "jax.Array", "value": np.linspace(0, 1, 5, dtype=np.float32)},
        "items": [1, "two", None, True, [np.arange(2, dtype=np.int64), {"deep": np.float64(0.5)}]],
        "pair": (1, 2),
    }
    back = roundtrip(message)
    assert back["op"] == "obs" and back["key"] == "softmax/values/1d"
    np.testing.assert_array_equal(back["value"]["value"], message["value"]["value"])
    assert back["value"]["value"].dtype == np.float32
    assert back["items"][:4] == [1, "two", None, True]
    assert back["items"][4][0].dtype == np.int64
    np.testing.assert_array_equal(back["items"][4][0], [0, 1])
    assert back["items"][4][1]["deep"] == 0.5  # np.float64 is a float: it travels as a JSON number
    assert back["pair"] == [1, 2]  # tuples travel as lists


def test_bool_stays_bool_and_int_stays_int():
    back = roundtrip({"flag": False, "n": 3, "x": 3.0})
    assert back["flag"] is False
    assert type(back["n"]) is int and type(back["x"]) is float


@pytest.mark.parametrize("value", [math.inf, -math.inf])
def test_infinite_floats_roundtrip(value):
    assert roundtrip({"v": value})["v"] == value


def test_nan_roundtrips_and_json_stays_strict():
    encoded = wire.encode({"v": math.nan})
    json.dumps(encoded, allow_nan=False)  # no bare NaN token in the JSON text
    assert math.isnan(wire.decode(encoded)["v"])


def test_encode_refuses_object_arrays_and_unknown_types():
    with pytest.raises(ValueError):
        wire.encode(np.array([object()], dtype=object))
    with pytest.raises(TypeError):
        wire.encode({"x": object()})


def test_non_native_byte_order_array_roundtrips():
    big_endian = np.arange(4, dtype=">f8")
    np.testing.assert_array_equal(roundtrip(big_endian), np.arange(4, dtype=np.float64))


# ------------------------------------------------------------------ decode rejects
def _nd(dtype, shape, data):
    return {"__nd__": [dtype, shape, data]}


GOOD_DATA = "AAAAAAAAAAA="  # 8 zero bytes


@pytest.mark.parametrize("spec", [
    _nd("object", [1], GOOD_DATA),
    _nd("O", [1], GOOD_DATA),
    _nd("<U2", [1], GOOD_DATA),
    _nd("float64", [1], "not base64!!"),
    _nd("float64", [-1], GOOD_DATA),
    _nd("float64", [3], GOOD_DATA),  # 8 bytes cannot fill 3 float64
    _nd("float64", "abc", GOOD_DATA),
    {"__nd__": ["float64", [1]]},
    {"__nd__": "float64"},
    {"__float__": "1e999"},
    {"__float__": "__import__('os')"},
], ids=["object", "O", "unicode", "bad-base64", "negative-dim", "size-mismatch", "shape-not-list",
        "two-fields", "spec-not-list", "float-not-special", "float-code"])
def test_decode_rejects_malformed_specs(spec):
    with pytest.raises(ProtocolError):
        wire.decode({"value": [spec]})


def test_decode_rejects_too_deep_nesting():
    data: object = 1
    for _ in range(100):
        data = [data]
    with pytest.raises(ProtocolError):
        wire.decode(data)


@pytest.mark.parametrize("body", [b"[1, 2]", b'"op"', b"{}", b'{"op": 3}', b"not json", b"\xff\xfe"])
def test_loads_rejects_non_messages(body):
    with pytest.raises(ProtocolError):
        wire.loads(body)


def test_loads_accepts_a_message_with_op():
    assert wire.loads(b'{"op": "hello", "n": 1}') == {"op": "hello", "n": 1}


def test_dumps_frames_with_big_endian_length():
    framed = wire.dumps({"op": "x"})
    (size,) = struct.unpack(">I", framed[:4])
    assert size == len(framed) - 4
    assert wire.loads(framed[4:]) == {"op": "x"}


# ------------------------------------------------------------------ channel
@pytest.fixture
def pair():
    a, b = socket.socketpair()
    left, right = Channel(a), Channel(b)
    yield left, right
    left.close()
    right.close()


def test_channel_send_recv(pair):
    left, right = pair
    left.send({"op": "obs", "value": np.arange(3, dtype=np.int32)})
    got = right.recv(timeout=2)
    assert got["op"] == "obs"
    np.testing.assert_array_equal(got["value"], [0, 1, 2])


def test_channel_two_messages_in_one_write(pair):
    left, right = pair
    left.sock.sendall(wire.dumps({"op": "a"}) + wire.dumps({"op": "b"}))
    assert right.recv(timeout=2) == {"op": "a"}
    assert right.recv(timeout=2) == {"op": "b"}


def test_channel_message_split_over_many_writes(pair):
    left, right = pair
    data = wire.dumps({"op": "big", "value": np.arange(1000, dtype=np.float64)})
    cuts = [0, 1, 3, 4, 10, len(data) // 2, len(data)]

    def writer():
        for start, end in zip(cuts, cuts[1:]):
            left.sock.sendall(data[start:end])
            time.sleep(0.01)

    thread = threading.Thread(target=writer)
    thread.start()
    got = right.recv(timeout=5)
    thread.join()
    np.testing.assert_array_equal(got["value"], np.arange(1000, dtype=np.float64))


def test_channel_timeout_keeps_partial_message(pair):
    left, right = pair
    data = wire.dumps({"op": "late"})
    left.sock.sendall(data[:6])
    with pytest.raises(TimeoutError):
        right.recv(timeout=0.05)
    left.sock.sendall(data[6:])
    assert right.recv(timeout=2) == {"op": "late"}


def test_channel_recv_timeout_with_nothing_sent(pair):
    _, right = pair
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        right.recv(timeout=0.1)
    assert time.monotonic() - started < 2


def test_channel_peer_closed_returns_none(pair):
    left, right = pair
    left.send({"op": "last"})
    left.close()
    assert right.recv(timeout=2) == {"op": "last"}
    assert right.recv(timeout=2) is None


def test_channel_closed_mid_message_is_protocol_error(pair):
    left, right = pair
    left.sock.sendall(wire.dumps({"op": "cut"})[:7])
    left.close()
    with pytest.raises(ProtocolError):
        right.recv(timeout=2)


def test_channel_oversized_declared_length_is_rejected(pair):
    left, right = pair
    left.sock.sendall(struct.pack(">I", wire.MAX_MESSAGE_BYTES + 1) + b"{}")
    with pytest.raises(ProtocolError):
        right.recv(timeout=2)


def test_channel_rejects_a_body_that_is_not_a_message(pair):
    left, right = pair
    body = b"[1, 2, 3]"
    left.sock.sendall(struct.pack(">I", len(body)) + body)
    with pytest.raises(ProtocolError):
        right.recv(timeout=2)


def test_file_descriptors_arrive_with_their_own_message():
    """A host is told ``cores`` (no descriptor) while another thread sends ``fork`` (two): read at once,
    the first took the second's descriptors and the fork, left with none, was dropped (a job never
    forked: "the grading process for your code could not be started or was lost")."""
    import os

    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    sender, receiver = Channel(ours), Channel(theirs)
    read_end, write_end = os.pipe()
    try:
        sender.send({"op": "cores", "cores": [0]})
        sender.send_with_fds({"op": "fork", "job": "ex04-3"}, [read_end, write_end])
        sender.send({"op": "kill", "job": "ex04-3"})
        first, fds_first = receiver.recv_with_fds(2, timeout=5)
        second, fds_second = receiver.recv_with_fds(2, timeout=5)
        third, fds_third = receiver.recv_with_fds(2, timeout=5)
        assert (first["op"], fds_first) == ("cores", [])
        assert second["op"] == "fork" and len(fds_second) == 2
        assert (third["op"], fds_third) == ("kill", [])
        os.write(write_end, b"x")
        assert os.read(fds_second[0], 1) == b"x"  # the very pipe sent
        for fd in fds_second:
            os.close(fd)
    finally:
        for fd in (read_end, write_end):
            os.close(fd)
        ours.close()
        theirs.close()


def test_a_large_message_waits_for_a_slow_peer_whatever_the_last_recv_set_as_the_sockets_timeout():
    """Under load 12 on two cores, 4 of 10 gradings of the solutions lost ex06's points: the reference's inputs (a
    large message) were sent on a socket whose timeout the last recv had set to a fraction of a second; the job,
    busy, took them in more slowly than that; the send failed half-way and the reference looked not started."""
    ours, theirs = socket.socketpair()
    ours.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 1 << 14)
    sender, receiver = Channel(ours), Channel(theirs)
    with pytest.raises(TimeoutError):
        sender.recv(timeout=0.01)  # what every receive does: the socket is now in timeout mode, 10 ms
    big = {"op": "inputs", "inputs": {"x": np.arange(1 << 19, dtype=np.float64)}}  # 4 MiB
    got = []

    def slow_reader():
        time.sleep(0.5)  # a busy peer: nothing read for 50 times the socket's timeout
        got.append(receiver.recv(timeout=30))

    reader = threading.Thread(target=slow_reader)
    reader.start()
    sender.send(big)
    reader.join()
    assert np.array_equal(got[0]["inputs"]["x"], big["inputs"]["x"])


def test_a_send_to_a_peer_that_takes_nothing_in_ends_at_its_own_timeout():
    ours, theirs = socket.socketpair()
    sender = Channel(ours)
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        sender.send({"op": "inputs", "inputs": {"x": np.zeros(1 << 21)}}, timeout=0.3)  # 16 MiB, never read
    assert 0.25 < time.monotonic() - started < 3.0
    theirs.close()
