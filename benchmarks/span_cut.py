"""The span cut (`CompletionRequest.shrink_span`, decoding/length.py) on and off, in one process:
held-out single- and multi-line tasks decoded at T=4 with the shipped model's compiled steps, the two settings alternating task by task
(which goes first alternates too), so both see the same machine. Latency, exact match, edit
similarity and forward passes per setting; writes results/span_cut.json.

    python benchmarks/span_cut.py --data /work/data
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_task_args, load_engine, write  # noqa: E402

from spanfill.engine import build_tasks, read_split, score, shrink_lengths, summarise, warm  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_args(ap)
    args = ap.parse_args(argv)
    engine = load_engine(args.model)
    L = engine.model.cfg.span_length
    if not shrink_lengths(L):
        print(f"span length {L} has nothing shorter to cut to")
        return 1
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engine.tokenizer, L)
    runs: dict[tuple[str, str], list] = {}
    for i, task in enumerate(tasks):
        warm(engine, task)
        for setting in (("cut", "whole") if i % 2 else ("whole", "cut")):
            runs.setdefault((task.kind, setting), []).append(
                score(engine, task, steps=args.steps, shrink_span=setting == "cut"))
    rows = [{"kind": kind, "setting": setting, **summarise(vals)} for (kind, setting), vals in sorted(runs.items())]
    for r in rows:
        print(f"{r['kind']:<7} {r['setting']:<6} p50 {r['latency_median_ms']:6.1f} ms  p95 {r['latency_p95_ms']:6.1f} ms  "
              f"EM {r['exact_match']:.1%}  ES {r['edit_similarity']:.3f}  passes {r['forward_passes_mean']:.2f}")
    info = engine.info
    print(f"compiled fallbacks: {info['compiled_fallbacks']}")
    out = write("span_cut", {"engine": info, "steps": args.steps, "cut_to": list(shrink_lengths(L)), "rows": rows,
                             "command": "python benchmarks/span_cut.py " + " ".join(argv if argv is not None else sys.argv[1:])})
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
