"""The warm processes' folder (:mod:`grader.service_folder`): a socket that knows when another took its name, a
peer's uid checked, and the sweep of what a service killed as it started left behind (its slot's ``.lock`` and
``.log``, made before it could remove them: about 300 such files had gathered in one afternoon of tests and
benchmarks), without touching a living service's files, a fresh start's, or a socket someone answers on."""
from __future__ import annotations

import os
import socket
import time

from grader.service_folder import LEFT_AFTER_S, Listening, same_user, sweep


def _aged(path, seconds: float) -> None:
    path.touch()
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_socket_knows_when_another_took_its_name(tmp_path):
    path = tmp_path / "s.sock"
    first = Listening(path)
    assert first.still_ours()
    second = Listening(path)  # a service started in its place
    assert second.still_ours() and not first.still_ours()
    client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    client.connect(str(path))
    conn, _ = second.socket.accept()
    assert same_user(conn)  # this process's own uid on both ends
    for s in (client, conn, first.socket, second.socket):
        s.close()
    assert not same_user(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))  # no peer: refused


def test_the_sweep_removes_only_what_no_service_holds(tmp_path):
    old = LEFT_AFTER_S + 60
    for name in ("dead.lock", "dead.log", "gone.pid"):  # killed as it started; a pid file of a process gone
        _aged(tmp_path / name, old)
    (tmp_path / "gone.pid").write_text("999999999\n")
    _aged(tmp_path / "gone.pid", old)
    for name in ("fresh.lock", "fresh.log"):  # a service starting now
        _aged(tmp_path / name, 5)
    for name in ("live.lock", "live.log"):  # an old service still alive: its pid file names this process
        _aged(tmp_path / name, old)
    (tmp_path / "live.pid").write_text(f"{os.getpid()}\n")
    _aged(tmp_path / "live.pid", old)
    answering = Listening(tmp_path / "command-a.sock")  # a warm command listening
    _aged(tmp_path / "command-a.sock", old)
    silent = Listening(tmp_path / "command-b.sock")  # a warm command killed: its socket answers nobody
    silent.socket.close()
    _aged(tmp_path / "command-b.sock", old)
    (tmp_path / "notes.txt").write_text("not the grader's")
    _aged(tmp_path / "notes.txt", old)

    assert sweep(tmp_path) == 4
    left = sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("."))
    assert left == ["command-a.sock", "fresh.lock", "fresh.log", "live.lock", "live.log", "live.pid", "notes.txt"]
    answering.socket.close()
