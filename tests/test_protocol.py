"""The words of the grader's process boundaries are declared once (grader/protocol.py) and a
word the receiving end does not know fails as it arrives, never as a time-out."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from grader import protocol, wire, word_fields
from grader.protocol import FromJob, ProtocolError, ToJob, message, word_of

ROOT = Path(__file__).resolve().parent.parent
#: the boundaries' words by the names the code spells them with
BOUNDARY_NAMES = {words.__name__: words for words in protocol.BOUNDARIES}


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


# ------------------------------------------------------------------ each end of each boundary
class _PlayedHost:
    """A host as a job session sees it (:class:`grader.runner.job_host.JobHost`), whose job is played
    here: the job's end of the socket says ``said`` as soon as the job is forked."""

    side, closed, listener, compile_cache, uids, modules = "student", False, None, None, None, []

    def __init__(self, scratch, said: dict):
        from grader.runner import sandbox
        from grader.runner.job_sessions import Limits

        self.scratch, self.module_dir, self.said = scratch, scratch, said
        self.limits, self.plan = Limits(), sandbox.SandboxPlan(kind="process", uid_isolation=False)
        (scratch / "jobs").mkdir()
        self.job: wire.Channel | None = None

    def ensure(self) -> bool:
        return True

    def alive(self) -> bool:
        return True

    def log_tail(self) -> str:
        return ""

    def send(self, order: dict, fds: list[int] | None = None) -> None:
        if word_of(order, protocol.ToHost) is protocol.ToHost.FORK:
            self.job = wire.Channel(socket.socket(fileno=os.dup(fds[0])))
            self.job.send(self.said)

    def next_event(self, job, ops, deadline):
        return None

    def device_plan(self):
        from grader.runner.devices import DevicePlan

        return DevicePlan()

    def device_uid(self) -> int:
        raise AssertionError("no job of this host runs on an exclusive device")

    def why_failed(self):
        return None


def test_a_job_session_ends_at_once_when_the_job_says_a_word_it_may_not(tmp_path):
    """Without the check the word was passed over and the session waited for its deadline (a time-out)."""
    from grader.runner.job_sessions import JobSession

    host = _PlayedHost(tmp_path, {"op": "helo"})
    session = JobSession(host, "ex01-1", exercise="ex01", student_module="m", package="c", functions=(), timeout_s=4)
    t0 = time.monotonic()
    assert session.start() is False
    outcome = session.finish()
    assert outcome.end == "protocol_error", outcome.end
    assert "FromJob: unknown word 'helo'" in outcome.detail["error"]
    assert time.monotonic() - t0 < 2
    host.job.close()


def test_a_host_ends_at_once_on_an_order_it_does_not_know():
    """Without the check the host passed over the order and went on waiting for the next one."""
    ours, theirs = socket.socketpair()
    config = json.dumps({"modules": [], "chapter_folders": []})
    host = subprocess.Popen([sys.executable, "-m", "grader.child.host", str(theirs.fileno()), config],
                            pass_fds=[theirs.fileno()], stderr=subprocess.PIPE, text=True, cwd=ROOT)
    theirs.close()
    grader = wire.Channel(ours, expects=protocol.FromHost)
    try:
        assert word_of(grader.recv(timeout=120), protocol.FromHost) is protocol.FromHost.READY
        grader.send({"op": "frok", "job": "ex01-1"})
        assert host.wait(timeout=20) != 0
        assert "ToHost: unknown word 'frok'" in host.stderr.read()
    finally:
        if host.poll() is None:
            host.kill()
            host.wait()
        grader.close()


