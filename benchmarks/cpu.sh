#!/usr/bin/env bash
# Every CPU figure in benchmarks/README.md, in one go, on the shipped model (or MODEL=DIR), then
# benchmarks/README.md regenerated from what was written (benchmarks/report.py):
#
#   DATA=/path/to/data bash benchmarks/cpu.sh     # DATA: `spanfill data` output (default: data/)
#   RESULTS=benchmarks/results/NAME ...            # write the results there (default: benchmarks/results);
#                                                  # each directory gets a section of its own
#   SOAK=1 ...                                     # the soak too (benchmarks/soak.py): 30 minutes more
#
# Takes more than 30 minutes on a 2-core machine, without the soak. Run it on an otherwise idle
# machine: the benchmarks time each other's neighbours, so a training run or test suite beside them
# makes every figure meaningless.
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
$PY benchmarks/protocol_rtt.py "${MODEL_ARGS[@]}"
$PY benchmarks/families.py --threads 1
$PY benchmarks/length.py --data "$DATA" "${MODEL_ARGS[@]}" --eager --single 300 --multi 150
$PY benchmarks/head_quantile.py --data "$DATA" "${MODEL_ARGS[@]}" --eager --multi 500 --quantiles 0.3 0.4 0.5
$PY benchmarks/fallback_share.py --data "$DATA" "${MODEL_ARGS[@]}" --multi 600 --shares 0.5 0.9 1.0
$PY benchmarks/check.py --data "$DATA" "${MODEL_ARGS[@]}" --single 1000 --multi 200
$PY benchmarks/line_start.py --data "$DATA" "${MODEL_ARGS[@]}" --tasks 300
$PY benchmarks/windows.py --data "$DATA" "${MODEL_ARGS[@]}" --single 1000 --multi 200 --eager --shares 0.5 0.75 0.85 0.95 1
$PY benchmarks/train_throughput.py --data "$DATA"
# opt-in: 30 minutes of typing with document churn, then the bounded-resources cases (the soak table)
if [ "${SOAK:-0}" = 1 ]; then
    $PY benchmarks/soak.py --data "$DATA" "${MODEL_ARGS[@]}"
fi
$PY benchmarks/report.py
