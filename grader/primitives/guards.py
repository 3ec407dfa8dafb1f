"""Guards a check runs before it judges: was the function attempted, did its calls return, is it jitted.

Chapter-agnostic: every exercise's checks use them (they raise :class:`~grader.checks.NotAttempted` or
:class:`~grader.checks.Fail` with the sentence a student reads).
"""
from __future__ import annotations

from grader.checks import NAMES, Fail, NotAttempted, Records
from grader.i18n import T

__all__ = ["all_jitted", "any_attempted", "attempted", "require_jitted", "returned"]


def attempted(s: Records, *keys: str) -> None:
    """Read calls first: a stub raises NotAttempted here, before anything is judged."""
    for key in keys:
        s.call(key)


def returned(s: Records, *keys: str) -> None:
    """Like :func:`attempted`, and every call must have returned (else Fail with its error)."""
    for key in keys:
        s.result(key)


def require_jitted(s: Records, name: str) -> None:
    """Fail unless the module-level ``name`` is the object ``jax.jit`` returns."""
    described = s.value(NAMES(name=name))
    if not described.get("jitted"):
        raise Fail(T("structure.not_jitted_compiles", name=name, type=described.get("shown") or described.get("type")),
                   {"type": described.get("type")})


def any_attempted(s: Records, keys: dict[str, str], *, missing_counts: bool = True) -> list[str]:
    """The functions (of ``{function: key of its first call}``) that got past ``NotImplementedError``
    (a function the module does not define counts when ``missing_counts``).

    Raises :class:`NotAttempted` when none did.
    """
    done = []
    for name, key in keys.items():
        try:
            s.call(key)
            done.append(name)
        except NotAttempted:
            continue
        except Fail:
            if missing_counts:
                done.append(name)
    if not done:
        raise NotAttempted(", ".join(keys))
    return done


def all_jitted(s: Records, names: list[str]) -> dict:
    """Fail naming every one of ``names`` that is not jitted."""
    not_jitted = [n for n in names if not s.value(NAMES(name=n)).get("jitted")]
    if not_jitted:
        raise Fail(T("structure.not_jitted_many", names=", ".join(not_jitted)), {"not_jitted": not_jitted})
    return {"jitted": names}
