"""Reports that cannot be forged: an HMAC-SHA256 signature with a key the instructor holds.

The signature covers the report's canonical JSON (sorted keys, no whitespace) without
the ``signature`` field itself, so any change to a score, a check or a measurement
invalidates it. ``grade check PATH --sign-key KEY`` signs; ``grade verify REPORT --key
KEY`` checks.
"""
from __future__ import annotations

import hashlib
import hmac
import json
from pathlib import Path

ALGORITHM = "HMAC-SHA256"
MIN_KEY_BYTES = 16


class KeyError_(Exception):
    """The key file cannot be used."""


def read_key(path: Path) -> bytes:
    try:
        key = Path(path).read_bytes().strip()
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
