"""Reports that cannot be forged: an HMAC-SHA256 signature with a key the instructor holds.

The signature covers the report's canonical JSON (sorted keys, no whitespace) without
the ``signature`` field itself, so any change to a score, a check or a measurement
invalidates it. ``grade check PATH --sign-key KEY`` signs; ``grade verify REPORT --key
KEY`` checks.

A key anyone but its owner may read is refused (:func:`read_key`): a student's code runs
under a uid of its own (the sandbox's per-job uids), and must not be able to read it and
sign a report of its own. Where a job runs under the grader's own uid, the grader refuses
to sign when the key is in the job's view (:func:`grader.runner.sandbox.exposed_to_jobs`).
"""
from __future__ import annotations

import hashlib
import hmac
import json
import os
import stat
from pathlib import Path

ALGORITHM = "HMAC-SHA256"
MIN_KEY_BYTES = 16


class KeyError_(Exception):
    """The key file cannot be used; ``mode``: its permissions, when they are why (others may read it)."""

    def __init__(self, detail: str, mode: int | None = None):
        super().__init__(detail)
        self.mode = mode


def read_key(path: Path) -> bytes:
    """The key in the file at ``path``. Raises :class:`KeyError_` when it cannot be read, is shorter
    than :data:`MIN_KEY_BYTES`, or its group or others have any permission on it (``chmod 600``)."""
    try:
        with open(path, "rb") as handle:
            mode = os.fstat(handle.fileno()).st_mode
            if mode & 0o077:  # checked on the file opened: a link to it or a change in between cannot hide it
                raise KeyError_(f"mode {stat.S_IMODE(mode):04o}", mode=stat.S_IMODE(mode))
            key = handle.read(1 << 16).strip()
    except OSError as exc:
        raise KeyError_(exc.strerror or str(exc)) from None
    if len(key) < MIN_KEY_BYTES:
        raise KeyError_(f"{len(key)} bytes")
    return key


def key_id(key: bytes) -> str:
    return hashlib.sha256(b"grade-key-id:" + key).hexdigest()[:12]


def _canonical(report: dict) -> bytes:
    body = {k: v for k, v in report.items() if k != "signature"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False).encode()


def sign(report: dict, key: bytes) -> dict:
    """The report with its ``signature`` field added."""
    digest = hmac.new(key, _canonical(report), hashlib.sha256).hexdigest()
    return {**report, "signature": {"algorithm": ALGORITHM, "key_id": key_id(key), "value": digest}}


def verify(report: dict, key: bytes) -> bool | None:
    """True if signed with ``key`` and unchanged, False if not, None if not signed at all."""
    signature = report.get("signature")
    if not isinstance(signature, dict) or signature.get("algorithm") != ALGORITHM:
        return None
    expected = hmac.new(key, _canonical(report), hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, str(signature.get("value", "")))
