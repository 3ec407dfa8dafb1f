"""The words of the grader's process boundaries are declared once (grader/protocol.py) and a
word the receiving end does not know fails as it arrives, never as a time-out."""
from __future__ import annotations

import socket
import time

import pytest

from grader import protocol, wire
from grader.protocol import FromJob, ProtocolError, ToJob, message, word_of


def test_a_message_is_built_from_a_declared_word_only():
    assert message(ToJob.INPUTS, inputs={"x": 1}) == {"op": "inputs", "inputs": {"x": 1}}
    with pytest.raises(TypeError, match="grader.protocol"):
        message("inputs", inputs={})  # a word spelt by hand
    with pytest.raises(TypeError):
        message(ToJob.GO, op="stop")  # the word given twice


def test_a_word_is_read_against_its_boundary():
    assert word_of({"op": "done"}, FromJob) is FromJob.DONE
    with pytest.raises(ProtocolError, match="'donee'.*known: hello"):
        word_of({"op": "donee"}, FromJob)
    with pytest.raises(ProtocolError):
        word_of({"op": "inputs"}, FromJob)  # a word of the other direction
    with pytest.raises(ProtocolError):
        word_of({"no": "word"}, FromJob)


def test_no_boundary_says_two_words_alike():
    """An enum takes a second member of the same value as an alias of the first, silently: two words
    of one boundary spelt alike would be one word."""
    for words in protocol.BOUNDARIES:
        assert len(words.__members__) == len(list(words)), words.__name__


def test_a_misspelt_word_fails_as_it_arrives_not_at_the_time_out():
    ours, theirs = socket.socketpair()
    receiver, sender = wire.Channel(ours, expects=FromJob), wire.Channel(theirs)
    try:
        sender.send({"op": "donee"})  # what a typo on the sending end looked like
        t0 = time.monotonic()
        with pytest.raises(ProtocolError, match="donee"):
            receiver.recv(timeout=30)
        assert time.monotonic() - t0 < 5
        sender.send(message(FromJob.DONE))
        assert word_of(receiver.recv(timeout=5), FromJob) is FromJob.DONE
    finally:
        receiver.close()
        sender.close()


def test_a_channel_that_expects_no_words_in_particular_takes_any():
    ours, theirs = socket.socketpair()
    receiver, sender = wire.Channel(ours), wire.Channel(theirs)
    try:
        sender.send({"op": "anything"})
        assert receiver.recv(timeout=5) == {"op": "anything"}
    finally:
        receiver.close()
        sender.close()
