"""The class's results as the files course platforms import, all from the same reports.

* ``grades.csv``: one row a student, the platform's ``name``, ``id``, ``email``, ``late``
  and ``submitted`` beside them, a column per exercise, ``total``, ``percent``,
  ``status`` and ``detail``; the first row gives the maximum points (the shape of
  otter-grader's ``final_grades.csv``). A group's submission gives each member a row;
* ``canvas.csv`` (a Canvas download): the gradebook as Canvas imports it (``Student``,
  ``ID``, ``SIS User ID``, ``SIS Login ID``, ``Section``, the assignment's column, a
  ``Points Possible`` row), matched by Canvas's user id;
* ``moodle.csv`` (a Moodle download): Moodle's grading worksheet, every column Moodle's own has
  (``Identifier`` ``Participant N``, ``Full name``, ``Grade``, ``Maximum Grade``, ``Last modified
  (grade)``, ``Feedback comments``, ...), a row per participant id;
* ``canvas-anonymous.csv`` (a Canvas download with anonymous grading): the grades by anonymous id;
* ``download.csv``: every file of the download, the student it belongs to, and whether
  it was graded or why not (nothing dropped silently);
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
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, field
from pathlib import Path

from grader import safetext

#: gradebook statuses: graded to the end, or why not
STATUSES = ("completed", "timeout", "crash", "unreadable", "not_a_submission", "name_clash", "id_clash", "sandbox",
            "interrupted")
MAX_ROW = "(max points)"


@dataclass
class Row:
    """One submission's line of the gradebook (a line per person in it in ``grades.csv``)."""

    #: the submission's name (the platform's name and id, or the folder's or file's name); its results
    #: folder is ``key``
    name: str
    #: one of :data:`STATUSES`: ``completed``; ``timeout`` (an exercise, or the whole grading,
    #: ran out of time); ``crash`` (an exercise's process crashed or its module could not be
    #: run, or the grading process itself died); ``unreadable`` (a broken or unsafe zip, an
    #: empty folder, ...); ``not_a_submission``; ``name_clash`` (named as one of the batch's own files);
    #: ``id_clash`` (another submission claims the same platform id: neither is graded);
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
    #: the folder of its results under ``--out`` (``name`` made safe); ``""``: ``name``
    key: str = ""
    #: who it belongs to, as the platform names them (:class:`grader.batch.roster.Person`)
    people: list = field(default_factory=list)
    #: the platform marked it late
    late: bool = False
    #: when it was submitted, as the platform says it
    submitted_at: str = ""

    def __post_init__(self) -> None:
        self.key = self.key or self.name

    @property
    def total(self) -> float:
        return round(sum(self.scores.values()), 6)

    def of(self, student) -> "Row":
        """This row with what the download says of its student (:class:`grader.batch.roster.Student`)."""
        self.name, self.key, self.people = student.name, student.key, list(student.people)
        self.late, self.submitted_at = student.late, student.submitted_at
        return self


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
    writer.writerow(safetext.csv_row(["student", "name", "id", "email", "late", "submitted", *ids, "total", "percent",
                                      "status", "detail"]))
    writer.writerow([MAX_ROW, "", "", "", "", "", *(_num(max_points[i]) for i in ids), _num(most), "100", "", ""])
    for row in rows:
        percent = round(100 * row.total / most, 2) if most else 0
        for person in row.people or [None]:
            writer.writerow(safetext.csv_row([
                row.name, person.name if person else row.name, person.id if person else "",
                person.email if person else "", "yes" if row.late else "", row.submitted_at,
                *(_num(row.scores.get(i, 0)) for i in ids), _num(row.total), _num(percent), row.status, row.detail]))
    return out.getvalue()


#: statuses whose points are a grade (a crash or a timeout costs that exercise only); any other is no grade
GRADED = ("completed", "timeout", "crash")
#: Canvas's ``Title (id)``: an assignment Canvas has (``Assignment.title_and_id``)
_CANVAS_EXISTING = re.compile(r"^.*\(\d+\)\s*$")


def grade_of(row: Row) -> str:
    """A row's grade as a platform's file writes it: its points where it was graded (a crash or a timeout
    costs that exercise only), else blank: a submission that could not be graded (unreadable, online text
    alone, another's id) is no 0, and the summary says why (a platform records a 0 it imports)."""
    return _num(row.total) if row.report is not None and row.status in GRADED else ""


def canvas_csv(rows: list[Row], most: float, assignment: str) -> str:
    """The gradebook as Canvas imports it: a row per student Canvas knows by id (``Grades > Import``).

    Canvas matches each row by ``ID`` (its user id, from the download's names); the
    assignment's column is named as in Canvas's own export (``Chapter 4 (98765)``) to
    update that assignment, or any new name to make one. A submission that was not
    graded gets no grade (a blank) and is listed in the summary. The ``Points Possible``
    row gives a new assignment the chapter's points; for one Canvas has (``Title (id)``) it
    is blank, since ``GradebookImporter#process_pp`` sets every assignment's points possible
    from that row (lib/gradebook_importer.rb) and a Ruby CSV field left empty is ``nil``.
    """
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(safetext.csv_row(["Student", "ID", "SIS User ID", "SIS Login ID", "Section", assignment]))
    writer.writerow(["    Points Possible", "", "", "", "", "" if _CANVAS_EXISTING.match(assignment) else _num(most)])
    for row in rows:
        for person in row.people:
            if person.id:
                writer.writerow(safetext.csv_row([person.name, person.id, "", "", "", grade_of(row)]))
    return out.getvalue()


