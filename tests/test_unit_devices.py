"""Where a grading measures, planned before any process starts (grader/runner/devices.py), and what a
host needs to reach the device (its environment, JAX's folders, the device files), each against the
outside system's own rules, cited where they are encoded."""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from grader.i18n import grader_catalog
from grader.runner import devices
from grader.runner.devices import Accelerator, DeviceError, DeviceLease, DevicePlan


def _tpu_machine(tmp_path: Path, *, device_id: str = "0x0063", nodes=("vfio/2", "vfio/vfio")) -> tuple[str, str, dict]:
    """A fake /sys and /dev of a TPU VM (one v5e chip, as jax/_src/hardware_utils.py reads the PCI bus:
    vendor 0x1ae0, device 0x0063) and an environment naming libtpu (TPU_LIBRARY_PATH, as
    cloud_tpu_init.get_tpu_library_path reads it)."""
    pci = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:00:05.0"
    pci.mkdir(parents=True)
    (pci / "vendor").write_text("0x1ae0\n")
    (pci / "device").write_text(device_id + "\n")
    other = tmp_path / "sys" / "bus" / "pci" / "devices" / "0000:00:01.0"
    other.mkdir(parents=True)
    (other / "vendor").write_text("0x8086\n")
    (other / "device").write_text("0x7110\n")
    dev = tmp_path / "dev"
    for node in nodes:
        (dev / node).parent.mkdir(parents=True, exist_ok=True)
        (dev / node).write_text("")
    library = tmp_path / "libtpu.so"
    library.write_text("")
    return str(tmp_path / "sys"), str(dev), {"TPU_LIBRARY_PATH": str(library)}


# ------------------------------------------------------------------ finding the accelerator
def test_a_tpu_vm_is_found_as_jax_finds_it(tmp_path):
    sys_root, dev_root, env = _tpu_machine(tmp_path)
    found = devices.accelerator(env, sys_root=sys_root, dev_root=dev_root)
    assert found == Accelerator("tpu", True, 1, "v5e", (f"{dev_root}/vfio/2", f"{dev_root}/vfio/vfio"))
    assert found.name == "TPU v5e"


def test_no_tpu_without_its_library_or_its_chip(tmp_path):
    sys_root, dev_root, env = _tpu_machine(tmp_path)
    assert devices.accelerator({}, sys_root=sys_root, dev_root=dev_root) is None or \
        devices.tpu_library({}) is not None  # libtpu installed here would be found without the variable
    empty = tmp_path / "nosys"
    empty.mkdir()
    assert devices.accelerator(env, sys_root=str(empty), dev_root=dev_root) is None  # no chip on the bus
    # JAX_FORCE_TPU_INIT: cloud_tpu_init goes on without a chip it can see
    assert devices.accelerator({**env, "JAX_FORCE_TPU_INIT": "1"}, sys_root=str(empty),
                               dev_root=dev_root).platform == "tpu"
    _, _, _ = _tpu_machine(tmp_path / "other", device_id="0x9999")  # a Google device that is no TPU
    assert devices.accelerator(env, sys_root=str(tmp_path / "other" / "sys"), dev_root=dev_root) is None


def test_jax_platforms_cpu_means_the_cpu(tmp_path):
    sys_root, dev_root, env = _tpu_machine(tmp_path)
    assert devices.accelerator({**env, "JAX_PLATFORMS": "cpu"}, sys_root=sys_root, dev_root=dev_root) is None
    assert devices.accelerator({**env, "JAX_PLATFORMS": "cpu,tpu"}, sys_root=sys_root, dev_root=dev_root) is None
    assert devices.accelerator({**env, "JAX_PLATFORMS": "tpu,cpu"}, sys_root=sys_root,
                               dev_root=dev_root).platform == "tpu"


