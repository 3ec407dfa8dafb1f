"""``grade dev ...``: tools for course authors (stubs, validation, a new chapter, a course release, a
Gradescope autograder)."""
from __future__ import annotations

import sys
from pathlib import Path

import click

from grader.chapter import ChapterError, load_chapter
from grader.cli.app import EXIT_FAIL_UNDER, UserError, cli, gather, lang_option, limit_options
from grader.i18n import LANGS, T, default_lang, grader_catalog
from grader.options import LimitOptions


@cli.group("dev", short_help="Tools for course authors: stubs, chapter validation, a release.")
def dev() -> None:
    """Tools for course authors: stubs, chapter validation, a course release, a Gradescope autograder.
    课程作者工具。"""


@dev.command("stubs", short_help="Regenerate a chapter's stubs from its solutions.")
@click.argument("chapter", required=False)
@click.option("--check", "check_only", is_flag=True,
              help="Only list the stubs that differ from their solutions (exit 1 if any); write nothing.")
@click.option("--force", is_flag=True,
              help="Also replace stub files that hold work of their own, keeping a backup copy beside each.")
@lang_option
def dev_stubs(chapter: str, check_only: bool, force: bool, lang: str | None) -> None:
    """Regenerate a chapter's stubs and its notebook (exercises/ch4.ipynb) from its
    solutions (BEGIN/END SOLUTION markers).

    A stub file (or the notebook) that differs from what would be written is replaced only when it is an
    old stub, the one generated from its solution as committed at git HEAD. Any other
    file is someone's work: nothing is written (exit 1) unless --force, and then a
    backup copy of it is kept beside it. 重新生成练习文件；不会覆盖学生的作答。
    """
    from grader.authoring import notebook
    from grader.authoring.stubs import StubFormatError, StubsInTheWay, generate

    lang = lang or default_lang()
    catalog = grader_catalog()
    words = lambda text: catalog.render(text, lang)  # noqa: E731
    spec = _chapter(chapter)
    missing = notebook.missing_solutions(spec)
    if missing:  # a chapter being written: its stubs still are generated, not its notebook
        click.echo(words(T("notebook.not_generated", path=str(notebook.notebook_path(spec)),
                           missing=str(missing[0]), n=len(missing))), err=True)
    try:
        diffs = generate(spec.solutions, spec.stubs, write=not check_only, force=force,
                         more=[] if missing else [notebook.planned(spec)])
    except StubFormatError as exc:
        raise UserError(str(exc)) from None
    except StubsInTheWay as exc:
        for diff in exc.diffs:
            click.echo(words(T("stubs.edited", path=str(diff.path))), err=True)
        sys.exit(EXIT_FAIL_UNDER)
    line_key = "stubs.out_of_date" if check_only else "stubs.wrote"
    for diff in diffs:
        reason = T("stubs.reason_missing") if diff.reason == "missing" else T("stubs.reason_differs")
        click.echo(words(T(line_key, path=str(diff.path), reason=reason)))
        if diff.backup is not None:
            click.echo(words(T("stubs.backup", path=diff.name, backup=str(diff.backup))))
    if check_only and diffs:
        click.echo(words(T("stubs.regenerate")), err=True)
        sys.exit(EXIT_FAIL_UNDER)
    if not diffs:
        click.echo(words(T("stubs.up_to_date", chapter=spec.id)))


@dev.command("validate", short_help="Validate a chapter end to end.")
@click.argument("chapter", required=False)
@click.option("--seed", type=click.IntRange(0, 2**31 - 1), default=None,
              help="Seed of the hidden inputs for both gradings (default: a fresh one, printed).")
@lang_option
def dev_validate(chapter: str, seed: int | None, lang: str | None) -> None:
    """Validate a chapter: metadata, stubs, reference full marks, stubs zero."""
    from grader.authoring.validate import validate

    spec = _chapter(chapter)
    problems = validate(spec, seed=seed, lang=lang or default_lang(), echo=click.echo)
    if problems:
        for problem in problems:
            click.echo(f"✗ {problem}", err=True)
        sys.exit(EXIT_FAIL_UNDER)
    click.echo(f"✓ {spec.id}: valid")


