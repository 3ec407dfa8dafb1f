"""The hosts a batch worker keeps from one student to the next: :class:`WarmHosts`.

A worker grades many students in a row. Starting two hosts for each (JAX imported
twice) cost about as much as grading a stub; instead it keeps:

* the reference's host (trusted: the same for every student), started once;
* a :class:`~grader.runner.host_template.HostTemplate` in the student's sandbox, which forks
  each student's host with JAX already imported and a fresh ``/tmp`` and IPC namespace
  of its own (where the template cannot make them, each student gets a host started
  afresh, as ``grade`` does).

Each grading gets a scratch folder of its own under the template's ``stage`` (mounted
read-only in the sandbox, not listable by the jobs' uids): its modules lie there while
it is graded and are removed after it (:meth:`WarmHosts.release`), together with
whatever its jobs left in the folders the hosts share. Student jobs load programs the
reference compiled by key (:mod:`grader.store`) and write none of their own: a program
they find in no cache is compiled by the class's compiler
(:mod:`grader.runner.class_compiler`, in a sandbox of its own, started beside the hosts)
into the class's cache, where a classmate who wrote the same program finds it.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import threading
from pathlib import Path

from grader import store
from grader.runner import sandbox as sandboxes
from grader.runner.class_compiler import ClassCompiler
from grader.runner.host_handles import HostProcess
from grader.runner.host_template import HostTemplate
from grader.runner.job_sessions import Limits
from grader.runner.kept import KeptJobs
from grader.runner.reference_host import reference_host


class WarmHosts:
    """A worker's hosts for the gradings of one chapter with one sandbox (see the module)."""

    def __init__(self, chapter, *, sandbox: str = "auto", reference_dir: Path | None = None,
                 scratch_root: Path | None = None, compile_cache: bool = True):
        self.chapter = chapter
        self.sandbox = sandbox
        self.plan = sandboxes.plan(sandbox)
        self.reference_dir = Path(reference_dir or chapter.solutions)
        self.scratch = Path(tempfile.mkdtemp(prefix="grade-warm-", dir=scratch_root))
        os.chmod(self.scratch, 0o711)  # its jobs reach their folders; nobody lists it
        self.stage = self.scratch / "stage"
        self.stage.mkdir()
        os.chmod(self.stage, 0o711)  # the jobs' uids reach their own student's folder, never list the others
        self.reference_cache = store.reference_dir() if compile_cache else None
        self.readable = [self.reference_cache] if self.reference_cache is not None else []
        self.compiler: ClassCompiler | None = None
        class_cache = store.class_dir() if compile_cache and self.plan.kind == "bwrap" and self.plan.uid_isolation \
            else None
        if class_cache is not None:  # a sandbox of its own, where no student's code can reach it
            self.compiler = ClassCompiler(folder=class_cache, read=list(self.readable),
                                          scratch=self.scratch / "compiler", plan=self.plan)
            self.readable.append(class_cache)
        self.template: HostTemplate | None = None
        if self.plan.kind == "bwrap" and self.plan.uid_isolation:
            self.template = HostTemplate(stage=self.stage, scratch=self.scratch / "student", plan=self.plan,
                                         limits=Limits(), modules=chapter.child_modules,
                                         chapter_folders=chapter.import_folders, read_caches=self.readable)
        self._reference: HostProcess | None = None
        self._lock = threading.Lock()
        self._started = False

    def start(self) -> None:
        """Start the reference's host and the template (both import JAX at once); a template that
        cannot isolate the hosts it forks is dropped (each student's host is then started afresh)."""
        if self._started:
            return
        self._started = True
        reference = self.reference()
        if self.template is not None:
            self.template.start()
        if self.compiler is not None:
            self.compiler.start()
        reference.wait_ready()
        if self.template is not None and not self.template.works():
            self.template.close()
            self.template = None

    def fits(self, chapter, sandbox: str, reference_dir: Path | None) -> bool:
        """Whether these hosts serve a grading of ``chapter`` in ``sandbox`` against ``reference_dir``."""
        return chapter.id == self.chapter.id and sandbox == self.sandbox and \
            Path(reference_dir or chapter.solutions) == self.reference_dir

    def reference(self) -> HostProcess:
        """The reference's host, started once (again after a grading was interrupted and closed it)."""
        with self._lock:
            if self._reference is None or self._reference.closed:
                self._reference = reference_host(self.chapter, self.reference_dir, self.scratch,
                                                 compile_cache=self.reference_cache)
                self._reference.kept = KeptJobs()  # its timed exercises' jobs serve student after student
                self._reference.start()
            return self._reference

    def grading_scratch(self) -> Path:
        """A scratch folder for one grading, where its student's modules will lie (under the stage)."""
        folder = Path(tempfile.mkdtemp(prefix="g-", dir=self.stage))
        os.chmod(folder, 0o755)
        return folder

    def student_host(self, module_dir: Path, uids: sandboxes.UidPool | None, limits: Limits) -> HostProcess:
        """A host for one student whose modules are in ``module_dir`` (under :meth:`grading_scratch`)."""
        # no template here: a host started afresh, as grade starts one
        scratch = module_dir.parent.parent / "student" if self.template is None else self.template.process.scratch
        host = HostProcess(side="student", module_dir=module_dir, scratch=scratch, plan=self.plan, uids=uids,
                           limits=limits, modules=self.chapter.child_modules,
                           chapter_folders=self.chapter.import_folders, read_caches=self.readable,
                           template=self.template)
        host.compiler = self.compiler
        return host

    def release(self, scratch: Path) -> None:
        """After a grading: its scratch folder removed, and what its jobs left in the folders every
        student's host shares (the host's home, the jobs' output) emptied."""
        shutil.rmtree(scratch, ignore_errors=True)
        if self.template is not None:
            shared = self.template.process.scratch
            for folder in (shared / "home", shared / "output", shared / "jobs"):
                empty_folder(folder)

    def close(self) -> None:
        """Stop every host (the kept reference jobs first); remove the scratch folder."""
        if self._reference is not None and self._reference.kept is not None:
            self._reference.kept.close()
        for host in (self._reference, self.template):
            if host is not None:
                host.close()
        if self.compiler is not None:
            self.compiler.close()
            store.prune(self.compiler.folder)
        sandboxes.release_folder(self.scratch)  # the jobs' capped folder (root)
        shutil.rmtree(self.scratch, ignore_errors=True)


def empty_folder(folder: Path) -> None:
    """Remove what ``folder`` holds (what a grading's jobs left), keeping the folder."""
    try:
        entries = list(folder.iterdir())
    except OSError:
        return
    for entry in entries:
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry, ignore_errors=True)
        else:
            try:
                entry.unlink()
            except OSError:
                pass
