#!/usr/bin/env bash
# GPU checks for spanfill, in one go on a CUDA machine (about 2-4 minutes once torch is there):
#   1. the Triton kernels against their torch references, compiled on the GPU (and interpreted on CPU),
#      and the CUDA-graph span step against the eager loop: tests/engine/test_kernels.py, test_cuda_step.py;
#   2. the engine latency sweep, L in {16,32,64} x T in {1,2,4,8} (graphs and eager) + AR: gpu_sweep.py.
#
#   bash benchmarks/gpu.sh          # writes to $OUT if set, else benchmarks/results/gpu/
#   bash benchmarks/gpu.sh families # instead: the public checkpoints' CUDA-graph test, then
#                                   # benchmarks/families.py at every public checkpoint's real shape with
#                                   # random weights (Dream 7B, Open-dCoder 0.5B, CoDA 1.7B, LLaDA 8B;
#                                   # about 3-5 minutes, capped at 8 once Python is set up)
#
# Python: if the machine's python3 (or $PYTHON) already has a CUDA torch, that one is used as it is,
# offline, with this checkout on PYTHONPATH (no install); otherwise a fresh venv gets `pip install -e
# .[dev]`, which needs PyPI and pulls the pinned torch (the CUDA build on Linux x86_64).
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
OUT_DIR=${OUT:-$REPO/benchmarks/results/gpu}
mkdir -p "$OUT_DIR"
LOG="$OUT_DIR/gpu.log"
: >"$LOG"
say() { echo "[gpu.sh $(date +%H:%M:%S)] $*" | tee -a "$LOG" >&2; }
trap 'say "FAILED at line $LINENO (exit $?)"' ERR

PY=${PYTHON:-python3}
if timeout 120 "$PY" -c 'import sys, torch; sys.exit(0 if torch.cuda.is_available() else 1)' 2>>"$LOG"; then
    say "using $(command -v "$PY")'s own torch; spanfill from this checkout via PYTHONPATH (nothing installed)"
    SHIM=$(mktemp -d)/site                     # the package-dir mapping of pyproject.toml, as links
    mkdir -p "$SHIM/spanfill"
    touch "$SHIM/spanfill/__init__.py"
    ln -s "$REPO/engine" "$SHIM/spanfill/engine"
    ln -s "$REPO/server" "$SHIM/spanfill/server"
    export PYTHONPATH="$SHIM${PYTHONPATH:+:$PYTHONPATH}"
else
    VENV=${SPANFILL_GPU_VENV:-/tmp/spanfill-gpu-venv}
    say "no CUDA torch in $PY; installing .[dev] into $VENV (needs PyPI)"
    "$PY" -m venv "$VENV"
    timeout 1200 "$VENV/bin/python" -m pip install --quiet -e '.[dev]' 2>&1 | tee -a "$LOG" \
        || { say "pip install -e .[dev] failed (is PyPI reachable from here?)"; exit 3; }
    PY="$VENV/bin/python"
fi

if ! "$PY" - 2>&1 <<'EOF' | tee -a "$LOG"; then
import sys, torch
ok = torch.cuda.is_available()
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, available: {ok}"
      + (f", device: {torch.cuda.get_device_name(0)}" if ok else ""))
try:
    import triton
    print(f"triton {triton.__version__}")
except ImportError:
    print("triton is NOT importable: the kernels and CUDA graphs fall back to torch")
import spanfill.engine, tokenizers, safetensors, pytest  # noqa: E401,F401  what the checks need
sys.exit(0 if ok else 1)
EOF
    say "CUDA is NOT available to $PY after setup (a CPU-only torch, or no driver): nothing to check on a GPU"
    exit 2
fi

if [ "${1:-}" = families ]; then
    say "public checkpoint shapes, random weights: benchmarks/families.py"
    status=0
    timeout 60 "$PY" -m pytest -q -p no:cacheprovider -rs tests/engine/test_families.py -k cuda 2>&1 | tee -a "$LOG" || status=$?
    timeout 400 "$PY" benchmarks/families.py --device cuda --shapes all --out "$OUT_DIR" 2>&1 | tee -a "$LOG" || status=$?
    say "done (exit $status); results in $OUT_DIR"
    exit "$status"
fi

status=0
say "kernel and CUDA-step tests"
timeout 180 "$PY" -m pytest -q -p no:cacheprovider -rs tests/engine/test_kernels.py tests/engine/test_cuda_step.py \
    --junitxml "$OUT_DIR/gpu_tests.xml" 2>&1 | tee -a "$LOG" || status=$?
say "latency sweep"
timeout 180 "$PY" benchmarks/gpu_sweep.py --out "$OUT_DIR" 2>&1 | tee -a "$LOG" || status=$?
say "done (exit $status); results in $OUT_DIR"
exit "$status"
