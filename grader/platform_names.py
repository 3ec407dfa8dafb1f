"""How the learning platforms write names into a class's download, in one place, each rule as the
platform's own source states it (read in moodle/moodle and instructure/canvas-lms; the tests carry the
source's own examples, tests/test_unit_platform_names.py).

**Moodle** (``mod_assign\\downloader::get_student_prefix``, mod/assign/classes/downloader.php):

* a participant's folder is ``clean_filename(str_replace('_', ' ', fullname) . '_' . uniqueid)``, then
  ``_assignsubmission_file`` (:func:`moodle_user_prefix`);
* a team's is ``clean_filename(str_replace('_', ' ', format_string(group name)) . '_' . group id)``, the
  default group's ``get_string('defaultteam')`` alone, without an id (:func:`moodle_group_prefix`);
* ``clean_filename`` is ``clean_param($param, PARAM_FILE)`` (lib/moodlelib.php): it deletes ASCII
  control characters and ``&<>"`|':\\/`` (``preg_replace('~[[:cntrl:]]|[&<>"`\\|\\':\\\\\\\\/]~u', '', $param)``),
  nothing else (:func:`moodle_clean_filename`): "Bob O'Brien" is ``Bob OBrien``, ``*`` and ``?`` stay;
* ``format_string`` (lib/classes/formatting.php, ``format_string``) first writes every ``&`` that
  begins no entity as ``&amp;`` (``replace_ampersands_not_followed_by_entity``), then, as a site's
  default ``formatstringstriptags`` says, strips tags and writes ``<`` and ``>`` as ``&lt;`` and
  ``&gt;`` (:func:`moodle_format_string`): the group "R&D" is the folder ``Ramp;D_79``.

**Canvas** (``ContentZipper``, lib/content_zipper.rb):

* a file is ``get_filename`` + ``_<attachment id>_`` + ``sanitize_attachment_filename(display name)``;
  ``get_filename`` joins the user's name, ``LATE`` for a late one, and the user id (``anon_<id>`` with
  anonymous grading) with ``_`` and keeps Ruby's ``[[:word:]]`` alone (``sanitize_file_name``): a
  letter, a mark, a decimal digit or a connector (Onigmo's word class; Python's ``\\w`` has no marks:
  the Devanagari vowel signs of "सुनीलकुमार" are marks) (:func:`canvas_word`);
* the user's name is their ``sortable_name``, ``_<digits>_`` made ``<digits>`` and lower-cased
  (``sanitize_user_name``) (:func:`canvas_user_name`);
* a display name's ``\\0/\\:*?"<>|`` become ``_`` (``sanitize_attachment_filename``).

**A file uploaded again** (:func:`version`): every platform that keeps a student's files renames the
second file of the same name, each in its own way, and a download holds what it renamed:

* Canvas (``Attachment.make_unique_filename``, app/models/attachment.rb): ``basename-N`` + the
  extension, where the extension is every ``.word`` at the end
  (``(\\.[A-Za-z][A-Za-z0-9]*)*(\\.[A-Za-z0-9]*)$``), N from 1 to 7, then ``basename-<uuid>`` +
  the extension (``SecureRandom.uuid``);
* Moodle (``file_storage::get_unused_filename``, lib/filestorage/file_storage.php): ``basename (N)``
  + ``.`` + the extension after the last dot (PHP's ``pathinfo``), N counting from 1; a name that
  already ends in `` (N)`` goes on from its N;
* a browser saving a file twice (the files a student collected on their own disk: the ``folders``
  layout, a Gradescope upload, ``grade PATH``): ``basename (N).ext``, as Moodle's.

One platform's rule, and only that one: on Moodle, a student's own ``ex02_where-1.py`` is a file of
that name, not a second upload of ``ex02_where.py``.
"""
from __future__ import annotations

import re
import unicodedata
from pathlib import PurePosixPath

# ------------------------------------------------------------------ Moodle
#: what ``clean_param(PARAM_FILE)`` deletes: ``[[:cntrl:]]`` (PCRE without UCP: ASCII's) and ``&<>"`|':\/``
_MOODLE_PARAM_FILE = re.compile(r"[\x00-\x1f\x7f&<>\"`|':\\/]")
#: ``replace_ampersands_not_followed_by_entity`` (lib/weblib.php)
_MOODLE_LONE_AMPERSAND = re.compile(r"&(?![a-zA-Z0-9#]{1,8};)")
#: what PHP's ``strip_tags`` removes of a group's name (a tag, whole)
_TAG = re.compile(r"<[^<>]*>")


def moodle_clean_filename(text: str) -> str:
    """``clean_filename($text)``: ``clean_param($text, PARAM_FILE)``; ``.`` and ``..`` become ``""``."""
    cleaned = _MOODLE_PARAM_FILE.sub("", text)
    return "" if cleaned in (".", "..") else cleaned


