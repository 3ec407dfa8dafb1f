"""Which of JAX's platforms a job's backend tries, settled once in a host before it forks.

A process's first backend scans the installed distributions for PJRT plugins, then tries
every platform JAX registered (the CPU's, and TPU's, whose library it looks for) and,
where it found only a CPU, looks at the machine's PCI devices for a GPU or a TPU it has no
plugin for, to suggest one. Each job is a fresh process, so each did all of it. Where the
answer cannot differ (no plugin, no TPU library, no accelerator to be seen), the host
finds it once, before its first fork, and the jobs start the CPU's backend alone. Where
anything else may run JAX (a GPU's plugin, libtpu), nothing is settled here: each job
starts its backends as JAX does by default.
"""
from __future__ import annotations


def find_no_plugins() -> bool:
    """In a host, before it forks: where no PJRT plugin is installed (no ``jax_plugins`` module, no entry
    point of that group: a CPU-only JAX), look for them once here, so that no job does.

    Every process's first backend starts by scanning the entry points of every installed
    distribution for plugins (about 10 ms of a job's CPU here); with none found that scan
    loads nothing and starts nothing, so forking after it is as safe as before. Where a
    plugin is installed (a GPU's) nothing is done here: loading it is left to each job.
    ``True`` when the scan was done here."""
    try:
        from importlib import metadata

        from jax._src import xla_bridge

        if getattr(xla_bridge, "jax_plugins", None) is not None or metadata.entry_points(group="jax_plugins"):
            return False
        xla_bridge._discover_and_register_pjrt_plugins()
        return True
    except (ImportError, AttributeError, TypeError):
        return False


def cpu_alone() -> bool:
    """After :func:`find_no_plugins` found none: where JAX registered no platform but the CPU's and
    TPU's, TPU's library is not installed, and the machine shows neither a TPU nor an NVIDIA GPU,
    set ``jax_platforms`` to ``"cpu"`` (unless it was set), so that each job's backend is the
    CPU's alone, as it would have been, without trying TPU's library and reading the machine's
    devices first (about 4 ms of every job's start here).

    JAX's own reading (``jax/_src/xla_bridge.py``): ``backends()`` tries each registered
    factory (``tpu_client_timer_callback`` fails quietly without ``libtpu.so``), then, with
    ``jax_platforms`` unset, ``_suggest_missing_backends`` reads ``hardware_utils``'s
    ``has_visible_nvidia_gpu`` and ``num_available_tpu_chips_and_device_id``. ``True`` when set."""
    try:
        import jax
        from jax._src import cloud_tpu_init, hardware_utils, xla_bridge

        if jax.config.jax_platforms or set(xla_bridge._backend_factories) - {"cpu", "tpu"}:
            return False
        if cloud_tpu_init.get_tpu_library_path() is not None or hardware_utils.has_visible_nvidia_gpu() \
                or hardware_utils.num_available_tpu_chips_and_device_id()[0] > 0:
            return False
        jax.config.update("jax_platforms", "cpu")
        return True
    except (ImportError, AttributeError, TypeError, ValueError, OSError):
        return False
