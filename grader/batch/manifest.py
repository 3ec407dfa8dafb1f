"""``RESULTS/manifest.json``: what a batch did, sealed so that a change to the results is seen.

For every student graded it records the digest of their files, the seed, the exercises
and the reference (so that the same command resumes: :meth:`Manifest.graded`), and the
sha256 of every file the batch wrote for them (their reports, ``results.json``); for the
class, the sha256 of the gradebook and the other exports. The manifest itself is signed
(HMAC-SHA256) with a key kept outside the results folder: the instructor's
``--sign-key``, or else a key of the batch's own in the grader's store
(:func:`batch_key`, readable by the grader's user only; a student's code, which runs as
a uid of its own, cannot read it).

So a report, a gradebook row or the manifest changed after the grader wrote it (by a
student's code that found the results folder, or by anyone else) is told:
:func:`verify` lists every such file (``grade verify RESULTS/``), and a resumed batch
does not trust a report whose digest changed: it grades that student again.
"""
from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import json
import os
import secrets
from pathlib import Path

from grader import store
from grader.batch import gradebook
from grader.batch.gradebook import Row
from grader.i18n import T, Text

MANIFEST = "manifest.json"
#: the batch's own logs in the results folder (Dask's, appended at every run): diagnostics, not
#: results, so never sealed and never reported as a file the batch did not write
LOGS = ("dask.log",)
SCHEMA = "grade-batch/1"
ALGORITHM = "HMAC-SHA256"
#: failures that the same files would meet again: not retried on resume (a crash or a timeout of
#: the grading itself is)
FINAL_FAILURES = ("unreadable",)


def batch_key(out: Path, key: bytes | None = None) -> bytes:
    """The key that seals the results in ``out``: ``key`` (the instructor's) when given, else the
    batch's own, made once and kept in the grader's store (mode 0600)."""
    if key is not None:
        return key
    folder = store.make_folder(store.root().parent / "batch-keys", mode=0o700)
    if folder is None:  # no store: a key for this process only (the seal holds while it runs)
        return secrets.token_bytes(32)
    path = folder / (hashlib.sha256(str(Path(out).resolve()).encode()).hexdigest()[:32] + ".key")
    try:
        return path.read_bytes()
    except FileNotFoundError:
        made = secrets.token_bytes(32)
        handle = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(handle, "wb") as file:
            file.write(made)
        return made


def file_digest(path: Path) -> str | None:
    """The sha256 of a file; ``None`` when it cannot be read."""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return None


def _canonical(data: dict) -> bytes:
    body = {k: v for k, v in data.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def _seal(data: dict, key: bytes) -> str:
    return hmac.new(key, _canonical(data), hashlib.sha256).hexdigest()


def sealed(data: dict, key: bytes) -> bool | None:
    """Whether the manifest ``data`` is as the batch wrote it (``None``: it carries no seal)."""
    signature = data.get("signature")
    if not isinstance(signature, dict) or signature.get("algorithm") != ALGORITHM:
        return None
    return hmac.compare_digest(_seal(data, key), str(signature.get("value", "")))


class Manifest:
    """``RESULTS/manifest.json``: who was graded, with which files, seed, exercises and reference."""

    def __init__(self, path: Path, data: dict, key: bytes):
        self.path = path
        self.data = data
        self.key = key
        #: the keys of the students being graded now, until their result is recorded
        self.pending: dict[str, dict] = {}

    @classmethod
    def load(cls, out: Path, chapter: str, key: bytes) -> "Manifest":
        """The folder's manifest; one that is unreadable, or whose seal does not hold, is kept aside
        (never lost) and a new one begun (every student is graded again)."""
        path = out / MANIFEST
        data: dict = {}
        if path.exists():
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
                if not isinstance(data, dict) or data.get("schema") != SCHEMA:
                    raise ValueError("not a grade-batch/1 manifest")
                if sealed(data, key) is False:
                    raise ValueError("changed since the batch wrote it")
            except (OSError, ValueError):
                path.rename(path.with_name(f"{MANIFEST}.unreadable-{dt.datetime.now():%Y%m%d-%H%M%S}"))
                data = {}
        if data.get("chapter") != chapter:
            data = {}
        data.setdefault("students", {})
        return cls(path, {"schema": SCHEMA, "chapter": chapter, **data}, key)

    @property
    def seed(self) -> int | None:
        return self.data.get("seed")

    def start(self, seed: int, exercises: list[str], digest: str) -> None:
        self.data.update(seed=seed, exercises=exercises, reference=digest)
        self.save()

    def graded(self, name: str, key: dict, out: Path) -> Row | None:
        """The student's row from their report, when they were graded with ``key`` already and their
        files are as the batch wrote them (a report changed since is not trusted: graded again)."""
        entry = self.data["students"].get(name)
        if not entry or any(entry.get(k) != v for k, v in key.items()):
            return None
        if entry.get("status") in FINAL_FAILURES:
            return gradebook.row_from_failure(name, entry["status"], entry.get("detail", ""))
        written = entry.get("files") or {}
        if not written or any(file_digest(out / name / file) != digest for file, digest in written.items()):
            return None
        try:
            report = json.loads((out / name / entry["report"]).read_text(encoding="utf-8"))
        except (OSError, ValueError, KeyError, TypeError):
            return None
        return gradebook.row_from_report(name, report)

    def record(self, name: str, entry: dict) -> None:
        self.data["students"][name] = entry
        self.save()

    def exports(self, out: Path, paths: list[Path]) -> None:
        """Record the digest of the gradebook, the other exports and the summary, as written."""
        self.data["exports"] = {path.relative_to(out).as_posix(): file_digest(path) for path in paths}
        self.save()

    def save(self) -> None:
        self.data.pop("signature", None)
        self.data["signature"] = {"algorithm": ALGORITHM, "value": _seal(self.data, self.key)}
        gradebook.write_text(self.path, json.dumps(self.data, ensure_ascii=False, indent=1) + "\n")


def verify(out: Path, key: bytes) -> list[Text]:
    """What in the results folder ``out`` is not as the batch wrote it: a line for each file changed
    since, and for each file it did not write (none: every file is the batch's, as it wrote it)."""
    path = Path(out) / MANIFEST
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return [T("verify.batch.no_manifest", path=str(path), detail=str(exc))]
    seal = sealed(data, key) if isinstance(data, dict) else None
    if seal is False:
        return [T("verify.batch.manifest_changed", path=str(path))]
    if seal is None:
        return [T("verify.batch.unsealed", path=str(path))]
    problems = []
    for name, entry in sorted(data.get("students", {}).items()):
        for file, digest in sorted((entry.get("files") or {}).items()):
            if file_digest(Path(out) / name / file) != digest:
                problems.append(T("verify.batch.changed", path=str(Path(out) / name / file)))
    known = {MANIFEST, *LOGS}
    for file, digest in sorted((data.get("exports") or {}).items()):
        known.add(file)
        if file_digest(Path(out) / file) != digest:
            problems.append(T("verify.batch.changed", path=str(Path(out) / file)))
    known |= {f"{name}/{file}" for name, entry in data.get("students", {}).items() for file in entry.get("files") or {}}
    for path in sorted(Path(out).rglob("*")):
        relative = path.relative_to(out).as_posix()
        if (path.is_file() or path.is_symlink()) and relative not in known and \
                not relative.startswith(f"{MANIFEST}.unreadable-"):
            problems.append(T("verify.batch.unknown", path=str(path)))
    return problems
