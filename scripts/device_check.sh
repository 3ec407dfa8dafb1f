#!/usr/bin/env bash
# The device check: grade the solutions, the stubs and every mistake whose verdict depends on the
# device on this machine's accelerator (a TPU or a GPU), then with the accelerator held by another
# process, then with JAX_PLATFORMS=cpu; print per exercise and check the device it ran on and the
# time, ex06's speed-ups and ex05's harness; keep the JSON reports. About 10 minutes on one TPU v5e
# chip; run it from anywhere in the repo, as an ordinary user or root.
#
#   scripts/device_check.sh [--wheels DIR] [--no-install] [--dry-run] [--seed N] [--only PARTS]
#                           [--variants-of EXERCISES]
#
# 1. The device, as the grader finds it (grader/runner/devices.py: libtpu and a TPU chip, or JAX's
#    CUDA/ROCm plugin and a GPU), and nvidia-smi's line where there is one.
# 2. The Python that grades:
#    --wheels DIR  (a machine without a package index, such as a TPU VM's sandbox): a virtual
#                  environment of its own (--without-pip) whose site-packages holds a .pth naming the
#                  folders of the JAX this machine found (its PYTHONPATH, where it ships JAX that way),
#                  the wheels installed from DIR (click, nbformat and what they need: pip install
#                  --no-index --target), and this checkout; PYTHONPATH is then unset, as in a student's
#                  venv (the grader passes JAX's own folders to its processes, nothing else of it);
#    a GPU, without --no-install: JAX's CUDA build into a fresh environment that sees the system's
#                  packages, as JAX's installation guide says (docs.jax.dev/en/latest/installation.html:
#                  pip install -U "jax[cuda13]" for a CUDA 13 driver, "jax[cuda12]" for CUDA 12);
#    otherwise:    .venv's Python, else python3, with this checkout on PYTHONPATH.
# 3. That Python must import jax, numpy, click, nbformat and the grader.
# 4. scripts/device_check.py grades and prints the summary (--only solutions,stubs,variants,held,cpu
#    runs some parts; --dry-run prints the plan). The JSON reports are kept in $OUT when set (the
#    device tool's output folder), else in ./device-check-reports.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD

INSTALL=1
DRY=""
SEED=()
ONLY=()
WHEELS=""
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) INSTALL=0 ;;
    --dry-run) DRY="--dry-run" ;;
    --seed) SEED=(--seed "$2"); shift ;;
    --only) ONLY+=(--only "$2"); shift ;;
    --variants-of) ONLY+=(--variants-of "$2"); shift ;;
    --wheels) WHEELS="$2"; shift ;;
    -h|--help) sed -n "2,27p" "$0"; exit 0 ;;
    *) echo "device_check: unknown option $1 (try --help)"; exit 2 ;;
  esac
  shift
done
if [ -n "$WHEELS" ] && ! ls "$WHEELS"/*.whl >/dev/null 2>&1; then
  echo "device_check: --wheels $WHEELS holds no .whl files"; exit 2
fi
started=$(date +%s)
echo "== device check of jit-grader ($(git rev-parse --short HEAD 2>/dev/null || echo '?')) as $(id -un 2>/dev/null || id -u), $(nproc) CPUs =="

# ---------------------------------------------------------------- 2. Python and JAX
if [ -x "$ROOT/.venv/bin/python" ]; then BASE="$ROOT/.venv/bin/python"; else BASE=$(command -v python3); fi
PY="$BASE"
TMPROOT="${TMPDIR:-/tmp}"
if [ -n "$WHEELS" ]; then
  SITE="$TMPROOT/device-check-site"
  VENV="$TMPROOT/device-check-venv"
  rm -rf "$SITE" "$VENV"
  if ! PIP_CONFIG_FILE=/dev/null python3 -m pip install --isolated -q --no-index --no-deps --no-compile \
        --no-cache-dir --target "$SITE" "$WHEELS"/*.whl >"$TMPROOT/device_check_pip.log" 2>&1; then
    echo "install: the wheels in $WHEELS did not install:"; tail -3 "$TMPROOT/device_check_pip.log" | sed 's/^/         /'
    exit 2
  fi
  python3 -m venv --without-pip "$VENV" || exit 2
  PURELIB=$("$VENV/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  { echo "${PYTHONPATH:-}" | tr ':' '\n' | grep -v '^$'; echo "$SITE"; echo "$ROOT"; } > "$PURELIB/device-check.pth"
  echo "python: a venv of its own ($VENV); its .pth names: $(tr '\n' ' ' < "$PURELIB/device-check.pth")"
  unset PYTHONPATH
  PY="$VENV/bin/python"
elif command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && [ "$INSTALL" = 1 ] && [ -z "$DRY" ]; then
  CUDA_MAJOR=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\)\..*/\1/p' | head -1)
  if [ -n "$CUDA_MAJOR" ] && [ "$CUDA_MAJOR" -ge 13 ]; then EXTRA="cuda13"; else EXTRA="cuda12"; fi
  VENV="$TMPROOT/jit-grader-gpu-venv"
  echo "install: jax[$EXTRA] into a fresh environment ($VENV) ..."
  rm -rf "$VENV"
  if "$BASE" -m venv --system-site-packages "$VENV" >"$TMPROOT/device_check_venv.log" 2>&1 \
      && timeout 120 "$VENV/bin/python" -m pip install -q --disable-pip-version-check --retries 0 --timeout 10 \
         -U "jax[$EXTRA]" >"$TMPROOT/device_check_pip.log" 2>&1; then
    PY="$VENV/bin/python"
    echo "install: done"
  else
    echo "install: COULD NOT INSTALL jax[$EXTRA] (no package index reachable, or no wheel for this Python):"
    grep -v '^\s*$' "$TMPROOT/device_check_pip.log" "$TMPROOT/device_check_venv.log" 2>/dev/null | tail -3 | sed 's/^/         /'
    echo "         grading with the JAX already installed ($BASE)"
  fi
fi
if [ -z "$WHEELS" ]; then
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
export XLA_PYTHON_CLIENT_PREALLOCATE=false  # a GPU is shared by a grading's processes
export PYTHONUNBUFFERED=1

# ---------------------------------------------------------------- 1. the device, 3. what the Python holds
EXPECT=$("$PY" - <<'EOF'
import importlib.util, platform, sys
missing = [m for m in ("jax", "numpy", "click", "nbformat", "grader") if importlib.util.find_spec(m) is None]
if missing:
    print(f"python: {sys.executable} lacks {', '.join(missing)}: install the grader's dependencies "
          "(pip install -e .), or give --wheels a folder of their wheels", file=sys.stderr)
    sys.exit(2)
import jax
from grader.runner.devices import accelerator
found = accelerator()
print(f"python: {sys.executable} ({platform.python_version()}), jax {jax.__version__} from {jax.__file__}",
      file=sys.stderr)
print("device: " + (f"{found.name} ({found.platform}, {'one process at a time' if found.exclusive else 'shared'}, "
                    f"device files {' '.join(found.nodes) or '-'})" if found else "no accelerator: grading on the CPU"),
      file=sys.stderr)
print(found.platform if found else "cpu")
EOF
) || exit 2
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
fi

# ---------------------------------------------------------------- 4. grade
OUTDIR="${OUT:-$ROOT/device-check-reports}"
"$PY" "$ROOT/scripts/device_check.py" --expect "$EXPECT" --out "$OUTDIR" "${SEED[@]}" "${ONLY[@]}" $DRY
status=$?
echo "== done in $(( $(date +%s) - started )) s (status $status); JSON reports in $OUTDIR =="
exit $status