@dev.command("build", short_help="Build the programs every grading compiles, before the first grading.")
@click.argument("chapter", required=False)
@click.option("--sandbox", type=click.Choice(["auto", "bwrap", "process"]), default="auto", show_default=True,
              help="The sandbox the building grading runs in (that of the gradings to come).")
@lang_option
def dev_build(chapter: str, sandbox: str, lang: str | None) -> None:
    """Build the programs every grading of a chapter compiles (the reference's, and the grader's own on
    the hidden inputs' shapes) into this machine's cache, so that no first grading compiles them: the
    reference solutions are graded once (a Gradescope autograder's setup.sh does this too).
    预先构建每次评测都要编译的程序，使第一次评测不必再编译。"""
    from grader import ahead
    from grader.batch.warmup import build

    ch = _chapter(chapter)
    built = build(ch, sandbox=sandbox, ahead=ahead.count())
    click.echo(grader_catalog().render(T("gradescope.built", **built), lang or default_lang()))
    if built["score"] != built["max_score"]:
        sys.exit(EXIT_FAIL_UNDER)


@dev.command("service", short_help="Show (or stop) the warm service that keeps JAX imported between gradings.")
@click.option("--stop", is_flag=True, help="End every warm service of this user now.")
@lang_option
def dev_service(stop: bool, lang: str | None) -> None:
    """Show the user's warm services: each keeps two processes with JAX imported (about 350 MB) so that
    the next grade of a folder forks its hosts instead of importing JAX twice; each ends after
    GRADER_WARM_S seconds (600) without a grading. --stop ends them now. 显示（或停止）预热服务。"""
    from grader.runner import service

    lang, catalog = lang or default_lang(), grader_catalog()
    if stop:
        click.echo(catalog.render(T("service.stopped", count=service.stop_all()), lang))
        return
    found = service.running()
    if not found:
        click.echo(catalog.render(T("service.none"), lang))
    for each in found:
        settings = each["settings"]
        click.echo(catalog.render(T("service.running", pid=each["pid"], idle_s=settings.get("idle_s", "?"),
                                    folder=settings.get("submission", "?")), lang))


def _chapter(chapter_id: str | None):
    """The chapter named, or the one chapter the grader finds when none is (two or more: say which)."""
    from grader.chapter import available_chapters

    if chapter_id is None:
        found = available_chapters()
        if len(found) != 1:
            raise UserError(f"which chapter? this grader has {', '.join(found) or 'none'}: name one, as in "
                            f"grade dev validate {found[0] if found else 'ch4'}")
        chapter_id = found[0]
    try:
        return load_chapter(chapter_id)
    except ChapterError as exc:
        raise UserError(str(exc)) from None




@dev.command("new-chapter", short_help="Start a new chapter: its toml, one exercise, a solution, its stub.")
@click.argument("chapter")
@click.option("--root", type=click.Path(path_type=Path), default=None,
              help="Put it under DIR/chapters, DIR/solutions and DIR/exercises (default: this repository, "
                   "beside ch4). Grade it with GRADER_CHAPTERS=DIR/chapters.")
@click.option("--exercise", default="ex01_scale", show_default=True, help="The first exercise's id.")
@lang_option
def dev_new_chapter(chapter: str, root: Path | None, exercise: str, lang: str | None) -> None:
    """Write a chapter that grades at once: chapter.toml, one exercise folder (its code:
    inputs, probe, checks; its words: titles, hints, messages), its solution and the stub
    generated from it. Nothing is overwritten.
    新建一章：chapter.toml、一个练习文件夹（代码与中英文文字）、参考答案及其练习文件。"""
    from grader.authoring import scaffold

    lang = lang or default_lang()
    try:
        made = scaffold.plan(chapter, root=root, exercise=exercise)
    except scaffold.ScaffoldError as exc:
        raise UserError(str(exc)) from None
    catalog = grader_catalog()
    for path in scaffold.write(made):
        click.echo(catalog.render(T("scaffold.wrote", path=str(path)), lang))
    env = f"GRADER_CHAPTERS={made.chapters} " if root is not None else ""
    click.echo(catalog.render(T("scaffold.next", env=env, chapter=chapter, stubs=str(made.stubs),
                                guide="docs/authoring.md"), lang))


