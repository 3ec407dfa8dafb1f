"""What chapter 4's exercises share that is the chapter's own: the dtype of its hidden inputs.

The helpers every chapter uses are the core's: :mod:`grader.primitives.placing` (``put``),
:mod:`grader.primitives.guards` (``attempted``, ``returned``, ``require_jitted``, ...) and
:mod:`grader.primitives.wording` (``label``, ``shown``, ``failed_kinds``).
"""
from __future__ import annotations

import numpy as np

F32 = np.float32
