"""What a submission may hold: the largest file, the most bytes in all, the most files. A folder, a
notebook and a zip are held to the same (:mod:`grader.submission`, :mod:`grader.unzipping`), and so is
a class's download (:mod:`grader.batch.roster`)."""
from __future__ import annotations

MAX_FILE_BYTES = 2 << 20
MAX_TOTAL_BYTES = 32 << 20
MAX_FILES = 500