def test_a_gpu_is_shared_not_exclusive(tmp_path, monkeypatch):
    monkeypatch.setattr(devices, "_gpu_plugin", lambda: "jax_cuda12_plugin")
    dev = tmp_path / "dev"
    dev.mkdir()
    (dev / "nvidia0").write_text("")
    (dev / "nvidiactl").write_text("")
    found = devices.accelerator({}, sys_root=str(tmp_path / "sys"), dev_root=str(dev))
    assert found.platform == "gpu" and not found.exclusive and f"{dev}/nvidia0" in found.nodes
    plan = devices.plan("auto", {}, sys_root=str(tmp_path / "sys"), dev_root=str(dev))
    assert plan.platform == "gpu" and plan.platform_for(True) is None and plan.platform_for(False) is None
    assert not plan.on_device(True)  # every job runs on it, at once, as JAX puts it


# ------------------------------------------------------------------ who holds a TPU
@pytest.fixture
def holder(tmp_path):
    """A process that holds a lock file open, as libtpu's holder holds /tmp/libtpu_lockfile (seen on a TPU v5e:
    its fds /tmp/libtpu_lockfile, /dev/vfio/2, /dev/vfio/vfio)."""
    lockfile = tmp_path / "libtpu_lockfile"
    lockfile.write_text("")
    process = subprocess.Popen([sys.executable, "-c", "import sys, time\nf = open(sys.argv[1])\n"
                                "print('held', flush=True)\ntime.sleep(120)", str(lockfile)],
                               stdout=subprocess.PIPE, text=True)
    assert process.stdout.readline().strip() == "held"
    yield process, str(lockfile)
    process.kill()
    process.wait()


def test_the_holder_is_named_by_pid_and_command(holder):
    process, lockfile = holder
    found = devices.tpu_holders(lockfile=lockfile)
    assert [h.pid for h in found] == [process.pid]
    assert found[0].command.startswith(sys.executable) and "\n" not in found[0].command
    assert devices.tpu_holders(lockfile=lockfile, exclude={process.pid}) == []


def test_a_stale_lockfile_is_removed_a_held_one_kept(holder, tmp_path):
    process, lockfile = holder
    assert devices.clear_stale_lockfile(lockfile) is False and os.path.exists(lockfile)
    stale = tmp_path / "stale_lockfile"
    stale.write_text("")
    assert devices.clear_stale_lockfile(str(stale)) is True and not stale.exists()


def test_libtpus_words_for_a_chip_in_use():
    said = ("Unable to initialize backend 'tpu': ABORTED: Internal error when accessing libtpu multi-process "
            "lockfile. Run \"$ sudo rm /tmp/libtpu_lockfile\".")
    assert devices.taken(said) and devices.taken("The TPU is already in use by process with pid 4242.")
    assert devices.holder_in_message("The TPU is already in use by process with pid 4242. Not attempting") == 4242
    assert not devices.taken("Failed to open libtpu.so: cannot open shared object file")


# ------------------------------------------------------------------ the plan
def test_a_free_tpu_plans_the_devices_exercises_on_it_the_others_on_the_cpu(tmp_path):
    sys_root, dev_root, env = _tpu_machine(tmp_path)
    plan = devices.plan("auto", env, sys_root=sys_root, dev_root=dev_root, lockfile=str(tmp_path / "none"))
    assert plan.platform == "tpu" and plan.exclusive and plan.fallback is None
    assert plan.platform_for(True) is None and plan.on_device(True)  # JAX's own choice: the TPU
    assert plan.platform_for(False) == "cpu" and not plan.on_device(False)  # never loads libtpu


def test_a_held_tpu_plans_the_cpu_and_says_who_holds_it(tmp_path, holder):
    process, lockfile = holder
    sys_root, dev_root, env = _tpu_machine(tmp_path)
    plan = devices.plan("auto", env, sys_root=sys_root, dev_root=dev_root, lockfile=lockfile)
    assert plan.platform == "cpu" and plan.holder.pid == process.pid
    assert plan.platform_for(True) == plan.platform_for(False) == "cpu"
    line = grader_catalog().render(plan.fallback, "en")
    assert f"pid {process.pid}" in line and "graded on the CPU" in line and "\n" not in line
    assert plan.describe()["holder"]["pid"] == process.pid
    with pytest.raises(DeviceError) as asked:
        devices.plan("device", env, sys_root=sys_root, dev_root=dev_root, lockfile=lockfile)
    assert asked.value.text.key == "device.held"


