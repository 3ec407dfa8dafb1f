#!/usr/bin/env bash
# The GPU check: grade the solutions and a few mistakes on this machine's accelerator, and
# print the verdicts, ex06's speed-ups (the solution's against the reference's) and the
# device, in a few screens. Under 5 minutes on one GPU; run it from anywhere in the repo.
#
#   scripts/gpu_check.sh [--no-install] [--dry-run] [--seed N]
#
# 1. The device: nvidia-smi's GPU, driver and CUDA version, or "no NVIDIA GPU found".
# 2. With a GPU (and without --no-install), JAX's CUDA build goes into a fresh virtual
#    environment, as JAX's installation guide says (docs.jax.dev/en/latest/installation.html,
#    jax-ml/jax docs/installation.md): pip install -U "jax[cuda13]" for a driver of CUDA 13
#    or later, "jax[cuda12]" for CUDA 12 (driver >= 525.60.13). The environment sees the
#    system's packages, so only JAX comes from the package index. When that cannot be done
#    (no index reachable, no wheel for this Python), it says so and grades with the JAX
#    already installed.
# 3. The Python chosen must import jax, numpy and click (the grader's own dependencies);
#    it prints JAX's backend and device kind before grading.
# 4. scripts/gpu_check.py grades the solutions and the mistakes and prints the summary.
#    XLA_PYTHON_CLIENT_PREALLOCATE=false: every exercise's process (both sides at once)
#    shares the one GPU, and JAX would otherwise take 75 % of its memory in each.
#
# On a machine without a GPU it grades on the CPU (step 2 is skipped), so it can be tried
# anywhere; --dry-run stops after printing the device, the Python and the plan. The JSON
# reports are kept in $OUT when that is set (the device tool's output folder).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 2
ROOT=$PWD

INSTALL=1
DRY=""
SEED=20260
while [ $# -gt 0 ]; do
  case "$1" in
    --no-install) INSTALL=0 ;;
    --dry-run) DRY="--dry-run" ;;
    --seed) SEED="$2"; shift ;;
    -h|--help) sed -n '2,26p' "$0"; exit 0 ;;
    *) echo "gpu_check: unknown option $1 (try --help)"; exit 2 ;;
  esac
  shift
done
started=$(date +%s)
echo "== GPU check of jit-grader ($(git rev-parse --short HEAD 2>/dev/null || echo '?'), seed $SEED) =="

# ---------------------------------------------------------------- 1. the device
GPU=0
CUDA_MAJOR=""
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  GPU=1
  echo "GPU: $(nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | head -1)"
  CUDA_MAJOR=$(nvidia-smi | sed -n 's/.*CUDA Version: *\([0-9]*\)\..*/\1/p' | head -1)
  echo "     the driver supports CUDA ${CUDA_MAJOR:-?}; device files: $(ls -l /dev/nvidia* 2>/dev/null | awk '{print $1, $NF}' | head -3 | tr '\n' ' ')"
else
  echo "GPU: no NVIDIA GPU found (no working nvidia-smi): grading on the CPU"
fi

# ---------------------------------------------------------------- 2. Python and JAX
if [ -x "$ROOT/.venv/bin/python" ]; then
  BASE="$ROOT/.venv/bin/python"
else
  BASE=$(command -v python3)
fi
PY="$BASE"
if [ "$GPU" = 1 ] && [ "$INSTALL" = 1 ] && [ -z "$DRY" ]; then
  if [ -n "$CUDA_MAJOR" ] && [ "$CUDA_MAJOR" -ge 13 ]; then EXTRA="cuda13"; else EXTRA="cuda12"; fi
  VENV="${TMPDIR:-/tmp}/jit-grader-gpu-venv"
  echo "install: jax[$EXTRA] into a fresh environment ($VENV) ..."
  rm -rf "$VENV"
  if "$BASE" -m venv --system-site-packages "$VENV" >/tmp/gpu_check_venv.log 2>&1 \
      && timeout 120 "$VENV/bin/python" -m pip install -q --disable-pip-version-check --retries 0 --timeout 10 \
         -U "jax[$EXTRA]" >/tmp/gpu_check_pip.log 2>&1; then
    PY="$VENV/bin/python"
    echo "install: done"
  else
    echo "install: COULD NOT INSTALL jax[$EXTRA] (no package index reachable, or no wheel for this Python):"
    grep -v '^\s*$' /tmp/gpu_check_pip.log /tmp/gpu_check_venv.log 2>/dev/null | tail -3 | sed 's/^/         /'
    echo "         grading with the JAX already installed ($BASE)"
  fi
elif [ "$GPU" = 1 ] && [ "$INSTALL" = 0 ]; then
  echo "install: skipped (--no-install): grading with the JAX already installed"
fi

export XLA_PYTHON_CLIENT_PREALLOCATE=false
export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
if ! "$PY" - <<'EOF'
import importlib.util, platform, sys
missing = [m for m in ("jax", "numpy", "click", "grader") if importlib.util.find_spec(m) is None]
if missing:
    print(f"python: {sys.executable} lacks {', '.join(missing)}: install the grader's dependencies "
          "(pip install -e .) and run this again")
    sys.exit(2)
import jax
device = jax.devices()[0]
print(f"python: {sys.executable} ({platform.python_version()}), jax {jax.__version__}; "
      f"backend {jax.default_backend()}, device_kind {device.device_kind}, {jax.device_count()} device(s)")
EOF
then
  exit 2
fi

# ---------------------------------------------------------------- 3. grade
EXPECT=""
[ "$GPU" = 1 ] && EXPECT="--expect-gpu"
"$PY" "$ROOT/scripts/gpu_check.py" --seed "$SEED" $DRY $EXPECT
status=$?
echo "== done in $(( $(date +%s) - started )) s (status $status) =="
exit $status
