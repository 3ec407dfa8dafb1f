"""The sandbox on a shared machine (a lab server; the issue "disk, uids, hidden seeds and classmates' files").

What one student controls must not reach the machine or the others:

* **disk**: a module that reserves 40 files of 32 MiB at import (``posix_fallocate``: 1.28 GB in 0.1 s, faster
  than any watch) gets "No space left on device" at once (the jobs' seccomp filter,
  :func:`grader.child.confine.no_disk_reservations`), and one that writes them with ``write`` stops at the
  size of the tmpfs its host's jobs write in (root: :func:`grader.runner.sandbox.cap_folder`); the
  machine's disk does not fill, and the other exercises are graded;
* **root**: a student's code never runs as root without the user saying so (``--allow-weak-sandbox``):
  without bubblewrap and with a Python other users cannot read, ``grade`` refuses in one line;
* **hidden files**: the seeds drawn ahead (the next gradings' inputs) and the reference's outcomes cannot be
  read by a student's code, under bubblewrap or in the process sandbox with per-job uids;
* **classmates**: another local user reads nothing of a grading in progress (its scratch folder is the
  grader's and its jobs' alone), and a job sees no other file of the machine's ``/tmp``.

Each sandbox is the real one: bubblewrap as root, the process sandbox as root with per-job uids (a Python
every uid can read: a venv of the system's Python), the process sandbox as an ordinary user (``setpriv``).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

import pytest

from conftest import ROOT, SOLUTIONS, make_submission
from grader.runner import sandbox as sandboxes
from grader.runner.job_sessions import Limits
from test_ordinary_user import STUDENT_UID, _as_student, needs_a_student, python, student_home  # noqa: F401

pytestmark = pytest.mark.slow

ROOT_USER = os.geteuid() == 0
STRONG = ROOT_USER and sandboxes.bwrap_works() is not None
#: another local user, neither the grader nor a job (the jobs' uids are 61000-61255, the student's 60917)
CLASSMATE_UID = 60918
SETPRIV = shutil.which("setpriv")
MIB = 1 << 20

RESERVES = '''import os
_done = 0
try:
    for _i in range(40):
        _fd = os.open(f"reserve-{_i}", os.O_CREAT | os.O_WRONLY, 0o600)
        os.posix_fallocate(_fd, 0, 32 << 20)
        os.close(_fd)
        _done += 1
    print(f"RESERVED {_done} of 40")
except OSError as _exc:
    print(f"RESERVED {_done} of 40: {_exc}")
'''

WRITES = '''import os
_done = 0
try:
    _chunk = b"x" * (1 << 20)
    for _i in range(40):
        with open(f"fill-{_i}", "wb") as _out:
            for _ in range(32):
                _out.write(_chunk)
                _done += 1
    print(f"WROTE {_done} MiB")
except OSError as _exc:
    print(f"WROTE {_done} MiB: {_exc}")
'''


def _solution(exercise: str) -> str:
    return (SOLUTIONS / f"{exercise}.py").read_text(encoding="utf-8")


class _DiskPeak:
    """The most the file system of ``folder`` held beyond what it held at the start, sampled every 5 ms, and
    the most any tmpfs mounted under ``folder`` held (the jobs' capped folders)."""

    def __init__(self, folder: Path):
        self.folder, self.peak, self.tmpfs_peak = str(folder), 0, 0
        self._base = self._used(self.folder)
        self._dev = os.stat(self.folder).st_dev
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    @staticmethod
    def _used(path: str) -> int:
        st = os.statvfs(path)
        return (st.f_blocks - st.f_bfree) * st.f_frsize

    def _run(self) -> None:
        while not self._stop.is_set():
            self.peak = max(self.peak, self._used(self.folder) - self._base)
            for point in sandboxes.mounts_under(Path(self.folder)):
                try:
                    used = self._used(point)
                    if os.stat(point).st_dev != self._dev:  # still the tmpfs: not unmounted meanwhile
                        self.tmpfs_peak = max(self.tmpfs_peak, used)
                except OSError:
                    pass
            time.sleep(0.005)

    def __enter__(self) -> "_DiskPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()


@pytest.fixture
def scratch_root():
    """A temporary folder of the grader's own (``TMPDIR``), traversable by every user as ``/tmp`` is."""
    folder = Path(tempfile.mkdtemp(prefix="shared-"))
    os.chmod(folder, 0o755)
    yield folder
    sandboxes.release_folder(folder)
    shutil.rmtree(folder, ignore_errors=True)


def _sandboxes() -> list:
    needs_root = pytest.mark.skipif(not ROOT_USER, reason="per-job uids need the grader to run as root")
    return [pytest.param("bwrap", marks=pytest.mark.skipif(not STRONG, reason="needs bubblewrap and root")),
            pytest.param("process-uid", marks=[needs_root, needs_a_student]),
            pytest.param("ordinary-user", marks=needs_a_student)]


def _grade(kind: str, python_: str, folder: Path, out: Path, scratch: Path, *args: str,
           env: dict | None = None, check: bool = True) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Grade ``folder`` as ``kind`` says: bubblewrap as root (this Python), the process sandbox as root with
    per-job uids (a Python every uid can read), or as an ordinary user (``setpriv``)."""
    python_ = sys.executable if kind == "bwrap" else python_
    argv = [python_, "-m", "grader", str(folder), "--json", "--lang", "en", "--report-dir", str(out), *args]
    if kind != "bwrap":
        argv += ["--sandbox", "process"]
    if kind == "ordinary-user":
        argv = _as_student(argv)
        for path in (folder.parent, *folder.parent.rglob("*"), scratch):
            os.chown(path, STUDENT_UID, STUDENT_UID)
    base = {k: v for k, v in os.environ.items() if k not in ("XDG_CACHE_HOME",)}
    base.update(TMPDIR=str(scratch), GRADER_BUILD="0", **(env or {}))
    if kind == "ordinary-user":
        base.update(HOME=str(scratch), GRADER_CACHE_DIR=str(scratch / "cache"))
    done = subprocess.run(argv, capture_output=True, text=True, timeout=600, cwd=scratch, env=base)
    if check:
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    try:
        return done, json.loads(done.stdout)
    except ValueError:
        return done, None


def _by_id(report: dict) -> dict:
    return {e["id"]: e for e in report["exercises"]}


def _printed(ex: dict) -> str:
    return ex.get("output") or ""


def _submission(where: Path, ex01_prefix: str) -> Path:
    """A submission whose ex01 module starts with ``ex01_prefix``, in ``where`` (the scratch root: an ordinary
    user reaches it, pytest's own folders are root's alone)."""
    root = Path(tempfile.mkdtemp(prefix="student-", dir=where))
    os.chmod(root, 0o755)
    folder = make_submission(root, {"ex01_jit_forms": ex01_prefix + _solution("ex01_jit_forms")})
    for path in (root, *root.rglob("*")):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    return folder


def _sandbox_of(kind: str, report: dict) -> None:
    """The grading ran in the sandbox ``kind`` names."""
    sandbox = report["sandbox"]
    assert sandbox["kind"] == ("bwrap" if kind == "bwrap" else "process"), sandbox
    assert sandbox["uid_isolation"] is (kind != "ordinary-user"), sandbox


# ------------------------------------------------------------------ disk
@pytest.mark.parametrize("kind", _sandboxes())
def test_reserving_40_files_of_32_mib_at_import_reserves_nothing(kind, tmp_path, scratch_root, request):
    python_ = request.getfixturevalue("python") if kind != "bwrap" else sys.executable
    folder = _submission(scratch_root, RESERVES)
    with _DiskPeak(scratch_root) as disk:
        _, report = _grade(kind, python_, folder, scratch_root / "out", scratch_root, "-k", "1", "-k", "2",
                           "--seed", "3")
    _sandbox_of(kind, report)
    ex = _by_id(report)
    assert ("RESERVED 0 of 40: [Errno 28] No space left on device"
            in _printed(ex["ex01_jit_forms"])), ex["ex01_jit_forms"]
    # the student's code ran on (its functions were graded), and so did the other exercise
    assert ex["ex01_jit_forms"]["status"] == "passed" and ex["ex02_where"]["status"] == "passed"
    limit = Limits().disk_bytes + sandboxes.SCRATCH_MARGIN_BYTES
    print(f"{kind}: reserved, disk +{disk.peak / MIB:.1f} MiB, the jobs' tmpfs at most {disk.tmpfs_peak / MIB:.1f} MiB")
    assert disk.peak < limit and disk.tmpfs_peak < limit, (disk.peak / MIB, disk.tmpfs_peak / MIB)
    assert disk.peak < 64 * MIB, f"the disk grew by {disk.peak / MIB:.0f} MiB"  # no reservation, only the grading's own


@pytest.mark.parametrize("kind", _sandboxes()[:2])
def test_writing_40_files_of_32_mib_stops_at_the_jobs_tmpfs(kind, tmp_path, scratch_root, request):
    """As root the jobs write in a tmpfs of their budget and a margin: ``write`` stops there too, faster than
    any watch could; nothing reaches the machine's disk."""
    python_ = request.getfixturevalue("python") if kind != "bwrap" else sys.executable
    folder = _submission(scratch_root, WRITES)
    with _DiskPeak(scratch_root) as disk:
        _, report = _grade(kind, python_, folder, scratch_root / "out", scratch_root, "-k", "1", "-k", "2",
                           "--seed", "3")
    _sandbox_of(kind, report)
    ex = _by_id(report)
    limit = Limits().disk_bytes + sandboxes.SCRATCH_MARGIN_BYTES
    print(f"{kind}: written, disk +{disk.peak / MIB:.1f} MiB, the jobs' tmpfs at most {disk.tmpfs_peak / MIB:.1f} MiB")
    assert disk.tmpfs_peak <= limit, disk.tmpfs_peak / MIB
    assert disk.peak < 64 * MIB, f"the disk grew by {disk.peak / MIB:.0f} MiB"
    # stopped by the grader at its budget, or by the tmpfs (ENOSPC) first: either way not all 1280 MiB
    printed, ex01 = _printed(ex["ex01_jit_forms"]), ex["ex01_jit_forms"]
    assert "WROTE 1280 MiB" not in printed, printed
    assert ex01["status"] != "passed" or "No space left on device" in printed, ex01
    assert ex["ex02_where"]["status"] == "passed"


# ------------------------------------------------------------------ root
@pytest.mark.skipif(not ROOT_USER, reason="the refusal is of a grading as root")
def test_root_without_bubblewrap_and_a_private_python_refuses_in_one_line(tmp_path, scratch_root):
    if sandboxes.unreadable_python_root() is None:
        pytest.skip("this Python is readable by every user: its jobs take uids of their own")
    folder = _submission(scratch_root, "")
    done, report = _grade("process-as-root", sys.executable, folder, scratch_root / "out", scratch_root, "-k", "1",
                          check=False)
    assert done.returncode != 0 and report is None
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "refusing to run the student's code as root" in lines[0] and "bubblewrap" in lines[0]
    assert "--allow-weak-sandbox" in lines[0] and str(sandboxes.unreadable_python_root()) in lines[0]
    assert not (scratch_root / "out" / "report.partial.json").exists()
    # said so, it grades as root, and every report says it did
    done, report = _grade("process-as-root", sys.executable, folder, scratch_root / "out", scratch_root, "-k", "1",
                          env={"GRADER_ALLOW_WEAK_SANDBOX": "1"})
    assert report["score"] == 10 and report["sandbox"]["uid_isolation"] is False
    assert any("run as root" in str(note) for note in report["sandbox"]["notes"]), report["sandbox"]


# ------------------------------------------------------------------ hidden files
READS_HIDDEN = '''import os
for _path in CANDIDATES:
    try:
        if os.path.isdir(_path):
            _names = os.listdir(_path)
            print("LISTED", _path, _names)
            for _name in _names:
                with open(os.path.join(_path, _name), "rb") as _f:
                    print("READ", _name, _f.read(300))
        else:
            with open(_path, "rb") as _f:
                print("READ", _path, _f.read(300))
    except OSError as _exc:
        print("DENIED", _path, type(_exc).__name__)
'''


@pytest.mark.parametrize("kind", _sandboxes()[:2])
def test_a_students_code_reads_no_seed_drawn_ahead_and_no_reference_outcome(kind, tmp_path, scratch_root, request):
    python_ = request.getfixturevalue("python") if kind != "bwrap" else sys.executable
    cache = scratch_root / "cache"  # on a path every uid can traverse: its own modes alone protect it
    env = {"GRADER_CACHE_DIR": str(cache), "GRADER_SEEDS_AHEAD": "4"}
    # a first grading: seeds drawn ahead, the reference's outcomes kept
    _grade(kind, python_, SOLUTIONS, scratch_root / "first", scratch_root, "-k", "1", "-k", "2", env=env)
    version = next(cache.iterdir())
    seeds_file = version / "seeds-ahead" / "ch4.json"
    seeds = json.loads(seeds_file.read_text())["seeds"]
    outcomes = version / "reference-outcomes"
    assert seeds and any(outcomes.iterdir()), "the first grading kept nothing to steal"
    candidates = [str(seeds_file), str(version / "seeds-ahead"), str(outcomes)]
    code = READS_HIDDEN.replace("CANDIDATES", repr(candidates))
    folder = _submission(scratch_root, code)
    _, report = _grade(kind, python_, folder, scratch_root / "out", scratch_root, "-k", "1", "-k", "2", env=env)
    printed = _printed(_by_id(report)["ex01_jit_forms"])
    assert "DENIED" in printed and "READ" not in printed and "LISTED" not in printed, printed
    assert not any(str(seed) in printed for seed in seeds), printed
    assert (os.stat(version / "seeds-ahead").st_mode & 0o777, os.stat(seeds_file).st_mode & 0o777) == (0o700, 0o600)
    students = version / "xla" / "students"  # nobody lists the students' caches; each is its grading's group's
    if students.is_dir():
        assert os.stat(students).st_mode & 0o777 == 0o711
        for own in students.iterdir():
            assert os.stat(own).st_mode & 0o7777 == 0o2770, oct(os.stat(own).st_mode)


# ------------------------------------------------------------------ classmates
SLEEPS = '''import os, time
print("TMP", sorted(os.listdir("/tmp")))
open(os.path.join(os.environ.get("TMPDIR", "."), "ready"), "w").close()
time.sleep(6)
'''


@pytest.mark.parametrize("kind", _sandboxes())
def test_another_local_user_reads_nothing_of_a_grading_in_progress(kind, tmp_path, scratch_root, request):
    if SETPRIV is None or not ROOT_USER:
        pytest.skip("another user is played with setpriv, as root")
    python_ = request.getfixturevalue("python") if kind != "bwrap" else sys.executable
    decoy = Path(tempfile.gettempdir()) / f"decoy-{uuid.uuid4().hex}"
    decoy.write_text("a classmate's file")
    folder = _submission(scratch_root, SLEEPS)
    result: dict = {}
    grading = threading.Thread(target=lambda: result.update(report=_grade(
        kind, python_, folder, scratch_root / "out", scratch_root, "-k", "1", "--seed", "3")[1]))
    try:
        grading.start()
        deadline = time.monotonic() + 120
        found: list[Path] = []
        while time.monotonic() < deadline and not found:  # the student's module is in the scratch folder
            found = [p for p in scratch_root.glob("grade-*/submission/modules/ex01_jit_forms.py")]
            time.sleep(0.05)
        assert found, list(scratch_root.iterdir())
        top = found[0].parents[2]
        as_classmate = [SETPRIV, f"--reuid={CLASSMATE_UID}", f"--regid={CLASSMATE_UID}", "--clear-groups", "--"]
        for argv in (["cat", str(found[0])], ["ls", str(top)], ["ls", str(top / "student" / "jobs")]):
            seen = subprocess.run(as_classmate + argv, capture_output=True, text=True, timeout=30)
            assert seen.returncode != 0 and "Permission denied" in seen.stderr, (argv, seen.stdout, seen.stderr)
        mode = os.stat(top).st_mode & 0o777
        assert mode == (0o700 if kind == "ordinary-user" else 0o710), oct(mode)
    finally:
        grading.join(timeout=300)
        decoy.unlink()
    report = result["report"]
    ex01 = _by_id(report)["ex01_jit_forms"]
    assert ex01["status"] == "passed", ex01
    if kind != "ordinary-user":  # a /tmp of its own: the machine's other files are not there
        shown = _printed(ex01)
        assert "TMP" in shown and decoy.name not in shown, shown


# ------------------------------------------------------------------ the filter itself
def test_the_filter_refuses_fallocate_and_32_bit_calls_and_allows_the_rest(tmp_path):
    """In a process of its own: ``posix_fallocate`` fails with ENOSPC, an ``int 0x80`` call (x86-64's 32-bit
    interface, whose numbers the filter does not check) with ENOSYS, while writing, threads and a child
    process work as before."""
    import platform

    if platform.machine() != "x86_64":
        pytest.skip("the 32-bit call is made with x86-64's int 0x80")
    code = r'''
import ctypes, mmap, os, threading
from grader.child.confine import no_disk_reservations
assert no_disk_reservations() is None
fd = os.open("f", os.O_CREAT | os.O_WRONLY, 0o600)
try:
    os.posix_fallocate(fd, 0, 1 << 20)
    print("fallocate allowed")
except OSError as exc:
    print("fallocate", exc.errno)
os.write(fd, b"x" * 4096)
t = threading.Thread(target=print, args=("thread",)); t.start(); t.join()
print("child", os.system("true"))
# getpid through int 0x80 (i386's number 20): mov eax, 20; int 0x80; ret
code = bytes([0xB8, 20, 0, 0, 0, 0xCD, 0x80, 0xC3])
page = mmap.mmap(-1, 4096, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
page.write(code)
address = ctypes.addressof(ctypes.c_char.from_buffer(page))
print("int80", ctypes.CFUNCTYPE(ctypes.c_int)(address)())
'''
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    import errno

    lines = done.stdout.split("\n")
    assert f"fallocate {errno.ENOSPC}" in lines and "thread" in lines and "child 0" in lines, done.stdout + done.stderr
    assert f"int80 {-errno.ENOSYS}" in lines, done.stdout + done.stderr
