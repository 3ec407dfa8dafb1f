"""The only environment a host and its jobs get (:func:`scrubbed_environment`): its own, and what the
device needs of the user's, by name and by prefix; never the rest of the user's."""
from __future__ import annotations

import os
from pathlib import Path

#: what of the user's environment a host keeps, by name: the device's settings (JAX's platforms, which
#: GPUs, how much of their memory) and the system's library path
KEPT_VARIABLES = ("JAX_PLATFORMS", "JAX_FORCE_TPU_INIT", "CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES",
                  "ROCR_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "XLA_PYTHON_CLIENT_PREALLOCATE",
                  "XLA_PYTHON_CLIENT_MEM_FRACTION", "XLA_PYTHON_CLIENT_ALLOCATOR", "LD_LIBRARY_PATH",
                  "ALLOW_MULTIPLE_LIBTPU_LOAD")
#: ... and by prefix: a TPU VM's topology and libtpu's own settings (``TPU_SKIP_MDS_QUERY``,
#: ``TPU_ACCELERATOR_TYPE``, ``TPU_CHIPS_PER_HOST_BOUNDS``, ``TPU_LIBRARY_PATH``, ``LIBTPU_INIT_ARGS``, ...).
#: Without them libtpu asks the cloud's metadata server for the topology, and where there is none
#: (a TPU VM's sandbox, a container) each job waited 90 s for it before failing.
KEPT_PREFIXES = ("TPU_", "LIBTPU_")


def scrubbed_environment(home: Path, pylib: Path) -> dict[str, str]:
    """The only environment a host (and its jobs) gets: its own, and what the device needs of the user's
    (:data:`KEPT_VARIABLES`, :data:`KEPT_PREFIXES`). ``PYTHONPATH`` is the host's own folder (``pylib``):
    the grader's package and JAX's, linked there (:func:`grader.runner.sandbox.jax_stack`), never the
    rest of the user's."""
    env = {
        "PATH": "/usr/local/bin:/usr/bin:/bin",
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "HOME": str(home),
        "TMPDIR": str(home),
        "PYTHONPATH": str(pylib),
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONHASHSEED": "0",
        "PYTHONNOUSERSITE": "1",
        "OPENBLAS_NUM_THREADS": "1",
        "TF_CPP_MIN_LOG_LEVEL": "1",
    }
    for key, value in os.environ.items():
        if key in KEPT_VARIABLES or key.startswith(KEPT_PREFIXES):
            env[key] = value
    return env