def test_a_holder_that_started_the_grading_is_the_notebooks_kernel(tmp_path):
    """check() grades in a process the kernel starts, and `!grade` in a cell too: the kernel is an ancestor."""
    lockfile = tmp_path / "libtpu_lockfile"
    lockfile.write_text("")
    sys_root, dev_root, env = _tpu_machine(tmp_path)
    with open(lockfile):  # this process holds it; the plan is made in a child, as check() makes it
        code = ("import sys\nfrom grader.runner import devices\n"
                "p = devices.plan('auto', {'TPU_LIBRARY_PATH': sys.argv[1]}, sys_root=sys.argv[2], "
                "dev_root=sys.argv[3], lockfile=sys.argv[4])\nprint(p.fallback.key, p.holder.pid)")
        done = subprocess.run([sys.executable, "-c", code, env["TPU_LIBRARY_PATH"], sys_root, dev_root, str(lockfile)],
                              capture_output=True, text=True, timeout=60)
    assert done.stdout.split() == ["device.held_by_kernel", str(os.getpid())], done.stderr


def test_a_lockfile_of_another_user_says_how_to_remove_it(tmp_path, monkeypatch):
    sys_root, dev_root, env = _tpu_machine(tmp_path)
    lockfile = tmp_path / "libtpu_lockfile"
    lockfile.write_text("")
    monkeypatch.setattr(devices.os, "geteuid", lambda: os.stat(lockfile).st_uid + 1)  # an ordinary user, not its owner
    plan = devices.plan("auto", env, sys_root=sys_root, dev_root=dev_root, lockfile=str(lockfile))
    assert plan.platform == "cpu" and plan.fallback.key == "device.lockfile"
    assert f"sudo rm {lockfile}" in grader_catalog().render(plan.fallback, "en")


def test_device_cpu_and_device_device(tmp_path):
    sys_root, dev_root, env = _tpu_machine(tmp_path)
    asked = devices.plan("cpu", env, sys_root=sys_root, dev_root=dev_root)
    assert asked.platform == "cpu" and asked.fallback.key == "device.cpu_asked" and asked.platform_for(True) == "cpu"
    nothing = tmp_path / "empty"
    nothing.mkdir()
    with pytest.raises(DeviceError) as none:
        devices.plan("device", {"JAX_PLATFORMS": "cpu"}, sys_root=str(nothing), dev_root=str(nothing))
    assert none.value.text.key == "device.none"
    plain = devices.plan("auto", {"JAX_PLATFORMS": "cpu"})
    assert plain.platform == "cpu" and plain.fallback is None and plain.platform_for(True) is None  # as before
    with pytest.raises(ValueError):
        devices.plan("tpu")


def test_a_plan_falls_back_once():
    plan = DevicePlan("tpu", Accelerator("tpu", True, 1, "v5e"))
    why = devices.unavailable_text(plan.accelerator, "x" * 500)
    assert plan.fall_back(why) is True and plan.platform == "cpu" and plan.platform_for(True) == "cpu"
    assert plan.fall_back(why) is False
    assert len(grader_catalog().render(why, "en")) < 300


def test_the_lease_admits_one_job_at_a_time(monkeypatch):
    """The lease's records are read on a clock the test moves (0.2 s while "c" waits): on the machine's clock
    a waiting thread started late on a loaded machine recorded less than the 0.15 s asserted; the records are
    now exactly the time the test held the lease."""
    clock, asked = [0.0], threading.Event()

    def monotonic() -> float:
        if threading.current_thread() is not threading.main_thread():
            asked.set()  # the waiter's lease noted when it began to wait
        return clock[0]

    monkeypatch.setattr(devices, "time", SimpleNamespace(monotonic=monotonic))
    lease = DeviceLease("/nonexistent/lockfile")
    assert lease.acquire("a", clock[0] + 1)
    assert not lease.acquire("b", clock[0] + 0.1)  # held: a second waits (0.1 s of the machine's), then gives up
    got = []
    waiter = threading.Thread(target=lambda: got.append(lease.acquire("c", clock[0] + 30)))
    waiter.start()
    assert asked.wait(30)
    clock[0] += 0.2
    lease.release()
    waiter.join()
    assert got == [True]
    lease.release()
    first, second = lease.turns
    assert first["job"] == "a" and second["job"] == "c" and first["to_s"] == second["from_s"] == 0.2
    assert second["waited_s"] == 0.2 and first["waited_s"] == 0.0


