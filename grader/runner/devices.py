"""Which device a grading measures on, planned before any process starts: :func:`plan`.

JAX chooses its backend in each process, the first time it is needed. A GPU (or the CPU)
serves many processes at once, and a grading's jobs all run on it, as JAX chooses. A TPU
serves one process at a time: a second process that opens the chip while another holds
it fails at once (libtpu's "Internal error when accessing libtpu multi-process lockfile"
or "The TPU is already in use by process with pid N", no waiting, no CPU fallback), and
opening it costs seconds (5-6 s on a TPU v5e, and about 2 s more to let it go). So the
grader finds the accelerator before anything starts, without starting JAX, by the rules
JAX itself uses (:func:`accelerator`), and plans:

* on a device that admits one process at a time (``exclusive``: a TPU), the exercises whose
  checks measure the device (``device = true`` in their ``exercise.toml``: the timing
  harness, the speed-ups) run there, one job at a time (:class:`DeviceLease`), and every
  other job runs on the CPU beside them (``jax_platforms = "cpu"``, which never loads
  libtpu);
* on any other device, every job runs where JAX puts it, as before;
* where the accelerator is already held (a notebook's kernel that ran JAX, a training run:
  :func:`tpu_holder` names the process), or ``--device cpu`` / ``JAX_PLATFORMS=cpu`` says so,
  everything runs on the CPU, and the report says why in one line.

A plan made without a grading (:func:`default_plan`: a batch, a release's records, the
class's compiler) runs everything on the CPU where the accelerator is exclusive: those
run many processes at once.
"""
from __future__ import annotations

import glob
import importlib.util
import os
import threading
import time
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Mapping

from grader.i18n import T, Text

#: Google's PCI vendor id and the device ids of TPU chips, as JAX reads them
#: (``jax/_src/hardware_utils.py``: ``_GOOGLE_PCI_VENDOR_ID``, ``_TPU_PCI_DEVICE_IDS``,
#: ``num_available_tpu_chips_and_device_id``)
GOOGLE_PCI_VENDOR = "0x1ae0"
TPU_PCI_DEVICE_IDS = {"0x0027": "v3", "0x0056": "plc", "0x005e": "v4", "0x0062": "v5p", "0x0063": "v5e",
                      "0x006f": "v6e", "0x0076": "tpu7x"}
#: the device files JAX takes as a visible NVIDIA GPU (``hardware_utils._NVIDIA_GPU_DEVICES``)
NVIDIA_DEVICES = ("/dev/nvidia0", "/dev/nvidiactl", "/dev/dxg")
#: the file libtpu locks while a process holds the chip (the error names it: "Run $ sudo rm
#: /tmp/libtpu_lockfile"); it stays after the holder ends. ``GRADER_TPU_LOCKFILE`` names another, for
#: the grader's tests
TPU_LOCKFILE = os.environ.get("GRADER_TPU_LOCKFILE", "/tmp/libtpu_lockfile")
#: ``GRADER_SIMULATED_ACCELERATOR=tpu``: plan as if this machine had a TPU (one process at a time) whose
#: jobs run on JAX's default device, the CPU here: the grader's tests run the whole plan (turns on the
#: device, the sides in turn, the fallback) on a machine without one. ``tpu:unavailable``: the device's
#: jobs ask JAX for a TPU, which fails as they start (a TPU taken as the grading runs)
SIMULATED = "GRADER_SIMULATED_ACCELERATOR"
#: the PJRT plugins JAX loads for a GPU (their modules, ``jax_plugins`` entry points)
GPU_PLUGINS = ("jax_cuda13_plugin", "jax_cuda12_plugin", "jax_rocm7_plugin", "jax_rocm6_plugin", "jax_rocm60_plugin")
#: what ``--device`` may ask for: ``auto`` (the accelerator when there is one and it is free,
#: else the CPU), ``cpu``, or ``device`` (the accelerator, or a clear error)
CHOICES = ("auto", "cpu", "device")