@dev.command("release", short_help="Build a course release for students: exercises and grader, no answers.")
@click.argument("chapter", required=False)
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="A new (or empty) folder for the release.")
@click.option("--seed", type=click.IntRange(1, 2**31 - 1), default=None,
              help="The public seed of the release's reference records (default: a fresh one, printed).")
@lang_option
def dev_release(chapter: str, out: Path, seed: int | None, lang: str | None) -> None:
    """Build a course release of a chapter into OUT: the grader, the stubs (and the chapter's
    notebook), a student README in Chinese and English, and reference records for a public
    seed, with no solution code in any form. Students grade a preview with it; final grading
    runs here, with the full repository. 构建学生发布：练习与评分器，不含答案。
    """
    from grader.authoring.release import ReleaseError, build, readme_command
    from grader.grading import new_seed
    from grader.preview import RecordsError

    lang = lang or default_lang()
    catalog = grader_catalog()
    words = lambda text: catalog.render(text, lang)  # noqa: E731
    spec = _chapter(chapter)
    seed = seed if seed is not None else new_seed()
    click.echo(words(T("release.building", chapter=spec.id, seed=seed)))
    try:
        release = build(spec, out, seed=seed)
    except (ReleaseError, RecordsError) as exc:
        raise UserError(str(exc)) from None
    env = release.environment
    click.echo(words(T("release.wrote", out=str(release.out), seed=release.seed, jax=env.get("jax") or "?",
                       backend=env.get("backend") or "?")))
    command = readme_command((release.out / "README.md").read_text(encoding="utf-8"))
    click.echo(words(T("release.next", command=command)))


@dev.command("gradescope", short_help="Build a Gradescope autograder (a zip): grader, chapter, reference solutions.")
@click.argument("chapter", required=False)
@click.option("--out", type=click.Path(path_type=Path), required=True,
              help="The zip to write (e.g. autograder.zip), to upload in Gradescope's Configure Autograder.")
@click.option("--force", is_flag=True, help="Replace --out when it exists.")
@click.option("--lang", type=click.Choice([*LANGS, "both"]), default="en", show_default=True,
              help="Language of the results students read on Gradescope (both: English, then Chinese).")
@limit_options
@gather(limits=LimitOptions)
def dev_gradescope(chapter: str, out: Path, force: bool, lang: str, limits: LimitOptions) -> None:
    """Build the Gradescope autograder of a chapter into the zip OUT: setup.sh and run_autograder,
    the grader with JAX pinned to this machine's version, and the reference solutions, which stay
    on the autograder's side (readable by root only; students' code runs as a uid of its own).
    Every submission is graded as a final grading: a fresh seed, the real reference.
    The limits (--timeout ...) apply to every submission. 构建 Gradescope 自动评分包。
    """
    from grader.authoring.gradescope import BundleError, build
    from grader.gradescope import Config

    words_lang = lang if lang in LANGS else default_lang()
    catalog = grader_catalog()
    words = lambda text: catalog.render(text, words_lang)  # noqa: E731
    spec = _chapter(chapter)
    config = Config(chapter=spec.id, lang=lang, instructor_lang=words_lang, **limits.to_dict())
    announce = lambda versions: click.echo(words(T("gradescope.building", chapter=spec.id,  # noqa: E731
                                                   jax=versions["jax"], jaxlib=versions["jaxlib"])))
    try:
        bundle = build(spec, out, config, force=force, announce=announce)
    except BundleError as exc:
        raise UserError(words(exc.text)) from None
    shown = {"en": "English", "zh": "中文", "both": "English, 中文"}[lang]
    click.echo(words(T("gradescope.wrote", out=str(bundle.out), size=f"{bundle.size / 1000:.0f}", lang=shown)))
    click.echo(words(T("gradescope.next", points=f"{bundle.points:g}", timeout=f"{limits.timeout_s:g}")))
