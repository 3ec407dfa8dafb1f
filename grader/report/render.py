"""The terminal table, ``report.md`` and ``report.json``."""
from __future__ import annotations

import json
import math
import os
import shutil
import textwrap
from pathlib import Path

from grader.i18n import Catalog, T
from grader.results import Report, report_to_dict

ICONS = {"passed": "✓", "partial": "◐", "failed": "✗", "not_attempted": "·", "error": "!", "timeout": "⏱",
         "skipped": "↷"}
COLORS = {"passed": "green", "partial": "yellow", "failed": "red", "not_attempted": None, "error": "magenta",
          "timeout": "magenta", "skipped": None}


def _num(value: float) -> str:
    return f"{value:g}"


def _strict(value):
    """JSON has no NaN or infinity: such numbers become strings ("inf", "nan")."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, dict):
        return {k: _strict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v) for v in value]
    return value


def render_json(report: Report, catalog: Catalog, lang: str, *, key: bytes | None = None) -> str:
    """The ``grade-report/1`` JSON; signed (HMAC) when an instructor's key is given."""
    data = _strict(report_to_dict(report, catalog, lang))
    data = json.loads(json.dumps(data, default=str))  # exactly what is written is what is signed
    if key is not None:
        from grader.signing import sign

        data = sign(data, key)
    return json.dumps(data, ensure_ascii=False, indent=2, allow_nan=False) + "\n"


def _measured_text(measured: dict, limit: int = 220) -> str:
    text = json.dumps(measured, ensure_ascii=False, default=str, separators=(", ", ": "))
    return text if len(text) <= limit else text[: limit - 1] + "…"


# ------------------------------------------------------------------ terminal
def render_terminal(report: Report, catalog: Catalog, lang: str, *, color: bool = False,
                    width: int | None = None) -> str:
    width = width or min(shutil.get_terminal_size((100, 24)).columns, 120)
    words = lambda text: catalog.render(text, lang)  # noqa: E731

    def style(text: str, status: str | None = None, bold: bool = False, dim: bool = False) -> str:
        if not color:
            return text
        import click

        return click.style(text, fg=COLORS.get(status) if status else None, bold=bold, dim=dim)

    def wrap(text: str, indent: str) -> list[str]:
        return textwrap.wrap(text, width=max(40, width - len(indent)), initial_indent=indent,
                             subsequent_indent=indent + "  ", break_long_words=True) or [indent]

    lines = [style(words(T("ui.title", chapter=words(report.chapter_title), score=_num(report.score),
                                 max_score=_num(report.max_score))), bold=True), ""]
    id_width = max((len(e.id) for e in report.exercises), default=10)
    for ex in report.exercises:
        status_word = words(T(f"ui.status.{ex.status}"))
        score = f"{_num(ex.score)}/{_num(ex.max_score)}"
        head = f" {ICONS.get(ex.status, ' ')} {ex.id.ljust(id_width)}  {score:>9}  {status_word}"
        title = words(ex.title)
        lines.append(style(head, ex.status) + style(f"  {title}", dim=True))
        if ex.error and ex.status in ("error", "timeout"):
            lines.extend(style(line, ex.status) for line in wrap(words(ex.error), "     "))
        if ex.status in ("not_attempted", "passed"):
            continue
        shown_error = words(ex.error) if ex.error else None
        for check in ex.checks:
            if check.status == "passed":
                continue
            check_head = (f"   {ICONS.get(check.status, ' ')} {check.id}  "
                          f"{_num(check.points)}/{_num(check.max_points)}  {words(check.title)}")
            lines.extend(style(line, check.status) for line in wrap(check_head, "   ")[:2])
            message = words(check.message)
            if check.status in ("failed", "skipped", "not_attempted") or message != shown_error:
                for line in wrap(f"{words(T('ui.seen'))}: {message}", "       ")[:8]:
                    lines.append(line)
            if check.status == "failed" and check.measured:
                lines.extend(style(line, dim=True) for line in
                             wrap(f"{words(T('ui.measured'))}: {_measured_text(check.measured)}", "       ")[:3])
            if check.status in ("failed", "error", "timeout"):
                lines.extend(style(line, dim=True) for line in
                             wrap(f"{words(T('ui.hint'))}: {words(check.hint)}", "       "))
        if ex.output.strip() and ex.status in ("error", "timeout", "failed", "partial"):
            tail = ex.output.strip().splitlines()[-6:]
            lines.append(style(f"     {words(T('ui.output'))}:", dim=True))
            lines.extend(style("       | " + line[: width - 10], dim=True) for line in tail)
    lines.append("")
    if report.score >= report.max_score and report.max_score > 0:
        lines.append(style(words(T("ui.all_passed")), "passed", bold=True))
    else:
        nxt = next((e for e in report.exercises if e.status != "passed"), None)
        if nxt is not None:
            lines.append(words(T("ui.next", exercise=nxt.id, title=words(nxt.title))))
    if report.integrity:
        lines.append(style(f"{words(T('ui.integrity'))}: " + "; ".join(
            f"{i['file']}:{i['line']} {words(i['message'])}" for i in report.integrity[:5])
            + (" …" if len(report.integrity) > 5 else ""), dim=True))
    env = report.environment
    lines.append(style(words(T("ui.environment", backend=env.get("backend") or "?",
                                 device=env.get("device_kind") or "?", jax=env.get("jax") or "?",
                                 python=env.get("python") or "?", sandbox=_sandbox_word(report),
                                 duration=report.duration_s)), dim=True))
    for note in report.sandbox.get("notes", []) if report.sandbox.get("kind") != "bwrap" else []:
        lines.append(style(words(note), dim=True))
    lines.append(style(words(T("ui.seed", seed=report.seed)), dim=True))
    return "\n".join(lines) + "\n"


