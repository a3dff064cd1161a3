"""The span cut (denoise.SHRINK_TO) on and off, in one process: held-out single- and multi-line tasks
decoded at T=4 with the shipped model's compiled steps, the two settings alternating task by task
(which goes first alternates too), so both see the same machine. Latency, exact match, edit
similarity and forward passes per setting; writes results/span_cut.json.

    python benchmarks/span_cut.py --data /work/data
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_task_args, load_engine, percentile, write  # noqa: E402

import spanfill.engine.engine as engine_module  # noqa: E402
from spanfill.engine import CompletionRequest  # noqa: E402
from spanfill.engine.corpus import read_split  # noqa: E402
from spanfill.engine.evaluate import build_tasks, edit_similarity, exact  # noqa: E402

CUT = engine_module.shrink_lengths


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_args(ap)
    args = ap.parse_args(argv)
    engine = load_engine(args.model)
    L = engine.model.cfg.span_length
    if not CUT(L):
        print(f"span length {L} has nothing shorter to cut to ({engine_module.SHRINK_TO})")
        return 1
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engine.tokenizer, L)
    runs: dict[tuple[str, str], list[tuple[float, bool, float, int]]] = {}
    try:
        for i, task in enumerate(tasks):
            engine.complete(CompletionRequest(prefix=task.prefix, suffix=task.suffix, steps=1))   # context cached
            for setting in (("cut", "whole") if i % 2 else ("whole", "cut")):
                engine_module.shrink_lengths = CUT if setting == "cut" else (lambda span_length: ())
                t0 = time.perf_counter()
                result = engine.complete(CompletionRequest(prefix=task.prefix, suffix=task.suffix, steps=args.steps))
                ms = (time.perf_counter() - t0) * 1e3
                text = result.texts[0]
                runs.setdefault((task.kind, setting), []).append(
                    (ms, exact(text, task.middle), edit_similarity(text.rstrip(), task.middle.rstrip()), result.steps_run))
    finally:
        engine_module.shrink_lengths = CUT
    rows = []
    for (kind, setting), vals in sorted(runs.items()):
        lat = [v[0] for v in vals]
        rows.append({"kind": kind, "setting": setting, "tasks": len(vals), "latency_median_ms": statistics.median(lat),
                     "latency_p95_ms": percentile(lat, 95), "exact_match": sum(v[1] for v in vals) / len(vals),
                     "edit_similarity": sum(v[2] for v in vals) / len(vals),
                     "forward_passes_mean": sum(v[3] for v in vals) / len(vals)})
        r = rows[-1]
        print(f"{kind:<7} {setting:<6} p50 {r['latency_median_ms']:6.1f} ms  p95 {r['latency_p95_ms']:6.1f} ms  "
              f"EM {r['exact_match']:.1%}  ES {r['edit_similarity']:.3f}  passes {r['forward_passes_mean']:.2f}")
    info = engine.info
    print(f"compiled fallbacks: {info['compiled_fallbacks']}")
    out = write("span_cut", {"engine": info, "steps": args.steps, "cut_to": list(CUT(L)), "rows": rows,
                             "command": "python benchmarks/span_cut.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