def test_a_batch_runs_on_the_cpu_beside_an_exclusive_device(monkeypatch):
    monkeypatch.setenv(devices.SIMULATED, "tpu")
    devices.default_plan.cache_clear()
    try:
        plan = devices.default_plan()
        assert plan.platform == "cpu" and plan.fallback.key == "device.batch_cpu"
        assert plan.platform_for(True) == plan.platform_for(False) == "cpu"
    finally:
        monkeypatch.delenv(devices.SIMULATED)
        devices.default_plan.cache_clear()


# ------------------------------------------------------------------ what a host gets
def test_the_host_keeps_the_devices_variables_and_nothing_else(monkeypatch, tmp_path):
    from grader.runner.host_environment import scrubbed_environment

    kept = {"TPU_SKIP_MDS_QUERY": "true", "TPU_ACCELERATOR_TYPE": "v5litepod-4", "TPU_CHIPS_PER_HOST_BOUNDS": "2,2,1",
            "LIBTPU_INIT_ARGS": "--xla_tpu_use_enhanced_launch_barrier=true", "TPU_LIBRARY_PATH": "/x/libtpu.so",
            "JAX_PLATFORMS": "tpu,cpu", "CUDA_VISIBLE_DEVICES": "0", "ROCR_VISIBLE_DEVICES": "1"}
    dropped = {"PYTHONPATH": "/course:/opt/jax", "SECRET_TOKEN": "x", "JAX_ENABLE_X64": "1", "XLA_FLAGS": "--dump"}
    for key, value in {**kept, **dropped}.items():
        monkeypatch.setenv(key, value)
    env = scrubbed_environment(tmp_path / "home", tmp_path / "pylib")
    assert {k: env[k] for k in kept} == kept
    assert env["PYTHONPATH"] == str(tmp_path / "pylib")
    assert not {"SECRET_TOKEN", "JAX_ENABLE_X64", "XLA_FLAGS"} & set(env)


def test_jaxs_folders_outside_the_site_folders_are_found_and_nothing_else(tmp_path):
    from grader.runner.sandbox import jax_stack, python_roots

    machine = tmp_path / "opt-jax"  # a TPU VM's JAX folder, named by PYTHONPATH or a .pth
    for name in ("jax", "jaxlib", "jax_plugins", "libtpu", "numpy", "numpy.libs", "scipy", "ml_dtypes", "opt_einsum",
                 "jax-0.10.2.dist-info", "libtpu-0.0.42.dist-info", "requests", "__pycache__"):
        (machine / name).mkdir(parents=True)
    (machine / "jax_tpu.pth").write_text("")
    course = tmp_path / "course"  # the rest of a PYTHONPATH: a course's repository, its solutions
    (course / "solutions").mkdir(parents=True)
    (course / "jax").mkdir()  # shadowed by the first folder's
    site = str(python_roots()[-1])
    found = dict(jax_stack([str(machine), str(course), site, ""]))
    assert set(found) == {"jax", "jaxlib", "jax_plugins", "libtpu", "numpy", "numpy.libs", "scipy", "ml_dtypes",
                          "opt_einsum", "jax-0.10.2.dist-info", "libtpu-0.0.42.dist-info"}
    assert found["jax"] == machine.resolve() / "jax"  # the first folder's, as the grader's Python imports it
    assert jax_stack([site]) == []  # a site folder: the host's interpreter finds it itself


def test_the_device_files_are_shown_inside_bubblewrap(tmp_path):
    from grader.runner.sandbox import SandboxPlan, host_command

    node = tmp_path / "vfio2"
    node.write_text("")
    argv = host_command(SandboxPlan("bwrap", False), python_argv=["python"], binds_ro=[], binds_rw=[], keep_fds=[],
                        devices=(str(node), str(tmp_path / "missing")))
    at = argv.index("--dev-bind")
    assert argv[at:at + 3] == ["--dev-bind", str(node), str(node)] and argv.index("--dev") < at
    assert str(tmp_path / "missing") not in argv and ["--ro-bind", "/sys", "/sys"] == argv[at + 3:at + 6]
    assert "--dev-bind" not in host_command(SandboxPlan("bwrap", False), python_argv=["python"], binds_ro=[],
                                            binds_rw=[], keep_fds=[])


