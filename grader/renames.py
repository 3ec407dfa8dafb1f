"""How each platform names a file uploaded again, read back: ``ex02_where (1).py`` is ``ex02_where.py``.

Every platform that keeps a student's files renames the second file of the same name,
each in its own way, and a download holds what it renamed:

* **Canvas** (``Attachment.make_unique_filename`` in canvas-lms ``app/models/attachment.rb``):
  ``basename-N`` + the extension, where the extension is every ``.word`` at the end
  (``(\\.[A-Za-z][A-Za-z0-9]*)*(\\.[A-Za-z0-9]*)$``), N counting from 1;
* **Moodle** (``file_storage::get_unused_filename`` in ``lib/filestorage/file_storage.php``):
  ``basename (N)`` + ``.`` + the extension after the last dot (PHP's ``pathinfo``), N counting
  from 1; a name that already ends in `` (N)`` goes on from its N;
* **a browser saving a file twice** (the rule of the files a student collected on their own
  disk: the ``folders`` layout, a Gradescope upload, ``grade PATH``): ``basename (N).ext``,
  as Moodle's.

:func:`version` applies one platform's rule, and only that one: on Moodle, a student's own
``ex02_where-1.py`` is a file of that name, not a second upload of ``ex02_where.py``.
"""
from __future__ import annotations

import re
from pathlib import PurePosixPath

#: Canvas: Attachment.make_unique_filename's extension, and the ``-N`` before it
CANVAS_EXTENSION = re.compile(r"(\.[A-Za-z][A-Za-z0-9]*)*(\.[A-Za-z0-9]*)$")
CANVAS_NUMBER = re.compile(r"^(?P<stem>.+)-(?P<n>[0-9]+)$")
#: Moodle and browsers: `` (N)`` before the last extension (file_storage::get_unused_filename's pattern)
PAREN_NUMBER = re.compile(r"^(?P<stem>.+) \((?P<n>[0-9]+)\)$")
#: which rule each layout's files follow
RULES = {"canvas": "canvas", "moodle": "paren", "folders": "paren", "gradescope": "paren", "single": "paren"}


def version(name: str, layout: str) -> tuple[str, int]:
    """``name`` (a path) without the number ``layout``'s platform adds to a file uploaded again,
    and that number (0: the name as first uploaded)."""
    path = PurePosixPath(name)
    rule = RULES.get(layout, "paren")
    if rule == "canvas":
        found = CANVAS_EXTENSION.search(path.name)
        extension = found.group(0) if found else ""
        stem = path.name[: len(path.name) - len(extension)] if extension else path.name
        number = CANVAS_NUMBER.match(stem)
    else:  # PHP's pathinfo: the extension is what follows the last dot
        stem, dot, extension = path.name.rpartition(".")
        if not dot or not stem:
            stem, extension = path.name, ""
        else:
            extension = "." + extension
        number = PAREN_NUMBER.match(stem)
    if number is None:
        return name, 0
    return str(path.with_name(number["stem"] + extension)), int(number["n"])