def moodle_format_string(text: str) -> str:
    """``format_string($text)`` as a site with its defaults writes a group's name (no filter that changes
    it, ``formatstringstriptags`` on): lone ampersands escaped, tags stripped, ``<`` and ``>`` escaped."""
    text = _MOODLE_LONE_AMPERSAND.sub("&amp;", text)
    return _TAG.sub("", text).replace("<", "&lt;").replace(">", "&gt;")


def moodle_user_prefix(fullname: str, uniqueid: str) -> str:
    """A participant's folder in Moodle's download, before ``_assignsubmission_<plugin>``."""
    return moodle_clean_filename(fullname.replace("_", " ") + "_" + str(uniqueid))


def moodle_group_prefix(name: str, groupid: str = "") -> str:
    """A team's folder in Moodle's download (``groupid`` ``""``: the default group, written without one)."""
    return moodle_clean_filename(moodle_format_string(name).replace("_", " ") + (f"_{groupid}" if groupid else ""))


def moodle_folder_name(fullname: str) -> str:
    """The name part of a participant's folder, as Moodle writes it for ``fullname``."""
    return moodle_clean_filename(fullname.replace("_", " "))


def moodle_group_folder_name(name: str) -> str:
    """The name part of a team's folder, as Moodle writes it for the group ``name``."""
    return moodle_clean_filename(moodle_format_string(name).replace("_", " "))


# ------------------------------------------------------------------ Canvas
#: Onigmo's ``[[:word:]]`` in a UTF-8 string: Letter, Mark, Decimal_Number, Connector_Punctuation
_WORD_CATEGORIES = ("L", "M", "Nd", "Pc")


def canvas_word(ch: str) -> bool:
    """Whether ``ch`` is a character Ruby's ``[[:word:]]`` matches."""
    category = unicodedata.category(ch)
    return category[0] in "LM" or category in ("Nd", "Pc")


def canvas_sanitize_file_name(text: str) -> str:
    """``ContentZipper#sanitize_file_name``: ``gsub(/[^[[:word:]]]/, "")``."""
    return "".join(ch for ch in text if canvas_word(ch))


def is_canvas_name(text: str) -> bool:
    """Whether ``text`` can be what ``sanitize_file_name`` leaves of a name: word characters alone."""
    return bool(text) and all(canvas_word(ch) for ch in text)


def canvas_user_name(sortable_name: str) -> str:
    """A user's part of Canvas's file names: ``sanitize_user_name`` (``_<digits>_`` made ``<digits>``,
    lower-cased: Ruby's ``downcase`` is Unicode's) then ``sanitize_file_name``."""
    name = re.sub(r"_(\d+)_", r"\1", sortable_name).lower()
    return canvas_sanitize_file_name(name)


def canvas_attachment_name(display_name: str) -> str:
    """``ContentZipper#sanitize_attachment_filename``: ``gsub(%r{[\\x00/\\\\:*?"<>|]+}, "_")``."""
    return re.sub(r'[\x00/\\:*?"<>|]+', "_", display_name)


# ------------------------------------------------------------------ a file uploaded again
#: Canvas: Attachment.make_unique_filename's extension, the ``-N`` before it (1 to 7), and the
#: ``-<uuid>`` after the seventh
CANVAS_EXTENSION = re.compile(r"(\.[A-Za-z][A-Za-z0-9]*)*(\.[A-Za-z0-9]*)$")
CANVAS_NUMBER = re.compile(r"^(?P<stem>.+)-(?P<n>[0-9]+)$")
CANVAS_UUID = re.compile(r"^(?P<stem>.+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")
#: the number a ``-<uuid>`` name stands for: after ``-1`` to ``-7`` (``attempts >= 8`` or ``addition >= 8``)
CANVAS_UUID_NUMBER = 8
#: Moodle and browsers: `` (N)`` before the last extension (file_storage::get_unused_filename's pattern)
PAREN_NUMBER = re.compile(r"^(?P<stem>.+) \((?P<n>[0-9]+)\)$")
#: which rule each layout's files follow
RULES = {"canvas": "canvas", "moodle": "paren", "folders": "paren", "gradescope": "paren", "single": "paren"}


def version(name: str, layout: str) -> tuple[str, int]:
    """``name`` (a path) without the number ``layout``'s platform adds to a file uploaded again,
    and that number (0: the name as first uploaded; Canvas's ``-<uuid>``: :data:`CANVAS_UUID_NUMBER`)."""
    path = PurePosixPath(name)
    rule = RULES.get(layout, "paren")
    if rule == "canvas":
        found = CANVAS_EXTENSION.search(path.name)
        extension = found.group(0) if found else ""
        stem = path.name[: len(path.name) - len(extension)] if extension else path.name
        random = CANVAS_UUID.match(stem)  # first: a uuid of digits alone ends in "-<digits>" too
        if random is not None:
            return str(path.with_name(random["stem"] + extension)), CANVAS_UUID_NUMBER
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
