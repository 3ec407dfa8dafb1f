"""Write ``grader/authoring/gradescope-lock.txt``: every package the Gradescope autograder installs, pinned
to the version this environment (the one the tests ran in) has, with the sha256 of the file pip
installs on Gradescope's default image (Ubuntu 22.04: glibc 2.35, x86_64), and the Python to
install there with uv.

    .venv/bin/python scripts/lock_gradescope.py        # after changing JAX or any dependency

The packages are the grader's own dependencies (no extras) and theirs, as this environment's
metadata says, with their markers read for this Python; plus setuptools, which builds the
grader there, and uv, which installs the Python (PyPI's ``uv``, whose ``uv python install``
fetches a python-build-standalone build it checks against the sha256 it carries). Each file is
fetched with ``pip download`` for that platform, from the index pip is configured with.
"""
from __future__ import annotations

import hashlib
import re
import subprocess
import sys
import tempfile
from importlib import metadata
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent
LOCK = ROOT / "grader" / "authoring" / "gradescope-lock.txt"
#: Gradescope's default base image (Ubuntu 22.04, glibc 2.35) on x86_64: the tags pip accepts there, the
#: most specific first (as pip orders them on such a machine)
PLATFORM = "manylinux_2_35_x86_64"
PLATFORMS = [f"manylinux_2_{minor}_x86_64" for minor in range(35, 4, -1)] + \
    ["manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64", "linux_x86_64"]


def closure(root: str = "jit-grader") -> dict[str, str]:
    """Every distribution ``root`` needs here, without extras: canonical name -> installed version."""
    environment = {**default_environment(), "extra": ""}
    found: dict[str, str] = {}
    todo = [Requirement(r) for r in metadata.requires(root) or []]
    while todo:
        requirement = todo.pop()
        if requirement.marker is not None and not requirement.marker.evaluate(environment):
            continue
        name = canonicalize_name(requirement.name)
        if name in found:
            continue
        found[name] = metadata.version(requirement.name)
        todo += [Requirement(r) for r in metadata.requires(requirement.name) or []]
    return dict(sorted(found.items()))


def download(spec: str, folder: Path) -> tuple[str, str]:
    """The wheel pip picks for Gradescope's image: (its version, its sha256)."""
    before = set(folder.iterdir())
    platforms = [arg for tag in PLATFORMS for arg in ("--platform", tag)]
    abi = "cp{}{}".format(*sys.version_info[:2])
    subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                    *platforms, "--python-version", "{}.{}".format(*sys.version_info[:2]), "--implementation", "cp",
                    "--abi", abi, "--abi", "abi3", "--abi", "none", "-d", str(folder), spec], check=True)
    wheel = next(iter(set(folder.iterdir()) - before))
    version = wheel.name.split("-")[1]
    return version, hashlib.sha256(wheel.read_bytes()).hexdigest()


def main() -> int:
    python = ".".join(map(str, sys.version_info[:3]))
    lines = ["# The Gradescope autograder's packages (grade dev gradescope puts them in its requirements.txt and",
             "# requirements-uv.txt): written by scripts/lock_gradescope.py from the environment the tests ran in,",
             f"# each file's sha256 as pip picks it for {PLATFORM} (Gradescope's Ubuntu 22.04). Do not edit.",
             f"python {python}"]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        uv_version, uv_hash = download("uv", folder)
        lines.append(f"uv=={uv_version} --hash=sha256:{uv_hash}")
        build_version, build_hash = download("setuptools>=77", folder)
        packages = {**closure(), "setuptools": build_version}
        for name, version in sorted(packages.items()):
            if name == "setuptools":
                digest = build_hash
            else:
                _, digest = download(f"{name}=={version}", folder)
            lines.append(f"{name}=={version} --hash=sha256:{digest}")
            print(lines[-1][:80], flush=True)
    LOCK.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {LOCK.relative_to(ROOT)}: Python {python}, {len(packages)} packages and uv {uv_version}")
    return 0 if re.match(r"\d+\.\d+\.\d+$", python) else 1


if __name__ == "__main__":
    sys.exit(main())
