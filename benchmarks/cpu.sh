#!/usr/bin/env bash
# Every CPU figure in benchmarks/README.md, in one go, on the shipped model (or MODEL=DIR), then
# benchmarks/README.md regenerated from what was written (benchmarks/report.py):
#
#   DATA=/path/to/data bash benchmarks/cpu.sh     # DATA: `spanfill data` output (default: data/)
#   RESULTS=benchmarks/results/NAME ...            # write the results there (default: benchmarks/results);
#                                                  # each directory gets a section of its own
#
# Takes ~30 minutes on a 2-core machine. Run it on an otherwise idle machine: the benchmarks time
# each other's neighbours, so a training run or test suite beside them makes every figure meaningless.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
DATA=${DATA:-data}
export SPANFILL_RESULTS=${RESULTS:-benchmarks/results}   # benchmarks/common.py and report.py read it
MODEL_ARGS=()
[ -n "${MODEL:-}" ] && MODEL_ARGS=(--model "$MODEL")
[ -f "$DATA/held_out.jsonl" ] || .venv/bin/spanfill data --out "$DATA"

.venv/bin/spanfill eval --data "$DATA" "${MODEL_ARGS[@]}" --out "$SPANFILL_RESULTS/eval.json"
$PY benchmarks/engine_micro.py --model "${MODEL:-DEFAULT}"
$PY benchmarks/engine_sweep.py --data "$DATA" "${MODEL_ARGS[@]}"
$PY benchmarks/limit.py "${MODEL_ARGS[@]}"
$PY benchmarks/span_cut.py --data "$DATA" "${MODEL_ARGS[@]}"
$PY benchmarks/int8.py --data "$DATA" "${MODEL_ARGS[@]}"
$PY benchmarks/tokenize_time.py --data "$DATA" "${MODEL_ARGS[@]}"
$PY benchmarks/replay.py --data "$DATA" "${MODEL_ARGS[@]}"
# the server's threads and the machine's other load varied (the threads table)
$PY benchmarks/replay.py --data "$DATA" "${MODEL_ARGS[@]}" --threads 2 --name replay_threads2
$PY benchmarks/replay.py --data "$DATA" "${MODEL_ARGS[@]}" --background-load 2 --name replay_busy
$PY benchmarks/replay.py --data "$DATA" "${MODEL_ARGS[@]}" --threads 2 --background-load 2 --name replay_busy_threads2
$PY benchmarks/report.py
