"""A student reading a classmate during a batch finds nothing, in every executor.

Alice, graded first, leaves her answers where a classmate graded after her (in the same
worker, whose hosts are forked from one template) or beside her (in another worker)
could look: a file in ``/tmp``, a System V shared memory segment, and her own folder.
Bob's code walks up from his folder looking for classmates' modules and zips, lists
the folders above him, reads ``/tmp`` and attaches the shared memory; whatever he
finds he would use as his answer. He must find nothing and score nothing for it, with
``-j 1`` (Alice's and Bob's hosts forked one after the other), ``-j 2`` and a local
Dask cluster. Each test fails if the sandbox leaks any one of these (Alice's marker
string reaching Bob's output is the proof).
"""
from __future__ import annotations

import csv
import json
import shutil
from pathlib import Path

import pytest

from conftest import SOLUTIONS, STUBS, make_submission

from grader.cli import main
from grader.runner import sandbox as sandboxes

pytestmark = pytest.mark.slow
PLAN = sandboxes.plan("auto")
STRONG = PLAN.kind == "bwrap" and PLAN.uid_isolation
needs_strong = pytest.mark.skipif(not STRONG, reason="a batch's isolation needs bubblewrap and per-job uids (run "
                                                     "as root with bwrap installed); without them batch grading is "
                                                     "refused unless --allow-weak-sandbox, and the summary says so")
MARKER = "ALICE-SECRET-7f3a"

#: Alice leaves her answers around at import, then behaves
LEAVE = f'''import ctypes, os

_secret = "{MARKER}\\n" + open(__file__).read()
for _place in ("/tmp/answers.py", "/tmp/.hidden-answers.py", os.path.expanduser("~/answers.py")):
    try:
        with open(_place, "w") as _f:
            _f.write(_secret)
        os.chmod(_place, 0o666)
    except OSError:
        pass
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.shmat.restype = ctypes.c_void_p
    _id = _libc.shmget(0x5EC7E7, 1 << 16, 0o1666)  # IPC_CREAT | 0666: outlives this process
    _at = _libc.shmat(_id, None, 0)
    if _id >= 0 and _at not in (None, ctypes.c_void_p(-1).value):
        ctypes.memmove(_at, _secret.encode()[: 1 << 15], len(_secret.encode()[: 1 << 15]))
except Exception:
    pass
'''

#: Bob looks everywhere, prints what he finds, and uses it as his answer when he can
LOOK = '''import ctypes, glob, os, zipfile

_found = []


def _take(text, where):
    if "MARKER" in text:
        _found.append((where, text))


_here = os.path.dirname(os.path.abspath(__file__))
_up = _here
for _ in range(6):  # walk up: classmates' folders, the class folder's zips
    _up = os.path.dirname(_up)
    try:
        print("listed", _up, sorted(os.listdir(_up))[:20])
    except OSError as _exc:
        print("cannot list", _up, type(_exc).__name__)
    for _path in (glob.glob(os.path.join(_up, "*", "ex02_where.py"))
                  + glob.glob(os.path.join(_up, "*", "*", "ex02_where.py"))):
        if os.path.dirname(os.path.abspath(_path)) != _here:
            try:
                _take(open(_path).read(), _path)
            except OSError:
                pass
    for _zip in glob.glob(os.path.join(_up, "*.zip")):
        try:
            with zipfile.ZipFile(_zip) as _archive:
                for _name in _archive.namelist():
                    if _name.endswith("ex02_where.py"):
                        _take(_archive.read(_name).decode(), _zip)
        except Exception:
            pass
for _path in glob.glob("/tmp/*") + glob.glob("/tmp/.*") + [os.path.expanduser("~/answers.py")]:
    try:
        _take(open(_path).read(), _path)
    except OSError:
        pass
try:
    _libc = ctypes.CDLL(None, use_errno=True)
    _libc.shmat.restype = ctypes.c_void_p
    _id = _libc.shmget(0x5EC7E7, 0, 0)
    _at = _libc.shmat(_id, None, 0o10000) if _id >= 0 else None  # SHM_RDONLY
    if _at not in (None, ctypes.c_void_p(-1).value):
        _take(ctypes.string_at(_at, 1 << 15).split(b"\\0", 1)[0].decode(errors="replace"), "shm")
    print("shm", _id)
except Exception as _exc:
    print("shm failed", _exc)
print("FOUND" if _found else "found nothing", [w for w, _ in _found])
if _found:
    exec(_found[0][1].split("\\n", 1)[1])  # a classmate's answers as his own
'''.replace("MARKER", MARKER)


def _class(root: Path) -> Path:
    klass = root / "class"
    alice = make_submission(root / "tmp-alice",
                            {"ex02_where": LEAVE + (SOLUTIONS / "ex02_where.py").read_text("utf-8")})
    shutil.move(str(alice), klass / "a-alice")
    bob = make_submission(root / "tmp-bob", {"ex02_where": LOOK + (STUBS / "ex02_where.py").read_text("utf-8")},
                          base=STUBS)
    shutil.move(str(bob), klass / "b-bob")
    shutil.make_archive(str(klass / "c-carol"), "zip", SOLUTIONS)  # a classmate's zip beside them
    return klass


@needs_strong
@pytest.mark.parametrize("executor", [["-j", "1"], ["-j", "2"], ["--executor", "dask", "-j", "2"]],
                         ids=["j1", "j2", "dask2"])
def test_a_student_finds_nothing_of_a_classmate(tmp_path, executor):
    klass = _class(tmp_path)
    out = tmp_path / "results"
    assert main(["batch", str(klass), "--chapter", "ch4", "--out", str(out), "-k", "2", "--seed", "4", "--lang",
                 "en", *executor]) == 0
    with (out / "grades.csv").open(encoding="utf-8") as handle:
        rows = {row["student"]: row for row in csv.DictReader(handle)}
    assert rows["a-alice"]["total"] == "10" and rows["c-carol"]["total"] == "10"
    assert rows["b-bob"]["total"] == "0", rows["b-bob"]
    report = json.loads((out / "b-bob" / "report.partial.json").read_text(encoding="utf-8"))
    output = report["exercises"][0]["output"]
    assert "found nothing" in output and MARKER not in output, output
    assert "a-alice" not in output and "c-carol" not in output  # not even their names
