"""The instructor's signing key, read here for ``grade --sign-key``, ``grade batch --sign-key`` and ``grade verify``.

A key another user may read is refused, one line saying how to make it private
(:func:`grader.signing.read_key`). When it signs a grading, it is refused too where the
student's code could read it: under a sandbox whose jobs run as the grader's own uid and see
the key's file (:func:`grader.runner.sandbox.exposed_to_jobs`), the code would read it and sign
a report of its own.
"""
from __future__ import annotations

from pathlib import Path

from grader.cli.app import UserError
from grader.i18n import T, grader_catalog


def signing_key(path: Path, lang: str, sandbox: str | None = None) -> bytes:
    """The key at ``path``, read once for the command; ``lang``: the language of its error;
    ``sandbox``: the sandbox a grading signed with it runs under (``None``: nothing is graded,
    as ``grade verify``). Raises :class:`UserError`."""
    from grader.runner import sandbox as sandboxes
    from grader.signing import KeyError_, read_key

    words = lambda text: grader_catalog().render(text, lang)  # noqa: E731
    try:
        key = read_key(path)
    except KeyError_ as exc:
        if exc.mode is not None:
            raise UserError(words(T("error.key_shared", path=str(path), mode=f"{exc.mode:04o}"))) from None
        raise UserError(words(T("error.key", path=str(path), detail=str(exc)))) from None
    if sandbox is not None:
        try:
            plan = sandboxes.plan(sandbox)
        except RuntimeError:  # the grading says so in its own words
            return key
        if sandboxes.exposed_to_jobs(plan, Path(path)):
            word = plan.kind + ("+uid" if plan.uid_isolation else "")
            raise UserError(words(T("error.key_exposed", path=str(path), sandbox=word)))
    return key
