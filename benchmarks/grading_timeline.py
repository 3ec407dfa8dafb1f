#!/usr/bin/env python3
"""Where one grading's wall time goes, phase by phase: the critical path of ``grade solutions/ch4``.

    python benchmarks/grading_timeline.py [--runs 5] [-k ex02 ...] [--no-service | --first]

Each run is a student's next grading (a cache of its own, warmed by one grading first, so that the reference's
outcomes are known from the seeds drawn ahead and only the timed exercise's reference job runs, and the user's
warm service started: :mod:`grader.runner.service`; with ``--no-service``, ``GRADER_WARM_S=0``). With
``--first``, each run is instead the first grading of a student's own work
(``benchmarks/grading_speed.py``'s): on a fresh copy of a cache as ``grade dev build`` leaves it, no service
running, every program of the student's compiled there. While the command runs, every process it starts is
watched in ``/proc`` (its descendants, and what the warm service's templates fork meanwhile, every 10 ms):
when each host started (``grader.child.host``, or a fork of a template), when each job started (a child of a
host) and when it was last seen; the report adds ex06's phases. Printed, as medians over the runs (min–max):

* the command's own start: Python, the command's imports, the chapter, the sandbox's plan, up to
  the first host's start;
* the hosts' start: from the first host to the first job (JAX imported in each host; forked warm from
  the service's templates, milliseconds);
* the jobs: from the first job to the last one gone;
* in it, ex06: its jobs' preparation, the wait for a core of its own (``rounds_from_s`` minus
  the later side's ``ready``), its timed rounds;
* the tail: from the last job gone to the command's exit (verdicts, reports, hosts stopped);

and the CPU seconds of the hosts and of the jobs (``/proc/PID/stat``, as last seen).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from machine import Machine  # noqa: E402

TICK = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> tuple[int, float, float] | None:
    """``(parent, start seconds since boot, CPU seconds)`` of ``pid``."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8") as handle:
            stat = handle.read()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2:].split()
    return int(fields[1]), int(fields[19]) / TICK, (int(fields[11]) + int(fields[12])) / TICK


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            return [part.decode(errors="replace") for part in handle.read().split(b"\0")]
    except OSError:
        return []


def _descendants(pid: int) -> list[int]:
    """Every process under ``pid``, from each thread's ``children`` in /proc (Linux 3.5+): a few files
    read, where listing /proc reads every process's."""
    found, todo = [], [pid]
    while todo:
        parent = todo.pop()
        try:
            threads = os.listdir(f"/proc/{parent}/task")
        except OSError:
            continue
        for thread in threads:
            try:
                with open(f"/proc/{parent}/task/{thread}/children", encoding="utf-8") as handle:
                    children = [int(c) for c in handle.read().split()]
            except (OSError, ValueError):
                continue
            found += children
            todo += children
    return found


def _ours(argv: list[str]) -> bool:
    """A host or job of the grader: ``python ... -m grader.child.*`` (not the sandbox's ``bwrap`` that
    starts one, whose arguments name it too)."""
    return bool(argv) and os.path.basename(argv[0]).startswith("python") and "-m" in argv[:-1] \
        and argv[argv.index("-m") + 1].startswith("grader.child")


def _templates() -> list[int]:
    """The warm services' templates of hosts running now (``python -m grader.child.template``, under a
    ``grader.runner.service_daemon``)."""
    services = [int(e) for e in os.listdir("/proc") if e.isdigit()
                and "grader.runner.service_daemon" in _cmdline(int(e))]
    return [pid for service in services for pid in _descendants(service)
            if _ours(_cmdline(pid)) and "grader.child.template" in _cmdline(pid)]


def _warm_commands() -> list[int]:
    """The warm commands running now (``python -m grader.cli.command_server``): a served ``grade`` runs in a child
    of one, and the hosts it starts itself are that child's."""
    return [int(e) for e in os.listdir("/proc") if e.isdigit() and "grader.cli.command_server" in _cmdline(int(e))]


def watch(command: list[str], env: dict) -> dict:
    """Run ``command``; the processes it started (and the service's templates and warm command forked for it),
    as seen in /proc."""
    templates = _templates() + _warm_commands()
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, cwd=ROOT)
    began = _stat(process.pid)
    seen: dict[int, dict] = {}
    while process.poll() is None:
        now = time.monotonic()
        for pid in [*_descendants(process.pid), *(p for t in templates for p in _descendants(t))]:
            found = _stat(pid)
            if found is None or (began is not None and found[1] < began[1]):
                continue
            if pid in seen:
                seen[pid].update(cpu=found[2], last=now)
            elif _ours(_cmdline(pid)):
                seen[pid] = {"parent": found[0], "start": found[1], "cpu": found[2], "first": now, "last": now}
        time.sleep(0.01)
    ended = time.monotonic()
    hosts = {pid: p for pid, p in seen.items() if p["parent"] not in seen}  # the command's, or a template's fork
    jobs = {pid: p for pid, p in seen.items() if p["parent"] in hosts}
    start = began[1] if began else 0.0
    to_boot = time.clock_gettime(time.CLOCK_BOOTTIME) - time.monotonic()  # /proc's starts count from boot
    return {"start": start, "to_boot": to_boot, "ended": ended, "hosts": hosts, "jobs": jobs}