def _sandbox_word(report: Report) -> str:
    kind = report.sandbox.get("kind", "?")
    return kind + ("+uid" if report.sandbox.get("uid_isolation") else "")


# ------------------------------------------------------------------ markdown
def _md_escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report, catalog: Catalog, lang: str) -> str:
    words = lambda text: catalog.render(text, lang)  # noqa: E731
    out = [f"# {words(T('ui.title', chapter=words(report.chapter_title), score=_num(report.score), max_score=_num(report.max_score)))}",
           ""]
    env = report.environment
    out.append("> " + words(T("ui.environment", backend=env.get("backend") or "?", device=env.get("device_kind") or "?",
                                jax=env.get("jax") or "?", python=env.get("python") or "?",
                                sandbox=_sandbox_word(report), duration=report.duration_s))
               + " · " + words(T("ui.seed", seed=report.seed)))
    out += ["", f"| {words(T('ui.exercise'))} | {words(T('ui.score'))} | {words(T('ui.status'))} |", "|---|---:|---|"]
    for ex in report.exercises:
        out.append(f"| {ICONS.get(ex.status, '')} `{ex.id}` {_md_escape(words(ex.title))} | "
                   f"{_num(ex.score)} / {_num(ex.max_score)} | {words(T(f'ui.status.{ex.status}'))} |")
    for ex in report.exercises:
        out += ["", f"## {ICONS.get(ex.status, '')} {ex.id}: {words(ex.title)} ({_num(ex.score)} / {_num(ex.max_score)})", ""]
        if ex.error:
            out += [f"**{_md_escape(words(ex.error))}**", ""]
        out += [f"| {words(T('ui.check'))} | {words(T('ui.score'))} | {words(T('ui.status'))} | {words(T('ui.seen'))} |",
                "|---|---:|---|---|"]
        for c in ex.checks:
            out.append(f"| {ICONS.get(c.status, '')} `{c.id}` {_md_escape(words(c.title))} | {_num(c.points)} / "
                       f"{_num(c.max_points)} | {words(T(f'ui.status.{c.status}'))} | {_md_escape(words(c.message))} |")
        details = [c for c in ex.checks if c.status in ("failed", "error", "timeout")]
        for c in details:
            out += ["", f"- **{c.id}**: {words(c.message)}", f"  - {words(T('ui.hint'))}: {words(c.hint)}"]
            if c.measured:
                out.append(f"  - {words(T('ui.measured'))}: `{_measured_text(c.measured, 600)}`")
        if ex.output.strip() and ex.status in ("error", "timeout", "failed", "partial"):
            out += ["", f"<details><summary>{words(T('ui.output'))}</summary>", "", "```text",
                    ex.output.strip()[-3000:].replace("```", "``\u200b`"), "```", "</details>"]
    if report.integrity:
        out += ["", f"## {words(T('ui.integrity'))}", ""]
        out += [f"- `{i['file']}:{i['line']}` {words(i['message'])}" for i in report.integrity]
    return "\n".join(out) + "\n"


def write_reports(report: Report, catalog: Catalog, lang: str, directory: Path, *, key: bytes | None = None) -> Path:
    """Write ``report.json`` and ``report.md`` atomically; returns the JSON file's path."""
    directory.mkdir(parents=True, exist_ok=True)
    for name, text in (("report.json", render_json(report, catalog, lang, key=key)),
                       ("report.md", render_markdown(report, catalog, lang))):
        tmp = directory / f".{name}.tmp"
        tmp.write_text(text, encoding="utf-8")
        os.replace(tmp, directory / name)
    return directory / "report.json"
