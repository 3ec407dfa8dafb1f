"""Hidden inputs placed on the device before a probe hands them to a student's function."""
from __future__ import annotations

import numpy as np

__all__ = ["put"]


def put(tree):
    """NumPy arrays placed on the device, and there before the student's code gets them (placing
    compiles nothing, so counts stay clean). Waiting matters: a host callback of the student's
    (``jax.pure_callback``) that reads an input still being copied waits for the copy, which on one
    CPU (a batch's core slot) can wait for the very thread the callback holds: the job hung."""
    import jax

    placed = jax.tree_util.tree_map(lambda a: jax.device_put(a) if isinstance(a, np.ndarray) else a, tree)
    return jax.block_until_ready(placed)
