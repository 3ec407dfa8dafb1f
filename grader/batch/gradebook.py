"""The class's results as the files course platforms import, all from the same reports.

* ``grades.csv``: one row a student, a column per exercise, ``total``, ``percent``,
  ``status`` and ``detail``; the first row gives the maximum points (the shape of
  otter-grader's ``final_grades.csv``);
* ``<student>/results.json``: Gradescope's autograder format (``score``,
  ``execution_time``, ``output``, ``tests[]`` of ``name``, ``score``, ``max_score``,
  ``status``, ``output``, ``visibility``), a test per check;
* ``junit.xml``: one JUnit file for the class, a test suite per student, a test case
  per check.

Every row comes from a student's ``report.json`` (:func:`row_from_report`), or, for a
submission that could not be graded, from why not (:func:`row_from_failure`).
"""
from __future__ import annotations

import csv
import io
import json
import os
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

#: gradebook statuses: graded to the end, or why not
STATUSES = ("completed", "timeout", "crash", "unreadable", "not_a_submission", "name_clash", "sandbox",
            "interrupted")
MAX_ROW = "(max points)"


@dataclass
class Row:
    """One student's line of the gradebook."""

    #: the student's name (their folder's or file's)
    name: str
    #: one of :data:`STATUSES`: ``completed``; ``timeout`` (an exercise, or the whole grading,
    #: ran out of time); ``crash`` (an exercise's process crashed or its module could not be
    #: run, or the grading process itself died); ``unreadable`` (a broken or unsafe zip, an
    #: empty folder, ...); ``not_a_submission``; ``name_clash`` (names equal but for case);
    #: ``sandbox`` (the sandbox required was not there); ``interrupted`` (Ctrl-C: graded on resume)
    status: str
    #: why the status is not ``completed``, in the batch's language ("" when it is)
    detail: str = ""
    #: the student's report (``grade-report/1``), when one was written
    report: dict | None = None
    #: points by exercise id (empty without a report)
    scores: dict[str, float] = field(default_factory=dict)
    #: seconds the grading took
    duration_s: float = 0.0

    @property
    def total(self) -> float:
        return round(sum(self.scores.values()), 6)


def row_from_report(name: str, report: dict, duration_s: float | None = None) -> Row:
    """A row from a ``report.json``: the status says whether an exercise timed out or crashed."""
    timeouts = [e for e in report["exercises"] if e["status"] == "timeout"]
    crashes = [e for e in report["exercises"] if e["status"] == "error"]
    status = "timeout" if timeouts else "crash" if crashes else "completed"
    detail = "; ".join(f"{e['id']}: {e['status']}" + (f" ({_short(e['error'])})" if e.get("error") else "")
                       for e in timeouts + crashes)
    return Row(name, status, detail, report, {e["id"]: e["score"] for e in report["exercises"]},
               report.get("duration_s", 0.0) if duration_s is None else duration_s)


def row_from_failure(name: str, status: str, message: str, duration_s: float = 0.0) -> Row:
    return Row(name, status if status in STATUSES else "crash", message, None, {}, duration_s)


def _short(text: str, limit: int = 120) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _num(value: float) -> str:
    return f"{value:g}"


# ------------------------------------------------------------------ grades.csv
def grades_csv(rows: list[Row], max_points: dict[str, float]) -> str:
    """The gradebook: a header, the maximum points, then a row a student (0 where nothing was graded)."""
    ids = list(max_points)
    most = sum(max_points.values())
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["student", *ids, "total", "percent", "status", "detail"])
    writer.writerow([MAX_ROW, *(_num(max_points[i]) for i in ids), _num(most), "100", "", ""])
    for row in rows:
        percent = round(100 * row.total / most, 2) if most else 0
        writer.writerow([row.name, *(_num(row.scores.get(i, 0)) for i in ids), _num(row.total), _num(percent),
                         row.status, row.detail])
    return out.getvalue()


# ------------------------------------------------------------------ Gradescope
def gradescope(row: Row) -> dict:
    """Gradescope's autograder ``results.json`` for one student."""
    if row.report is None:
        return {"score": 0, "execution_time": round(row.duration_s), "output": f"{row.status}: {row.detail}",
                "visibility": "visible", "tests": []}
    tests = []
    for ex in row.report["exercises"]:
        for c in ex["checks"]:
            output = "\n".join(part for part in (c["message"], c["hint"] and f"Hint: {c['hint']}") if part)
            tests.append({"name": f"{ex['id']} · {c['id']}: {c['title']}", "score": c["points"],
                          "max_score": c["max_points"],
                          "status": "passed" if c["points"] >= c["max_points"] else "failed",
                          "output": output, "visibility": "visible", "tags": [c["category"]]})
    return {"score": row.report["score"], "execution_time": round(row.duration_s),
            "output": row.report.get("title", ""), "visibility": "visible", "tests": tests}


# ------------------------------------------------------------------ JUnit
_JUNIT_KIND = {"failed": "failure", "error": "error", "timeout": "error", "not_attempted": "skipped",
               "skipped": "skipped"}


def junit_xml(rows: list[Row], chapter: str) -> str:
    """One JUnit XML document for the class: a test suite per student, a test case per check."""
    suites = ET.Element("testsuites", name=f"grade batch {chapter}")
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    for row in rows:
        suite = ET.SubElement(suites, "testsuite", name=row.name, time=f"{row.duration_s:.3f}")
        counts = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
        props = ET.SubElement(suite, "properties")
        for key, value in (("status", row.status), ("score", _num(row.total))):
            ET.SubElement(props, "property", name=key, value=value)
        if row.report is None:
            case = ET.SubElement(suite, "testcase", classname=row.name, name="submission", time="0")
            ET.SubElement(case, "error", type=row.status, message=row.detail)
            counts["tests"] += 1
            counts["errors"] += 1
        for ex in (row.report or {}).get("exercises", []):
            share = ex.get("duration_s", 0) / max(1, len(ex["checks"]))
            for c in ex["checks"]:
                case = ET.SubElement(suite, "testcase", classname=f"{row.name}.{ex['id']}", name=c["id"],
                                     time=f"{share:.3f}")
                counts["tests"] += 1
                kind = _JUNIT_KIND.get(c["status"])
                if kind is None:
                    continue
                counts[{"failure": "failures", "error": "errors", "skipped": "skipped"}[kind]] += 1
                element = ET.SubElement(case, kind, type=c["status"], message=_short(c["message"], 300))
                if kind != "skipped":
                    element.text = "\n".join(part for part in (c["message"], c["hint"] and f"Hint: {c['hint']}")
                                             if part)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
    for key, value in totals.items():
        suites.set(key, str(value))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# ------------------------------------------------------------------ writing
def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a file is whole or as it was, never half written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_exports(rows: list[Row], max_points: dict[str, float], out: Path, chapter: str) -> dict[str, Path]:
    """``grades.csv``, ``junit.xml`` and each student's ``results.json`` under ``out``; their paths."""
    paths = {"grades": out / "grades.csv", "junit": out / "junit.xml"}
    write_text(paths["grades"], grades_csv(rows, max_points))
    write_text(paths["junit"], junit_xml(rows, chapter))
    for row in rows:
        if row.status in ("name_clash", "not_a_submission"):  # no folder of their own (or one shared by case)
            continue
        write_text(out / row.name / "results.json", json.dumps(gradescope(row), ensure_ascii=False, indent=2) + "\n")
    return paths
