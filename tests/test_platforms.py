"""A host settles which platforms its jobs' backends try, once, before it forks
(:mod:`grader.child.platforms`): on a machine where nothing but a CPU can run JAX, each job starts
the CPU's backend alone, as it would have ended up with anyway; anywhere else nothing is settled.

What JAX does without it (jax-ml/jax ``jax/_src/xla_bridge.py``): ``backends()`` tries every
registered factory, TPU's among them (``tpu_client_timer_callback``, registered with
``fail_quietly=True``: its failure is kept in ``_backend_errors``), and with ``jax_platforms``
unset then calls ``_suggest_missing_backends``, which reads the machine's PCI devices
(``hardware_utils.has_visible_nvidia_gpu``, ``num_available_tpu_chips_and_device_id``).
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

from conftest import ROOT

# A host's preparation (what grader.child.host runs before its first fork), then a fork that starts
# its backend as a job does: which platforms were settled, which were tried, what it runs on.
_SCRIPT = """
    import json, os, sys
    import jax
    from jax._src import xla_bridge
    from grader.child import jax_setup
    if sys.argv[1] == "plugin":  # another platform registered, as a GPU's plugin registers its own
        xla_bridge.register_backend_factory("elsewhere", lambda: None, priority=10, fail_quietly=True)
    jax_setup.prepare_host()
    read, write = os.pipe()
    if os.fork() == 0:
        os.close(read)
        try:
            jax.devices()
            seen = {"platforms": jax.config.jax_platforms, "tried_and_failed": sorted(xla_bridge._backend_errors),
                    "backends": sorted(xla_bridge._backends), "default": jax.default_backend(),
                    "value": float(jax.numpy.arange(4.0).sum())}
        except RuntimeError as exc:
            seen = {"platforms": jax.config.jax_platforms, "error": str(exc)[:300]}
        os.write(write, json.dumps(seen).encode())
        os._exit(0)
    os.close(write)
    os.wait()
    print(os.read(read, 65536).decode())
"""


def _job_backend(mode: str, **env: str) -> dict:
    clean = {k: v for k, v in os.environ.items() if k != "JAX_PLATFORMS"}
    done = subprocess.run([sys.executable, "-c", textwrap.dedent(_SCRIPT), mode], capture_output=True, text=True,
                          cwd=ROOT, timeout=120, env={**clean, **env})
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_on_a_cpu_only_machine_a_job_starts_the_cpus_backend_alone():
    seen = _job_backend("plain")
    assert seen["platforms"] == "cpu"
    assert seen["tried_and_failed"] == []  # TPU's factory was not tried (JAX alone: ["tpu"])
    assert seen["backends"] == ["cpu"] and seen["default"] == "cpu"
    assert seen["value"] == 6.0


def test_another_registered_platform_leaves_the_choice_to_jax():
    seen = _job_backend("plugin")
    assert seen["platforms"] is None
    assert "tpu" in seen["tried_and_failed"]  # JAX's own order: every factory tried, as without the grader
    assert seen["default"] == "cpu"


def test_platforms_chosen_by_the_user_are_left_as_they_are():
    seen = _job_backend("plain", JAX_PLATFORMS="cpu,tpu")
    assert seen["platforms"] == "cpu,tpu"
    assert "tpu" in seen["error"]  # asked for by name, TPU's failure is raised, as JAX does