def phases(watched: dict, report: dict) -> dict[str, float]:
    start, to_boot = watched["start"], watched["to_boot"]
    hosts, jobs = watched["hosts"], watched["jobs"]
    first_host = min(p["start"] for p in hosts.values()) - start
    first_job = min(p["start"] for p in jobs.values()) - start
    last_job = max(p["last"] for p in jobs.values()) + to_boot - start
    total = watched["ended"] + to_boot - start
    out = {"the command's own start": first_host, "the hosts' start (JAX imported)": first_job - first_host,
           "the jobs": last_job - first_job, "the tail": total - last_job, "total": total,
           "hosts' CPU": sum(p["cpu"] for p in hosts.values()), "jobs' CPU": sum(p["cpu"] for p in jobs.values())}
    ex06 = next((e for e in report.get("exercises", []) if e["id"] == "ex06_speedup"), None)
    checks = (ex06 or {}).get("checks", [])
    measured = next((c.get("measured") or {} for c in checks if c["id"] == "fast_heavy.speedup"), {})
    timed = measured.get("phases_s") if isinstance(measured, dict) else None
    if timed:
        ready = max(timed.get("student_ready_s", 0.0), timed.get("reference_ready_s", 0.0))
        out.update({"ex06: its jobs prepared": ready, "ex06: waited for a core": timed["rounds_from_s"] - ready,
                    "ex06: the timed rounds": timed["finished_s"] - timed["rounds_from_s"]})
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("-k", "--exercise", action="append", default=[])
    parser.add_argument("--no-service", action="store_true", help="each grading starts its own hosts (GRADER_WARM_S=0)")
    parser.add_argument("--first", action="store_true", help="each run a first grading of a student's own work")
    args = parser.parse_args()
    machine = Machine()
    work = Path(tempfile.mkdtemp(prefix="grading-timeline-"))
    caches = [work / "cache"]
    try:
        submission = work / "ch4"
        if args.first:
            from grading_speed import built_copy, own_work, stop_services

            submission = own_work(work)
        else:
            shutil.copytree(ROOT / "solutions" / "ch4", submission)
        env = {**os.environ, "GRADER_CACHE_DIR": str(work / "cache"), "PYTHONPATH": "",
               "GRADER_WARM_S": "0" if args.no_service else "600"}
        command = [sys.executable, "-m", "grader", str(submission), "--lang", "en",
                   *(item for k in args.exercise for item in ("-k", k))]
        if args.first:  # the programs built once, as setup.sh builds them; each run on a fresh copy
            subprocess.run([sys.executable, "-m", "grader", "dev", "build"], env=env, cwd=ROOT, capture_output=True,
                           check=True)
        else:
            subprocess.run(command, env=env, cwd=ROOT, capture_output=True, check=False)  # the first: builds, draws
            time.sleep(0 if args.no_service else 5)  # the service it started as it ended imports JAX
        rows: dict[str, list[float]] = {}
        for run in range(args.runs):
            if args.first:
                caches.append(built_copy(work / "cache", work / f"cache-{run}"))
                stop_services(caches)
                time.sleep(1)
                watched = watch(command, {**env, "GRADER_CACHE_DIR": str(caches[-1])})
            else:
                watched = watch(command, env)
            name = "report.partial.json" if args.exercise else "report.json"
            report = json.loads((submission / ".grade" / name).read_text(encoding="utf-8"))
            for key, value in phases(watched, report).items():
                rows.setdefault(key, []).append(value)
    finally:
        if args.first:
            stop_services(caches)
        elif not args.no_service:  # the service of this run's cache, not the user's others
            from grader import store
            from grader.runner import service

            slot = service.slot_of(work / "cache" / store.root().name)
            for found in service.running():
                if Path(found["socket"]).stem == slot:
                    os.kill(found["pid"], 15)
        shutil.rmtree(work, ignore_errors=True)
    which = "a first grading of a student's own work" if args.first else "a student's next grading"
    print(f"\n`grade {'own' if args.first else 'solutions'}/ch4{''.join(' -k ' + k for k in args.exercise)}`, {which}: "
          f"{args.runs} runs, medians (min–max), seconds\n")
    print("| phase | seconds |")
    print("|---|---:|")
    for key, values in rows.items():
        print(f"| {key} | {statistics.median(values):.2f} ({min(values):.2f}–{max(values):.2f}) |")
    print(f"\n{machine.describe()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