@dataclass(frozen=True)
class Accelerator:
    """An accelerator JAX would use on this machine."""

    #: ``tpu`` or ``gpu``
    platform: str
    #: one process at a time may hold it (a TPU)
    exclusive: bool
    #: chips or devices seen (0 where not counted)
    chips: int = 0
    #: the generation, where the PCI id tells it (``v5e``)
    version: str | None = None
    #: the device files a sandbox must show the jobs that use it
    nodes: tuple[str, ...] = ()
    #: the ``jax_platforms`` of its jobs (``None``: JAX's own choice, which is this accelerator)
    jax_platform: str | None = None

    @property
    def name(self) -> str:
        """How the report names it before a job has seen it (``TPU v5e``, ``GPU``)."""
        return f"TPU {self.version}" if self.platform == "tpu" and self.version else self.platform.upper()


def _read(path: str) -> str:
    try:
        with open(path, encoding="ascii", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return ""


def tpu_chips(sys_root: str = "/sys") -> tuple[int, str | None]:
    """TPU chips on the PCI bus and their generation, as ``hardware_utils.num_available_tpu_chips_and_device_id``
    counts them (JAX sets its platforms to ``tpu,cpu`` at import when it finds one and libtpu)."""
    chips, version = 0, None
    for vendor in sorted(glob.glob(os.path.join(sys_root, "bus/pci/devices/*/vendor"))):
        if _read(vendor) != GOOGLE_PCI_VENDOR:
            continue
        found = TPU_PCI_DEVICE_IDS.get(_read(os.path.join(os.path.dirname(vendor), "device")))
        if found:
            chips, version = chips + 1, found
    return chips, version


def tpu_library(env: Mapping[str, str]) -> str | None:
    """Where libtpu is, as ``cloud_tpu_init.get_tpu_library_path`` finds it: ``TPU_LIBRARY_PATH`` when it
    names a file, else the ``libtpu`` package (found, not imported)."""
    named = env.get("TPU_LIBRARY_PATH")
    if named and os.path.isfile(named):
        return named
    try:
        spec = importlib.util.find_spec("libtpu")
    except (ImportError, ValueError):
        return None
    return spec.origin if spec is not None and spec.origin else None


def _gpu_plugin() -> str | None:
    for name in GPU_PLUGINS:
        try:
            if importlib.util.find_spec(name) is not None:
                return name
        except (ImportError, ValueError):
            continue
    return None


def accelerator(env: Mapping[str, str] | None = None, *, sys_root: str = "/sys",
                dev_root: str = "/dev") -> Accelerator | None:
    """The accelerator JAX would choose here, told without starting JAX; ``None`` for the CPU.

    ``JAX_PLATFORMS`` first, as JAX reads it: a list whose first platform is ``cpu`` means the CPU.
    A TPU: libtpu installed and a chip on the PCI bus (or ``JAX_FORCE_TPU_INIT``), the rules of
    ``jax/_src/cloud_tpu_init.py``'s ``cloud_tpu_init``; its device files are ``/dev/accel*``
    (v4 and later on a TPU VM) or ``/dev/vfio/*``. A GPU: a CUDA or ROCm plugin and an NVIDIA
    device file (``hardware_utils.has_visible_nvidia_gpu``) or AMD's ``/dev/kfd``."""
    env = os.environ if env is None else env
    simulated = env.get(SIMULATED, "")
    if simulated.startswith("tpu"):
        return Accelerator("tpu", True, 1, "(simulated)", (), "tpu" if simulated.endswith(":unavailable") else None)
    platforms = [p.strip() for p in env.get("JAX_PLATFORMS", "").split(",") if p.strip()]
    if platforms and platforms[0] == "cpu":
        return None
    tpu_nodes = tuple(sorted(glob.glob(os.path.join(dev_root, "accel[0-9]*")))) + \
        tuple(sorted(p for p in glob.glob(os.path.join(dev_root, "vfio", "*"))))
    if not platforms or platforms[0] == "tpu":
        chips, version = tpu_chips(sys_root)
        if tpu_library(env) and (chips or "JAX_FORCE_TPU_INIT" in env):
            return Accelerator("tpu", True, chips, version, tpu_nodes)
    if not platforms or platforms[0] in ("cuda", "gpu", "rocm"):
        plugin = _gpu_plugin()
        nvidia = [p for p in (os.path.join(dev_root, os.path.basename(d)) for d in NVIDIA_DEVICES) if os.path.exists(p)]
        amd = os.path.join(dev_root, "kfd")
        if plugin and (nvidia or os.path.exists(amd)):
            nodes = sorted(glob.glob(os.path.join(dev_root, "nvidia*"))) + ([amd] if os.path.exists(amd) else []) + \
                sorted(glob.glob(os.path.join(dev_root, "dri")))
            return Accelerator("gpu", False, len(glob.glob(os.path.join(dev_root, "nvidia[0-9]*"))), None, tuple(nodes))
    return None


def unsupported_system(system: str | None = None) -> Text | None:
    """Why this operating system cannot grade, in one line, else ``None``: the grader runs on Linux (WSL2,
    Colab and Kaggle included). A host forks a job per exercise after importing JAX, and jobs are watched
    and ended through ``/proc`` (their processes, their threads' CPUs, what they left behind); native
    Windows has no ``fork``, macOS no ``/proc``."""
    import sys

    system = sys.platform if system is None else system
    if system.startswith("linux"):
        return None
    return T("sandbox.unsupported_system", system={"darwin": "macOS", "win32": "Windows"}.get(system, system))


# ------------------------------------------------------------------ who holds a TPU
@dataclass(frozen=True)
class Holder:
    """A process that holds the accelerator."""

    #: its process id
    pid: int
    #: its command line, shortened
    command: str


def _holds_tpu(target: str, lockfile: str) -> bool:
    return target == lockfile or target.startswith("/dev/accel") or \
        (target.startswith("/dev/vfio/") and target[len("/dev/vfio/"):].isdigit())


def tpu_holders(*, proc_root: str = "/proc", lockfile: str = TPU_LOCKFILE,
                exclude: set[int] | None = None) -> list[Holder]:
    """The processes that hold a TPU open, as far as this user can see: a file of theirs open on the
    chip (``/dev/accel*``, ``/dev/vfio/N``) or on libtpu's lock file (seen open by the holder on a
    TPU v5e: ``/tmp/libtpu_lockfile``, ``/dev/vfio/2``, ``/dev/vfio/vfio``). Processes of other users
    cannot be read unless the grader is root; a job then finds the chip taken as it starts, and the
    grading falls back to the CPU all the same (:meth:`DevicePlan.fall_back`)."""
    exclude = exclude or set()
    found = []
    for entry in os.listdir(proc_root):
        if not entry.isdigit() or int(entry) in exclude:
            continue
        folder = os.path.join(proc_root, entry, "fd")
        try:
            fds = os.listdir(folder)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink(os.path.join(folder, fd))
            except OSError:
                continue
            if _holds_tpu(target, lockfile):
                found.append(Holder(int(entry), _command(proc_root, entry)))
                break
    return found


def _command(proc_root: str, pid: str) -> str:
    try:
        with open(os.path.join(proc_root, pid, "cmdline"), "rb") as handle:
            words = handle.read(4096).split(b"\0")
    except OSError:
        return "?"
    text = " ".join(" ".join(w.decode("utf-8", "replace").split()) for w in words if w.strip())
    return text if len(text) <= 80 else text[:77] + "..."


def clear_stale_lockfile(lockfile: str = TPU_LOCKFILE, *, proc_root: str = "/proc") -> bool:
    """Remove libtpu's lock file where no process holds it, so that the next job can open the chip
    whatever its uid (the file is its creator's, mode 0600: a job under another uid could not open it,
    jax-ml/jax#10192). Whether it was removed."""
    if not os.path.exists(lockfile) or tpu_holders(proc_root=proc_root, lockfile=lockfile):
        return False
    try:
        os.unlink(lockfile)
        return True
    except OSError:
        return False


def holder_in_message(text: str) -> int | None:
    """The pid libtpu names in "The TPU is already in use by process with pid N", if any."""
    import re

    found = re.search(r"in use by process with pid (\d+)", text or "")
    return int(found.group(1)) if found else None


#: what a job's backend error says when another process holds the chip
TAKEN_WORDS = ("already in use", "multi-process lockfile", "Device or resource busy", "TPU is busy")


def taken(error: str) -> bool:
    """Whether a job's backend error says the accelerator is held by another process."""
    return any(word in (error or "") for word in TAKEN_WORDS)


# ------------------------------------------------------------------ the plan
class DeviceLease:
    """One job at a time on an exclusive device: :meth:`acquire` before the job is forked, :meth:`release`
    once its process has ended (the chip is let go as the process exits). Shared by a grading's hosts."""

    def __init__(self, lockfile: str = TPU_LOCKFILE):
        self._lock = threading.Lock()
        self.lockfile = lockfile
        self._made = time.monotonic()
        #: the jobs that held it, in turn: ``job`` (its name), ``waited_s`` for it, ``from_s`` and ``to_s``
        #: (held, in seconds since the grading planned the device)
        self.turns: list[dict] = []

    def acquire(self, job: str, deadline: float) -> bool:
        started = time.monotonic()
        got = self._lock.acquire(timeout=max(0.0, deadline - started))
        if got:
            now = time.monotonic()
            self.turns.append({"job": job, "waited_s": round(now - started, 3), "from_s": round(now - self._made, 3),
                               "to_s": None})
            clear_stale_lockfile(self.lockfile)
        return got

    def release(self) -> None:
        if self.turns and self.turns[-1]["to_s"] is None:
            self.turns[-1]["to_s"] = round(time.monotonic() - self._made, 3)
        try:
            self._lock.release()
        except RuntimeError:  # released already
            pass


@dataclass
class DevicePlan:
    """Where a grading's jobs run (see the module)."""

    #: ``cpu`` (everything on the CPU) or the accelerator's platform (``tpu``, ``gpu``)
    platform: str = "cpu"
    #: the accelerator found here (``None``: none, or not looked for)
    accelerator: Accelerator | None = None
    #: why the grading runs on the CPU though an accelerator is here (shown in the report), else ``None``
    fallback: Text | None = None
    #: the process that held the accelerator, when that is why
    holder: Holder | None = None
    #: one device job at a time (exclusive devices)
    lease: DeviceLease = field(default_factory=DeviceLease)
    #: one switch to the CPU at a time (:meth:`fall_back`: exercises graded at once may each find the device taken)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    @property
    def exclusive(self) -> bool:
        """One process at a time on the device the plan measures on."""
        return self.platform != "cpu" and self.accelerator is not None and self.accelerator.exclusive

    def platform_for(self, measures_device: bool) -> str | None:
        """The ``jax_platforms`` of a job: ``cpu``, or ``None`` (JAX's own choice: the accelerator);
        ``measures_device``: the exercise's checks measure the device (its ``device`` setting)."""
        if self.platform == "cpu":
            return "cpu" if self.accelerator is not None else None
        if self.exclusive and not measures_device:
            return "cpu"
        return self.accelerator.jax_platform if self.accelerator is not None else None

    def on_device(self, measures_device: bool) -> bool:
        """Whether such a job takes its turn on the exclusive device (:class:`DeviceLease`)."""
        return self.exclusive and measures_device

    def fall_back(self, why: Text, holder: Holder | None = None) -> bool:
        """Go on on the CPU (an accelerator's job found it taken); whether this call switched."""
        with self._lock:
            if self.platform == "cpu":
                return False
            self.platform, self.fallback, self.holder = "cpu", why, holder
            return True

    def describe(self) -> dict:
        """For the report: the platform measured on, the accelerator found, why not used."""
        return {"platform": self.platform,
                "accelerator": self.accelerator.name if self.accelerator else None,
                "exclusive": bool(self.accelerator and self.accelerator.exclusive),
                "holder": {"pid": self.holder.pid, "command": self.holder.command} if self.holder else None}


def unavailable_text(acc: Accelerator, error: str) -> Text:
    """The one line for an accelerator that a job could not open for another reason than a holder."""
    return T("device.unavailable", device=acc.name, error=(error or "?")[:200])


def ancestors(pid: int | None = None, proc_root: str = "/proc") -> list[int]:
    """This process (or ``pid``) and the processes that started it, up to init."""
    chain, pid = [], os.getpid() if pid is None else pid
    while pid > 1 and pid not in chain:
        chain.append(pid)
        try:
            with open(os.path.join(proc_root, str(pid), "stat"), "rb") as stat:
                pid = int(stat.read().rsplit(b")", 1)[1].split()[1])
        except (OSError, ValueError, IndexError):
            break
    return chain


def held_text(acc: Accelerator, holder: Holder | None) -> Text:
    """The one line that says the accelerator is held, by whom, and how to measure on it: a holder that
    started this grading is a notebook's kernel that ran JAX (``check()``, or ``!grade`` in a cell)."""
    if holder is None:
        return T("device.held_unknown", device=acc.name)
    if holder.pid in ancestors():
        return T("device.held_by_kernel", device=acc.name, pid=holder.pid)
    return T("device.held", device=acc.name, pid=holder.pid, command=holder.command)


def plan(requested: str = "auto", env: Mapping[str, str] | None = None, *, sys_root: str = "/sys",
         dev_root: str = "/dev", proc_root: str = "/proc", lockfile: str = TPU_LOCKFILE) -> DevicePlan:
    """The plan of one grading: ``requested`` is ``auto``, ``cpu`` or ``device`` (:data:`CHOICES`).

    Raises :class:`DeviceError` where ``device`` was asked for and cannot be had."""
    if requested not in CHOICES:
        raise ValueError(f"unknown device choice {requested!r}")
    env = os.environ if env is None else env
    found = accelerator(env, sys_root=sys_root, dev_root=dev_root)
    if requested == "cpu":
        return DevicePlan("cpu", found, T("device.cpu_asked", device=found.name) if found else None)
    if found is None:
        if requested == "device":
            raise DeviceError(T("device.none"))
        return DevicePlan("cpu", None)
    if found.exclusive:
        holders = tpu_holders(proc_root=proc_root, lockfile=lockfile)
        if holders:
            why = held_text(found, holders[0])
            if requested == "device":
                raise DeviceError(why)
            return DevicePlan("cpu", found, why, holders[0], DeviceLease(lockfile))
        if os.path.exists(lockfile) and not _ours_to_open(lockfile):
            why = T("device.lockfile", device=found.name, path=lockfile)
            if requested == "device":
                raise DeviceError(why)
            return DevicePlan("cpu", found, why, None, DeviceLease(lockfile))
    return DevicePlan(found.platform, found, None, None, DeviceLease(lockfile))


def _ours_to_open(path: str) -> bool:
    """Whether a job of this grading can open (or remove and make anew) libtpu's lock file at ``path``."""
    if os.geteuid() == 0:
        return True  # the grader removes it before each device job (:func:`clear_stale_lockfile`)
    try:
        return os.stat(path).st_uid == os.geteuid()
    except OSError:
        return True


class DeviceError(Exception):
    """``--device device`` where the accelerator cannot be had; ``text`` says why."""

    def __init__(self, text: Text):
        super().__init__(text.key)
        self.text = text


@lru_cache(maxsize=1)
def default_plan() -> DevicePlan:
    """The plan of what runs without a grading's own (a batch, a release's records, the class's compiler):
    the CPU where the accelerator is exclusive (they run many processes at once), else JAX's choice."""
    found = accelerator()
    if found is not None and found.exclusive:
        return DevicePlan("cpu", found, T("device.batch_cpu", device=found.name))
    return DevicePlan(found.platform if found else "cpu", found)