def test_a_batch_worker_ends_at_once_on_a_line_it_does_not_know():
    """Without the check a line of any other word was taken for a student to grade."""
    worker = subprocess.run([sys.executable, "-m", "grader.batch.worker"], input='{"op": "grde", "name": "x"}\n',
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert worker.returncode != 0
    assert worker.stdout == ""
    assert "ToWorker: unknown word 'grde'" in worker.stderr


def test_a_message_without_a_field_its_word_requires_fails_as_it_arrives():
    """Typed per word (grader.protocol.FIELDS): a record without its value, a mark without its key, a time
    request without its case are ProtocolErrors naming the word and the field, never a KeyError later."""
    assert word_of({"op": "obs", "key": "k", "value": 1}, FromJob) is FromJob.RECORD
    for said, missing in (({"op": "obs", "key": "k"}, "value"), ({"op": "mark"}, "key"),
                          ({"op": "time", "reps": 3, "batch_baseline": 1, "batch_candidate": 2}, "case"),
                          ({"op": "hello", "env": {}}, "memory")):
        words = FromJob if said["op"] in {w.value for w in FromJob} else ToJob
        with pytest.raises(ProtocolError, match=f"{words.__name__}\\.\\w+ without {missing}"):
            word_of(said, words)
    assert word_of({"op": "compiled", "key": None}, ToJob) is ToJob.COMPILED  # said both ways, declared both ways
    assert word_of({"op": "compiled", "key": "k", "error": "x"}, FromJob) is FromJob.COMPILED


def _sent_messages():
    """Every ``message(ToJob.X | FromJob.X, field=...)`` the grader's code writes: (where, word, fields, spread)."""
    import ast

    found = []
    for path in sorted((ROOT / "grader").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "message" and node.args \
                    and isinstance(node.args[0], ast.Attribute) and isinstance(node.args[0].value, ast.Name) \
                    and node.args[0].value.id in BOUNDARY_NAMES:
                words = BOUNDARY_NAMES[node.args[0].value.id]
                named = {k.arg for k in node.keywords if k.arg is not None}
                spread = any(k.arg is None for k in node.keywords)
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", words[node.args[0].attr], named, spread))
    return found


def test_every_word_of_every_boundary_declares_what_it_carries():
    """Typed per word on every boundary, not a job's alone: the hosts', the template's, a batch worker's."""
    undeclared = [f"{words.__name__}.{word.name}" for words in protocol.BOUNDARIES for word in words
                  if word not in protocol.FIELDS.get(words, {})]
    assert not undeclared, undeclared


def test_every_message_the_code_sends_carries_its_words_fields():
    """What crosses a process boundary is typed per word, statically too: each ``message(...)`` of the code passes
    only the fields its word declares, and every one its word requires (unless it spreads a dict in)."""
    sent = _sent_messages()
    assert len(sent) >= 40, sent  # the scan sees the code's messages
    assert {type(word) for _, word, _, _ in sent} >= {ToJob, FromJob, protocol.ToHost, protocol.FromHost,
                                                     protocol.ToTemplate, protocol.FromTemplate, protocol.ToWorker}
    wrong = []
    for where, word, named, spread in sent:
        declared = protocol.FIELDS[type(word)][word]
        allowed = declared.__required_keys__ | declared.__optional_keys__
        if named - allowed and declared is not word_fields.TimedFields:  # a time request's figures are open
            wrong.append(f"{where}: {word.name} does not declare {sorted(named - allowed)}")
        if not spread and declared.__required_keys__ - named:
            wrong.append(f"{where}: {word.name} without {sorted(declared.__required_keys__ - named)}")
    assert not wrong, "\n".join(wrong)


def test_the_scan_of_sent_messages_sees_a_missing_field(tmp_path, monkeypatch):
    """The test above can fail: a record sent without its value is named."""
    import grader.protocol as declared

    monkeypatch.setitem(declared.FIELDS[FromJob], FromJob.MARK, word_fields.RecordFields)  # a mark now needs a value
    wrong = [(where, word) for where, word, named, spread in _sent_messages()
             if word is FromJob.MARK and not spread and declared.FIELDS[FromJob][word].__required_keys__ - named]
    assert wrong and wrong[0][0].startswith("grader/child/probe.py"), wrong