def test_a_hosts_failure_is_its_last_error():
    from grader.runner.host_handles import failure_line

    log = ("Traceback (most recent call last):\n  File \"<frozen runpy>\", line 198\n"
           "ModuleNotFoundError: No module named 'jax'\n")
    assert failure_line(log) == "ModuleNotFoundError: No module named 'jax'"
    assert failure_line("jaxlib.xla_extension.XlaRuntimeError: INTERNAL: boom\n") == "XlaRuntimeError: INTERNAL: boom"
    assert failure_line("all fine\n") is None


def test_the_users_tasks_are_counted_as_rlimit_nproc_counts_them():
    from grader.child.job_start import tasks_of_user

    stop = threading.Event()
    extra = [threading.Thread(target=stop.wait) for _ in range(20)]
    before = tasks_of_user(os.getuid())
    for thread in extra:
        thread.start()
    try:
        assert tasks_of_user(os.getuid()) >= before + 20 - 2  # others of the user may end meanwhile
        assert tasks_of_user(os.getuid()) >= len(os.listdir("/proc/self/task"))
        assert tasks_of_user(2**31 - 3) == 0
    finally:
        stop.set()
        for thread in extra:
            thread.join()


def test_a_devices_values_are_compared_at_the_devices_float32():
    """On a TPU v5e the provided heavy's float32 values differed from float64 by up to 5.5e-6 (absolute):
    a host callback computing it in NumPy failed fast_heavy.values at the CPU's tolerance."""
    from grader.primitives.numeric import on_device

    assert on_device("cpu", rtol=2e-5, atol=1e-6) == {"rtol": 2e-5, "atol": 1e-6}
    assert on_device(None, rtol=2e-5, atol=1e-6) == {"rtol": 2e-5, "atol": 1e-6}
    wide = on_device("tpu", rtol=2e-5, atol=1e-6)
    assert wide["atol"] >= 5.5e-6 and wide["rtol"] >= 4.5e-5 and wide["rtol"] <= 1e-3


def test_attempted_counts_the_exercises_functions_only():
    from grader.runner.outcome import JobOutcome

    provided_only = JobOutcome(end="done", side="student", records={
        "heavy/student": {"status": "ok", "function": "heavy"},
        "fast_heavy/values/0": {"status": "not_attempted", "function": "fast_heavy"}})
    assert provided_only.attempted() and not provided_only.attempted(("fast_heavy", "layer_norm"))
    provided_only.records["layer_norm/values/0"] = {"status": "raised", "function": "layer_norm"}
    assert provided_only.attempted(("fast_heavy", "layer_norm"))


@pytest.mark.parametrize("system,named", [("win32", "Windows"), ("darwin", "macOS")])
def test_another_system_than_linux_is_told_in_one_line(system, named):
    """Native Windows (no fork, no fcntl) and macOS (no /proc): `grade PATH` and `grade batch` say so in one
    line, before importing anything that needs Linux, never a traceback."""
    code = ("import sys, click\n"
            "if sys.argv[1] == 'win32': sys.modules['fcntl'] = None  # as on Windows\n"
            "sys.platform = sys.argv[1]\nfrom grader.cli import main\nsys.exit(main(sys.argv[2:]))")
    for args in (["exercises/ch4"], ["batch", "exercises", "--chapter", "ch4", "--out", "/nonexistent/out"]):
        done = subprocess.run([sys.executable, "-c", code, system, *args], capture_output=True, text=True, timeout=60,
                              cwd=Path(__file__).resolve().parent.parent)
        assert done.returncode == 2 and done.stdout == "", (args, done.stdout, done.stderr)
        assert done.stderr.count("\n") == 1 and f"this is {named}" in done.stderr and "WSL2" in done.stderr, done.stderr