#: the columns of Moodle's grading worksheet, in its order (assign_grading_table::__construct when
#: downloading, mod/assign/gradingtable.php: recordid, fullname, the site's identity fields (e-mail by
#: default), status, grade, grademax, gradecanbechanged, timesubmitted, timemarked, then each feedback
#: plugin's editor field), as English headers: Moodle's importer finds Identifier, Grade and
#: Last modified (grade) by name and refuses a file without all three (importgradeslib.php, init())
MOODLE_COLUMNS = ("Identifier", "Full name", "Email address", "Status", "Grade", "Maximum Grade",
                  "Grade can be changed", "Last modified (submission)", "Last modified (grade)", "Feedback comments")


def moodle_csv(rows: list[Row], most: float, modified: str) -> str:
    """Moodle's grading worksheet (``Upload grading worksheet``): a row per participant id, every
    column of the worksheet Moodle downloads. ``modified`` is "Last modified (grade)" (the time the
    batch wrote it): Moodle keeps a grade changed in Moodle after that time. A team's submission has
    no participant id (its folder holds the group's id): no row here."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(MOODLE_COLUMNS)
    for row in rows:
        for person in row.people:
            if person.id:
                feedback = feedback_of(row)
                writer.writerow(safetext.csv_row([f"Participant {person.id}", person.name, person.email, "",
                                                  grade_of(row), _num(most), "Yes", "", modified, feedback]))
    return out.getvalue()


def feedback_of(row: Row) -> str:
    """What a student reads of the batch in the platform's feedback: the score line of the report, without
    the path graded (the instructor's machine's), else why it was not graded."""
    if row.report is None:
        return f"{row.status}: {row.detail}"
    return str(row.report.get("score_line") or row.report.get("title", ""))


def canvas_anonymous_csv(rows: list[Row], most: float) -> str:
    """A Canvas anonymous download's grades, by anonymous id (Canvas's import takes none of them:
    the summary says what to do)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["anonymous id", "score", "points possible", "late", "status"])
    for row in rows:
        for person in row.people:
            writer.writerow(safetext.csv_row([person.name.removeprefix("anon_"), grade_of(row), _num(most),
                                              "yes" if row.late else "", row.status]))
    return out.getvalue()


def download_csv(uses: list) -> str:
    """Every file of the download: the student it belongs to, and ``graded`` or why not
    (:class:`grader.batch.layouts.FileUse`)."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["file", "student", "use"])
    for use in sorted(uses, key=lambda u: u.file):
        writer.writerow(safetext.csv_row([use.file, use.student, use.use]))
    return out.getvalue()


# ------------------------------------------------------------------ Gradescope
def gradescope(row: Row, hint: str = "Hint") -> dict:
    """Gradescope's autograder ``results.json`` for one student; ``hint`` labels the hints (the
    report's language's word)."""
    if row.report is None:
        return {"score": 0, "execution_time": round(row.duration_s), "output": f"{row.status}: {row.detail}",
                "output_format": "text", "visibility": "visible", "tests": []}
    tests = []
    for ex in row.report["exercises"]:
        for c in ex["checks"]:
            output = "\n".join(part for part in (c["message"], c["hint"] and f"{hint}: {c['hint']}") if part)
            tests.append({"name": f"{ex['id']} · {c['id']}: {c['title']}", "score": c["points"],
                          "max_score": c["max_points"],
                          "status": "passed" if c["points"] >= c["max_points"] else "failed",
                          "output": output, "visibility": "visible", "tags": [c["category"]]})
    return {"score": row.report["score"], "execution_time": round(row.duration_s),
            "output": feedback_of(row), "output_format": "text", "visibility": "visible", "tests": tests}


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
    for element in suites.iter():  # a student's name or printed text: nothing XML 1.0 cannot carry
        element.text = safetext.xml(element.text) if element.text else element.text
        for attribute, value in element.attrib.items():
            element.set(attribute, safetext.xml(value))
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


# ------------------------------------------------------------------ writing
def write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` atomically (a file is whole or as it was, never half written)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def write_exports(rows: list[Row], max_points: dict[str, float], out: Path, chapter: str, *, layout: str = "folders",
                  assignment: str = "", uses: list | None = None, kind: str = "people",
                  modified: str = "", partial: bool = False) -> dict[str, Path]:
    """``grades.csv``, ``junit.xml``, ``download.csv``, the platform's import file (``canvas.csv``,
    ``moodle.csv``; ``canvas-anonymous.csv`` for an anonymous download, which Canvas cannot import)
    and each student's ``results.json`` under ``out``; their paths. ``partial``: some of the chapter's
    exercises only (``-k``): no platform's import file (its grade would stand for the chapter's)."""
    paths = {"grades": out / "grades.csv", "junit": out / "junit.xml"}
    write_text(paths["grades"], grades_csv(rows, max_points))
    write_text(paths["junit"], junit_xml(rows, chapter))
    most = sum(max_points.values())
    if partial:
        pass
    elif layout == "canvas" and kind == "anonymous":
        paths["canvas_anonymous"] = out / "canvas-anonymous.csv"
        write_text(paths["canvas_anonymous"], canvas_anonymous_csv(rows, most))
    elif layout == "canvas":
        paths["canvas"] = out / "canvas.csv"
        write_text(paths["canvas"], canvas_csv(rows, most, assignment or chapter))
    elif layout == "moodle":
        paths["moodle"] = out / "moodle.csv"
        write_text(paths["moodle"], moodle_csv(rows, most, modified))
    if uses is not None:
        paths["download"] = out / "download.csv"
        write_text(paths["download"], download_csv(uses))
    for row in rows:
        if row.status in ("name_clash", "not_a_submission"):  # no folder of their own (or one shared by case)
            continue
        paths[f"results:{row.key}"] = out / row.key / "results.json"
        write_text(paths[f"results:{row.key}"], json.dumps(gradescope(row), ensure_ascii=False, indent=2) + "\n")
    return paths
