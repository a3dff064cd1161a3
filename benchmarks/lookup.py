"""Prompt lookup in greedy AR decoding (`Engine.lookup_tokens`; 0 turns it off) on and off: held-out single-
and multi-line tasks, the default request (diffusion with the AR check or fallback) and AR mode, every setting
on every task in one process (the order rotates with the task), each as the server asks. Per kind and mode:
median and mean latency, forward passes, shown exact match with lookup and without, and the tasks won and lost
and the edit-similarity difference ± its standard error, task by task (int8 matmuls scale each call's
activations as one, so a pass over several tokens may round a token's logits differently from its own pass).
Writes results/lookup.json.

    python benchmarks/lookup.py --data /work/data --single 600 --multi 150 --threads 1
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from common import add_task_args, alternate, load_engine, paired, task_counts, write  # noqa: E402

from spanfill.engine import CompletionRequest, Cursor, Shown, build_tasks, read_split, score_text  # noqa: E402

SETTINGS = [("default", True), ("default", False), ("ar", True), ("ar", False)]


def run(engine, task, setting, default: int):
    mode, lookup = setting
    engine.lookup_tokens = default if lookup else 0
    shown = Shown(Cursor(task.prefix, task.suffix), python=True)   # held-out tasks are Python files
    req = CompletionRequest(prefix=task.prefix, suffix=task.suffix, would_show=shown.would_show,
                            mode="ar" if mode == "ar" else "diffusion")
    t0 = time.perf_counter()
    result = engine.complete(req)
    ms = (time.perf_counter() - t0) * 1e3
    return score_text(task, result.texts[0], ms, result.forward_passes, lambda raw, _cursor: shown.text(raw))



def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_task_args(ap)
    ap.add_argument("--threads", type=int, default=None, help="intra-op threads (default: torch's)")
    ap.add_argument("--eager", action="store_true", help="the eager steps (the compiled ones by default)")
    args = ap.parse_args(argv)
    engine = load_engine(args.model, args.eager, threads=args.threads)
    default = engine.lookup_tokens
    tasks = build_tasks(read_split(args.data / "held_out.jsonl"), args.single, args.multi, engine.tokenizer,
                        engine.model.cfg.span_length)
    runs = alternate([engine], tasks, SETTINGS, lambda task, setting: run(engine, task, setting, default))
    engine.lookup_tokens = default
    rows = []
    for kind in ("single", "multi"):
        for mode in ("default", "ar"):
            on, off = runs.get((kind, (mode, True))), runs.get((kind, (mode, False)))
            if not on:
                continue
            mean = lambda scores, field: statistics.fmean(getattr(s, field) for s in scores)   # noqa: E731
            row = {"kind": kind, "mode": mode, "tasks": len(on),
                   "p50_ms": [statistics.median(s.latency_ms for s in r) for r in (on, off)],
                   "mean_ms": [mean(r, "latency_ms") for r in (on, off)],
                   "passes": [mean(r, "forward_passes") for r in (on, off)],
                   "exact_match": [mean(r, "shown_exact_match") for r in (on, off)],
                   "edit_similarity": [mean(r, "shown_edit_similarity") for r in (on, off)],
                   "vs_off": paired(on, off)}
            rows.append(row)
            print(f"{kind:6s} {mode:7s} p50 {row['p50_ms'][0]:6.1f} vs {row['p50_ms'][1]:6.1f} ms  "
                  f"mean {row['mean_ms'][0]:6.1f} vs {row['mean_ms'][1]:6.1f}  passes {row['passes'][0]:5.2f} vs "
                  f"{row['passes'][1]:5.2f}  EM {row['exact_match'][0]:.3f} vs {row['exact_match'][1]:.3f} "
                  f"(+{row['vs_off']['won']}/-{row['vs_off']['lost']}; ES {row['vs_off']['es_diff']:+.4f} ± "
                  f"{row['vs_off']['es_diff_se']:.4f})")
    path = write("lookup", {"command": "python benchmarks/lookup.py " + " ".join(sys.argv[1:] if argv is None else argv),
                            "engine": engine.info, "lookup_tokens": default, "tasks": task_counts(tasks),
                            "rows": rows})
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
